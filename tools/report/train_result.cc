#include "train_result.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace kolo::bench {
namespace {

using nlohmann::json;

// The schema's keys of each type, with the member each one fills: the one
// list both directions walk.
template <typename T>
struct Field {
  const char* key;
  std::optional<T> TrainResult::*member;
};

constexpr Field<double> kDoubles[] = {
    {"images_per_second_per_worker",
     &TrainResult::images_per_second_per_worker},
    {"seconds", &TrainResult::seconds},
    {"step_ms", &TrainResult::step_ms},
    {"communication_seconds", &TrainResult::communication_seconds},
    {"negotiation_seconds", &TrainResult::negotiation_seconds},
    {"waiting_seconds", &TrainResult::waiting_seconds},
    {"final_loss", &TrainResult::final_loss},
    {"test_accuracy", &TrainResult::test_accuracy},
    {"train_loss", &TrainResult::train_loss},
    {"wall_seconds", &TrainResult::wall_seconds},
    {"train_seconds", &TrainResult::train_seconds},
    {"loss_scale", &TrainResult::loss_scale}};

constexpr Field<int64_t> kIntegers[] = {
    {"test_correct", &TrainResult::test_correct},
    {"test_total", &TrainResult::test_total},
    {"images_trained", &TrainResult::images_trained},
    {"skipped_steps", &TrainResult::skipped_steps}};

constexpr const char* kMemoryKeys[] = {"optimizer_state_bytes",
                                       "gradient_bytes", "master_weight_bytes"};
constexpr const char* kPhaseKeys[] = {"data", "forward", "backward", "step"};

std::optional<std::vector<int64_t>> RankMemory::*const kMemoryLists[] = {
    &RankMemory::optimizer_state_bytes, &RankMemory::gradient_bytes,
    &RankMemory::master_weight_bytes};

double* Phase(StepPhases& p, size_t i) {
  double* phases[] = {&p.data, &p.forward, &p.backward, &p.step};
  return phases[i];
}

// Reads `object[key]` (named `name` in errors) into the typed value.
class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  Status Wrong(const std::string& name, const json& value,
               const char* want) const {
    return InvalidArgument(
        fmt::format("{}: {} is {}, not {}", source_, name, value.dump(), want));
  }
  StatusOr<double> Number(const std::string& name, const json& value) const {
    if (!value.is_number()) return Wrong(name, value, "a number");
    return value.get<double>();
  }
  StatusOr<int64_t> Integer(const std::string& name, const json& value) const {
    if (!value.is_number_integer()) return Wrong(name, value, "an integer");
    return value.get<int64_t>();
  }
  StatusOr<std::vector<int64_t>> Counts(const std::string& name,
                                        const json& value) const {
    std::vector<int64_t> out;
    if (!value.is_array()) return Wrong(name, value, "a list");
    for (const json& v : value) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return InvalidArgument(
            fmt::format("{}: {} is {}: not all non-negative integers", source_,
                        name, value.dump()));
      }
      out.push_back(v.get<int64_t>());
    }
    return out;
  }
  StatusOr<RankMemory> Memory(const json& value) const {
    if (!value.is_object()) return Wrong("result.memory", value, "an object");
    RankMemory m;
    for (const auto& [key, list] : value.items()) {
      const auto known =
          std::find(std::begin(kMemoryKeys), std::end(kMemoryKeys), key);
      if (known == std::end(kMemoryKeys)) {
        m.extra[key] = list;
        continue;
      }
      KOLO_ASSIGN_OR_RETURN(m.*kMemoryLists[known - std::begin(kMemoryKeys)],
                            Counts("result.memory." + key, list));
    }
    return m;
  }
  StatusOr<StepPhases> Phases(const json& value) const {
    if (!value.is_object()) return Wrong("result.phase_ms", value, "an object");
    StepPhases p;
    for (size_t i = 0; i < 4; ++i) {
      const auto it = value.find(kPhaseKeys[i]);
      if (it == value.end()) continue;
      KOLO_ASSIGN_OR_RETURN(
          *Phase(p, i),
          Number(fmt::format("result.phase_ms.{}", kPhaseKeys[i]), *it));
    }
    return p;
  }

 private:
  const std::string& source_;
};

// Reads one key of the schema into `out`; false when `key` is not one.
StatusOr<bool> ReadField(const Reader& read, const std::string& key,
                         const json& value, TrainResult& out) {
  const std::string name = "result." + key;
  if (key == "images_per_second") {
    KOLO_ASSIGN_OR_RETURN(out.images_per_second, read.Number(name, value));
    return true;
  }
  for (const Field<double>& f : kDoubles) {
    if (key != f.key) continue;
    KOLO_ASSIGN_OR_RETURN(out.*f.member, read.Number(name, value));
    return true;
  }
  for (const Field<int64_t>& f : kIntegers) {
    if (key != f.key) continue;
    KOLO_ASSIGN_OR_RETURN(out.*f.member, read.Integer(name, value));
    return true;
  }
  if (key == "peak_rss_bytes") {
    KOLO_ASSIGN_OR_RETURN(out.peak_rss_bytes, read.Counts(name, value));
  } else if (key == "memory") {
    KOLO_ASSIGN_OR_RETURN(out.memory, read.Memory(value));
  } else if (key == "phase_ms") {
    KOLO_ASSIGN_OR_RETURN(out.phase_ms, read.Phases(value));
  } else if (key == "parameter_checksum") {
    if (!value.is_string()) return read.Wrong(name, value, "a string");
    out.parameter_checksum = value.get<std::string>();
  } else {
    return false;
  }
  return true;
}

}  // namespace

json ToJson(const TrainResult& r) {
  json out = r.extra.is_object() ? r.extra : json::object();
  out["images_per_second"] = r.images_per_second;
  for (const Field<double>& f : kDoubles) {
    if (r.*f.member) out[f.key] = *(r.*f.member);
  }
  for (const Field<int64_t>& f : kIntegers) {
    if (r.*f.member) out[f.key] = *(r.*f.member);
  }
  if (r.peak_rss_bytes) out["peak_rss_bytes"] = *r.peak_rss_bytes;
  if (r.memory) {
    json& memory = out["memory"];
    memory = r.memory->extra.is_object() ? r.memory->extra : json::object();
    for (size_t i = 0; i < 3; ++i) {
      const auto& list = (*r.memory).*kMemoryLists[i];
      if (list) memory[kMemoryKeys[i]] = *list;
    }
  }
  if (r.phase_ms) {
    StepPhases p = *r.phase_ms;
    for (size_t i = 0; i < 4; ++i)
      out["phase_ms"][kPhaseKeys[i]] = *Phase(p, i);
  }
  if (r.parameter_checksum) out["parameter_checksum"] = *r.parameter_checksum;
  return out;
}

StatusOr<TrainResult> TrainResultFromJson(const json& result,
                                          const std::string& source) {
  const Reader read(source);
  if (!result.is_object()) return read.Wrong("result", result, "an object");
  if (!result.contains("images_per_second")) {
    return InvalidArgument(
        fmt::format("{}: no result.images_per_second", source));
  }
  TrainResult out;
  for (const auto& [key, value] : result.items()) {
    KOLO_ASSIGN_OR_RETURN(bool known, ReadField(read, key, value, out));
    if (!known) out.extra[key] = value;
  }
  return out;
}

StatusOr<TrainResult> TrainResultOfJob(const json& job,
                                       const std::string& source) {
  if (!job.is_object() || !job.contains("result")) {
    return InvalidArgument(fmt::format("{}: no result in its JSON", source));
  }
  return TrainResultFromJson(job["result"], source);
}

}  // namespace kolo::bench
