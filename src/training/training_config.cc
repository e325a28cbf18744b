#include "kolo/training_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

namespace kolo {
namespace {

using Json = nlohmann::json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string Lower(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return text;
}

std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

bool IsAuto(const Json& value) {
  if (value.is_string()) return value.get_ref<const std::string&>() == "auto";
  if (value.is_array()) {
    for (const Json& item : value) {
      if (IsAuto(item)) return true;
    }
  }
  return false;
}

// Reads typed members out of the parsed document. Every error starts with
// the source and names the key's full path and the value found, so that a
// user can fix the file from the message alone. A member whose value is
// null counts as absent, as it does for DeepSpeed's dict.get().
class Reader {
 public:
  Reader(std::string source, std::vector<std::string>* warnings)
      : source_(std::move(source)), warnings_(warnings) {}

  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgument(source_ + ": '" + path + "' " + what);
  }
  Status BadValue(const std::string& path, const Json& value,
                  const std::string& expected) const {
    return Error(path, "must be " + expected + ", got " + value.dump());
  }

  // The member, or nullptr when it is absent or null; `*present` (when
  // given) says which.
  StatusOr<const Json*> Member(const Json& object, const std::string& prefix,
                               const std::string& key,
                               bool* present = nullptr) const {
    auto it = object.find(key);
    const bool found = it != object.end() && !it->is_null();
    if (present != nullptr) *present = found;
    if (!found) return nullptr;
    if (IsAuto(*it)) {
      return Error(Join(prefix, key),
                   "is \"auto\"; kolo needs a value (DeepSpeed's \"auto\" is "
                   "filled in by the HuggingFace integration)");
    }
    return &*it;
  }

  // Each Read* leaves `out` untouched when the member is absent and sets
  // `*present` (when given) to whether it was there.
  Status ReadObject(const Json& object, const std::string& prefix,
                    const std::string& key, const Json** out) const {
    KOLO_ASSIGN_OR_RETURN(const Json* value, Member(object, prefix, key));
    *out = value;
    if (value != nullptr && !value->is_object()) {
      return BadValue(Join(prefix, key), *value, "an object");
    }
    return Status::Ok();
  }

  Status ReadBool(const Json& object, const std::string& prefix,
                  const std::string& key, bool* out) const {
    KOLO_ASSIGN_OR_RETURN(const Json* value, Member(object, prefix, key));
    if (value == nullptr) return Status::Ok();
    if (!value->is_boolean()) {
      return BadValue(Join(prefix, key), *value, "true or false");
    }
    *out = value->get<bool>();
    return Status::Ok();
  }

  Status ReadString(const Json& object, const std::string& prefix,
                    const std::string& key, std::string* out,
                    bool* present = nullptr) const {
    KOLO_ASSIGN_OR_RETURN(const Json* value,
                          Member(object, prefix, key, present));
    if (value == nullptr) return Status::Ok();
    if (!value->is_string()) {
      return BadValue(Join(prefix, key), *value, "a string");
    }
    *out = value->get<std::string>();
    return Status::Ok();
  }

  // A number >= `min` (> `min` when `exclusive`).
  Status ReadNumber(const Json& object, const std::string& prefix,
                    const std::string& key, double min, bool exclusive,
                    double* out, bool* present = nullptr) const {
    KOLO_ASSIGN_OR_RETURN(const Json* value,
                          Member(object, prefix, key, present));
    if (value == nullptr) return Status::Ok();
    std::string expected = "a number";
    if (min != -std::numeric_limits<double>::infinity()) {
      expected += (exclusive ? " > " : " >= ") + FormatNumber(min);
    }
    if (!value->is_number()) {
      return BadValue(Join(prefix, key), *value, expected);
    }
    double number = value->get<double>();
    if (exclusive ? !(number > min) : !(number >= min)) {
      return BadValue(Join(prefix, key), *value, expected);
    }
    *out = number;
    return Status::Ok();
  }

  // An integer from `min` to `max`. DeepSpeed's own examples write sizes as
  // 5e8, which JSON parses as a float: integral floats are accepted,
  // fractions are not.
  Status ReadInteger(const Json& object, const std::string& prefix,
                     const std::string& key, int64_t min, int64_t max,
                     int64_t* out, bool* present = nullptr) const {
    KOLO_ASSIGN_OR_RETURN(const Json* value,
                          Member(object, prefix, key, present));
    if (value == nullptr) return Status::Ok();
    std::string expected = "an integer";
    if (max == kInt64Max) {
      expected += " >= " + std::to_string(min);
    } else {
      expected += " from " + std::to_string(min) + " to " + std::to_string(max);
    }
    const std::string path = Join(prefix, key);
    int64_t number = 0;
    if (value->is_number_unsigned()) {
      uint64_t u = value->get<uint64_t>();
      if (u > static_cast<uint64_t>(kInt64Max)) {
        return BadValue(path, *value, expected);
      }
      number = static_cast<int64_t>(u);
    } else if (value->is_number_integer()) {
      number = value->get<int64_t>();
    } else if (value->is_number_float()) {
      double d = value->get<double>();
      // 2^63 is the first double past int64_t's range.
      if (d != std::floor(d) || d < -9223372036854775808.0 ||
          d >= 9223372036854775808.0) {
        return BadValue(path, *value, expected);
      }
      number = static_cast<int64_t>(d);
    } else {
      return BadValue(path, *value, expected);
    }
    if (number < min || number > max) return BadValue(path, *value, expected);
    *out = number;
    return Status::Ok();
  }

  Status ReadInt32(const Json& object, const std::string& prefix,
                   const std::string& key, int32_t min, int32_t max,
                   int32_t* out) const {
    int64_t number = *out;
    KOLO_RETURN_IF_ERROR(
        ReadInteger(object, prefix, key, min, max, &number, nullptr));
    *out = static_cast<int32_t>(number);
    return Status::Ok();
  }

  // One warning per member of `object` not in `known`.
  void WarnUnknown(const Json& object, const std::string& prefix,
                   std::initializer_list<const char*> known) const {
    std::set<std::string> names(known.begin(), known.end());
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (names.count(it.key()) == 0) Warn(Join(prefix, it.key()), "");
    }
  }

  // `why` follows "is not used by kolo"; empty for a key kolo never reads.
  void Warn(const std::string& path, const std::string& why) const {
    warnings_->push_back(source_ + ": '" + path + "' is not used by kolo" +
                         why + "; ignored");
  }

 private:
  static std::string FormatNumber(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
  }

  std::string source_;
  std::vector<std::string>* warnings_;
};

// Reads the `type` of the section `prefix` ({"type": ..., "params": {...}}),
// which must be one of `kinds`, matched without regard to case; returns it
// as written in `type` and its value in `out`. The error lists the kinds.
template <typename T>
Status ReadSectionType(const Reader& r, const Json& section,
                       const std::string& prefix,
                       const std::vector<std::pair<const char*, T>>& kinds,
                       std::string* type, T* out) {
  r.WarnUnknown(section, prefix, {"type", "params"});
  bool has_type = false;
  KOLO_RETURN_IF_ERROR(r.ReadString(section, prefix, "type", type, &has_type));
  if (!has_type) return r.Error(prefix + ".type", "is missing");
  std::string known;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (Lower(*type) == Lower(kinds[i].first)) {
      *out = kinds[i].second;
      return Status::Ok();
    }
    known += (i == 0 ? "" : i + 1 == kinds.size() ? " and " : ", ");
    known += kinds[i].first;
  }
  return r.Error(prefix + ".type",
                 "is " + Json(*type).dump() + "; kolo knows " + known);
}

Status ParseOptimizer(const Reader& r, const Json& section,
                      OptimizerConfig* out) {
  const std::string prefix = "optimizer";
  std::string type;
  KOLO_RETURN_IF_ERROR(
      ReadSectionType<OptimizerType>(r, section, prefix,
                                     {{"Adam", OptimizerType::kAdam},
                                      {"AdamW", OptimizerType::kAdamW},
                                      {"SGD", OptimizerType::kSgd}},
                                     &type, &out->type));
  const Json* params = nullptr;
  KOLO_RETURN_IF_ERROR(r.ReadObject(section, prefix, "params", &params));
  if (params == nullptr) return Status::Ok();
  const std::string p = "optimizer.params";
  r.WarnUnknown(*params, p,
                {"lr", "betas", "eps", "weight_decay", "amsgrad", "momentum",
                 "dampening", "nesterov"});
  KOLO_RETURN_IF_ERROR(r.ReadNumber(*params, p, "lr", 0, false, &out->lr));
  KOLO_RETURN_IF_ERROR(
      r.ReadNumber(*params, p, "weight_decay", 0, false, &out->weight_decay));
  const bool sgd = out->type == OptimizerType::kSgd;
  // The keys of the other family would be a TypeError in torch's
  // constructor; kolo names them and goes on.
  const std::string not_for = sgd ? " with SGD" : " with Adam or AdamW";
  for (const char* key : {"betas", "eps", "amsgrad"}) {
    if (sgd && params->contains(key)) r.Warn(Join(p, key), not_for);
  }
  for (const char* key : {"momentum", "dampening", "nesterov"}) {
    if (!sgd && params->contains(key)) r.Warn(Join(p, key), not_for);
  }
  if (sgd) {
    KOLO_RETURN_IF_ERROR(
        r.ReadNumber(*params, p, "momentum", 0, false, &out->momentum));
    KOLO_RETURN_IF_ERROR(
        r.ReadNumber(*params, p, "dampening", 0, false, &out->dampening));
    KOLO_RETURN_IF_ERROR(r.ReadBool(*params, p, "nesterov", &out->nesterov));
    // torch.optim.SGD refuses the same combination.
    if (out->nesterov && (out->momentum <= 0 || out->dampening != 0)) {
      return r.Error("optimizer.params.nesterov",
                     "needs momentum > 0 and dampening 0, got momentum " +
                         Json(out->momentum).dump() + " and dampening " +
                         Json(out->dampening).dump());
    }
    return Status::Ok();
  }
  KOLO_RETURN_IF_ERROR(r.ReadNumber(*params, p, "eps", 0, false, &out->eps));
  KOLO_RETURN_IF_ERROR(r.ReadBool(*params, p, "amsgrad", &out->amsgrad));
  KOLO_ASSIGN_OR_RETURN(const Json* betas, r.Member(*params, p, "betas"));
  if (betas != nullptr) {
    const std::string path = "optimizer.params.betas";
    const char* expected = "two numbers in [0, 1), as [0.9, 0.999]";
    if (!betas->is_array() || betas->size() != 2) {
      return r.BadValue(path, *betas, expected);
    }
    for (const Json& beta : *betas) {
      if (!beta.is_number() || beta.get<double>() < 0 ||
          beta.get<double>() >= 1) {
        return r.BadValue(path, *betas, expected);
      }
    }
    out->beta1 = (*betas)[0].get<double>();
    out->beta2 = (*betas)[1].get<double>();
  }
  return Status::Ok();
}

// The params of a scheduler section: the Reader, the object, its path.
struct SchedulerParams {
  const Reader& r;
  const Json& params;
  const std::string path = "scheduler.params";
};

Status ReadWarmupType(const SchedulerParams& in, LrScheduleConfig* out) {
  KOLO_RETURN_IF_ERROR(
      in.r.ReadString(in.params, in.path, "warmup_type", &out->warmup_type));
  if (out->warmup_type != "log" && out->warmup_type != "linear") {
    return in.r.BadValue("scheduler.params.warmup_type", out->warmup_type,
                         "\"log\" or \"linear\"");
  }
  return Status::Ok();
}

// total_num_steps, which the schedules that decay need; `type` as written.
Status ReadTotalSteps(const SchedulerParams& in, const std::string& type,
                      LrScheduleConfig* out) {
  bool present = false;
  KOLO_RETURN_IF_ERROR(in.r.ReadInteger(in.params, in.path, "total_num_steps",
                                        1, kInt64Max, &out->total_num_steps,
                                        &present));
  if (!present) {
    return in.r.Error("scheduler.params.total_num_steps",
                      "is missing; " + type + " needs it");
  }
  return Status::Ok();
}

// WarmupLR and WarmupDecayLR.
Status ParseWarmupSchedule(const SchedulerParams& in, const std::string& type,
                           const std::optional<OptimizerConfig>& optimizer,
                           LrScheduleConfig* out) {
  const Reader& r = in.r;
  const bool decay = out->type == LrScheduleType::kWarmupDecayLR;
  if (decay) {
    r.WarnUnknown(in.params, in.path,
                  {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
                   "warmup_type", "total_num_steps"});
    KOLO_RETURN_IF_ERROR(ReadTotalSteps(in, type, out));
  } else {
    r.WarnUnknown(
        in.params, in.path,
        {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type"});
  }
  KOLO_RETURN_IF_ERROR(r.ReadNumber(in.params, in.path, "warmup_min_lr", 0,
                                    false, &out->warmup_min_lr));
  bool has_max = false;
  KOLO_RETURN_IF_ERROR(r.ReadNumber(in.params, in.path, "warmup_max_lr", 0,
                                    false, &out->warmup_max_lr, &has_max));
  // DeepSpeed's WarmupLR (not WarmupDecayLR) warms up to the optimizer's
  // lr when warmup_max_lr is not given.
  if (!decay && !has_max) {
    out->warmup_max_lr_from_optimizer = true;
    if (optimizer) out->warmup_max_lr = optimizer->lr;
  }
  KOLO_RETURN_IF_ERROR(r.ReadInteger(in.params, in.path, "warmup_num_steps", 1,
                                     kInt64Max, &out->warmup_num_steps));
  return ReadWarmupType(in, out);
}

Status ParseWarmupCosineSchedule(const SchedulerParams& in,
                                 const std::string& type,
                                 LrScheduleConfig* out) {
  const Reader& r = in.r;
  r.WarnUnknown(in.params, in.path,
                {"total_num_steps", "warmup_min_ratio", "warmup_num_steps",
                 "cos_min_ratio", "warmup_type"});
  KOLO_RETURN_IF_ERROR(ReadTotalSteps(in, type, out));
  KOLO_RETURN_IF_ERROR(r.ReadNumber(in.params, in.path, "warmup_min_ratio", 0,
                                    false, &out->warmup_min_ratio));
  KOLO_RETURN_IF_ERROR(r.ReadNumber(in.params, in.path, "cos_min_ratio", 0,
                                    false, &out->cos_min_ratio));
  KOLO_RETURN_IF_ERROR(r.ReadInteger(in.params, in.path, "warmup_num_steps", 1,
                                     kInt64Max, &out->warmup_num_steps));
  return ReadWarmupType(in, out);
}

Status ParseOneCycleSchedule(const SchedulerParams& in, LrScheduleConfig* out) {
  const Reader& r = in.r;
  const Json& params = in.params;
  const std::string& p = in.path;
  r.WarnUnknown(
      params, p,
      {"cycle_min_lr", "cycle_max_lr", "decay_lr_rate", "cycle_first_step_size",
       "cycle_second_step_size", "cycle_first_stair_count",
       "cycle_second_stair_count", "decay_step_size", "cycle_momentum",
       "cycle_min_mom", "cycle_max_mom", "decay_mom_rate"});
  // DeepSpeed's OneCycle takes both bounds as required arguments.
  for (auto [key, field] : {std::pair{"cycle_min_lr", &out->cycle_min_lr},
                            std::pair{"cycle_max_lr", &out->cycle_max_lr}}) {
    bool present = false;
    KOLO_RETURN_IF_ERROR(
        r.ReadNumber(params, p, key, 0, false, field, &present));
    if (!present) return r.Error(Join(p, key), "is missing; OneCycle needs it");
  }
  KOLO_RETURN_IF_ERROR(
      r.ReadNumber(params, p, "decay_lr_rate", 0, false, &out->decay_lr_rate));
  // Step sizes and counts, each an integer from its minimum up.
  for (auto [key, min, field] :
       {std::tuple{"cycle_first_step_size", int64_t{1},
                   &out->cycle_first_step_size},
        std::tuple{"cycle_second_step_size", int64_t{0},
                   &out->cycle_second_step_size},
        std::tuple{"cycle_first_stair_count", int64_t{0},
                   &out->cycle_first_stair_count},
        std::tuple{"cycle_second_stair_count", int64_t{0},
                   &out->cycle_second_stair_count},
        std::tuple{"decay_step_size", int64_t{0}, &out->decay_step_size}}) {
    KOLO_RETURN_IF_ERROR(r.ReadInteger(params, p, key, min, kInt64Max, field));
  }
  KOLO_RETURN_IF_ERROR(
      r.ReadBool(params, p, "cycle_momentum", &out->cycle_momentum));
  KOLO_RETURN_IF_ERROR(
      r.ReadNumber(params, p, "cycle_min_mom", 0, false, &out->cycle_min_mom));
  KOLO_RETURN_IF_ERROR(
      r.ReadNumber(params, p, "cycle_max_mom", 0, false, &out->cycle_max_mom));
  constexpr double kAny = -std::numeric_limits<double>::infinity();
  return r.ReadNumber(params, p, "decay_mom_rate", kAny, false,
                      &out->decay_mom_rate);
}

Status ParseScheduler(const Reader& r, const Json& section,
                      const std::optional<OptimizerConfig>& optimizer,
                      LrScheduleConfig* out) {
  const std::string prefix = "scheduler";
  std::string type;
  KOLO_RETURN_IF_ERROR(ReadSectionType<LrScheduleType>(
      r, section, prefix,
      {{"WarmupLR", LrScheduleType::kWarmupLR},
       {"WarmupDecayLR", LrScheduleType::kWarmupDecayLR},
       {"WarmupCosineLR", LrScheduleType::kWarmupCosineLR},
       {"OneCycle", LrScheduleType::kOneCycle}},
      &type, &out->type));
  static const Json kEmpty = Json::object();
  const Json* params = nullptr;
  KOLO_RETURN_IF_ERROR(r.ReadObject(section, prefix, "params", &params));
  const SchedulerParams in{r, params != nullptr ? *params : kEmpty};
  switch (out->type) {
    case LrScheduleType::kWarmupLR:
    case LrScheduleType::kWarmupDecayLR:
      return ParseWarmupSchedule(in, type, optimizer, out);
    case LrScheduleType::kWarmupCosineLR:
      return ParseWarmupCosineSchedule(in, type, out);
    case LrScheduleType::kOneCycle: return ParseOneCycleSchedule(in, out);
    case LrScheduleType::kNone: break;
  }
  return Status::Ok();
}

// Returns whether fp16 is enabled.
StatusOr<bool> ParseFp16(const Reader& r, const Json& section,
                         LossScaleConfig* out) {
  const std::string p = "fp16";
  r.WarnUnknown(section, p,
                {"enabled", "loss_scale", "initial_scale_power",
                 "loss_scale_window", "hysteresis", "consecutive_hysteresis",
                 "min_loss_scale", "loss_scaler"});
  bool enabled = false;
  KOLO_RETURN_IF_ERROR(r.ReadBool(section, p, "enabled", &enabled));
  KOLO_RETURN_IF_ERROR(
      r.ReadNumber(section, p, "loss_scale", 0, false, &out->loss_scale));
  // 2^64 is far past any useful scale and still exact in a double.
  KOLO_RETURN_IF_ERROR(r.ReadInt32(section, p, "initial_scale_power", 0, 64,
                                   &out->initial_scale_power));
  KOLO_RETURN_IF_ERROR(r.ReadInteger(section, p, "loss_scale_window", 1,
                                     kInt64Max, &out->loss_scale_window));
  KOLO_RETURN_IF_ERROR(r.ReadInt32(section, p, "hysteresis", 1,
                                   std::numeric_limits<int32_t>::max(),
                                   &out->hysteresis));
  KOLO_RETURN_IF_ERROR(r.ReadBool(section, p, "consecutive_hysteresis",
                                  &out->consecutive_hysteresis));
  KOLO_RETURN_IF_ERROR(r.ReadNumber(section, p, "min_loss_scale", 0, true,
                                    &out->min_loss_scale));
  std::string rule;
  bool has_rule = false;
  KOLO_RETURN_IF_ERROR(
      r.ReadString(section, p, "loss_scaler", &rule, &has_rule));
  if (has_rule) {
    const std::string lower = Lower(rule);
    if (lower == "deepspeed") {
      out->rule = LossScaleRule::kDeepSpeed;
    } else if (lower == "torch") {
      out->rule = LossScaleRule::kTorchGradScaler;
    } else {
      return r.BadValue("fp16.loss_scaler", rule, "\"deepspeed\" or \"torch\"");
    }
  }
  return enabled;
}

Status ParseZero(const Reader& r, const Json& section, ZeroConfig* out) {
  const std::string p = "zero_optimization";
  r.WarnUnknown(section, p,
                {"stage", "reduce_bucket_size", "allgather_bucket_size",
                 "overlap_comm", "contiguous_gradients"});
  KOLO_ASSIGN_OR_RETURN(const Json* stage, r.Member(section, p, "stage"));
  if (stage != nullptr && stage->is_number() && stage->get<double>() == 3) {
    return r.Error("zero_optimization.stage",
                   "is 3; kolo does not support ZeRO stage 3 (parameter "
                   "sharding): use 0, 1 or 2");
  }
  KOLO_RETURN_IF_ERROR(r.ReadInt32(section, p, "stage", 0, 2, &out->stage));
  KOLO_RETURN_IF_ERROR(r.ReadInteger(section, p, "reduce_bucket_size", 1,
                                     kInt64Max, &out->reduce_bucket_size));
  KOLO_RETURN_IF_ERROR(r.ReadInteger(section, p, "allgather_bucket_size", 1,
                                     kInt64Max, &out->allgather_bucket_size));
  KOLO_RETURN_IF_ERROR(
      r.ReadBool(section, p, "overlap_comm", &out->overlap_comm));
  return r.ReadBool(section, p, "contiguous_gradients",
                    &out->contiguous_gradients);
}

// Returns whether bf16 is enabled.
StatusOr<bool> ParseBf16(const Reader& r, const Json& section,
                         const std::string& p) {
  r.WarnUnknown(section, p, {"enabled"});
  bool enabled = false;
  KOLO_RETURN_IF_ERROR(r.ReadBool(section, p, "enabled", &enabled));
  return enabled;
}

}  // namespace

StatusOr<TrainingConfig> ParseTrainingConfig(const std::string& json_text,
                                             const std::string& source) {
  Json doc;
  // nlohmann reports a parse error only as an exception; it carries the
  // line and column the user needs, so it is caught here at the edge. A
  // number too large for a double ("1e400") is out_of_range, not a
  // parse_error: every json exception is caught.
  try {
    doc = Json::parse(json_text);
  } catch (const Json::exception& e) {
    return InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object()) {
    return InvalidArgument(source + ": a configuration is a JSON object, got " +
                           std::string(doc.type_name()));
  }

  TrainingConfig config;
  Reader r(source, &config.warnings);
  r.WarnUnknown(doc, "",
                {"train_batch_size", "train_micro_batch_size_per_gpu",
                 "gradient_accumulation_steps", "optimizer", "scheduler",
                 "gradient_clipping", "fp16", "bf16", "bfloat16",
                 "zero_optimization", "steps_per_print", "seed"});

  KOLO_RETURN_IF_ERROR(r.ReadInteger(doc, "", "train_batch_size", 1, kInt64Max,
                                     &config.train_batch_size));
  KOLO_RETURN_IF_ERROR(r.ReadInteger(doc, "", "train_micro_batch_size_per_gpu",
                                     1, kInt64Max,
                                     &config.train_micro_batch_size_per_gpu));
  KOLO_RETURN_IF_ERROR(r.ReadInteger(doc, "", "gradient_accumulation_steps", 1,
                                     kInt64Max,
                                     &config.gradient_accumulation_steps));

  const Json* section = nullptr;
  KOLO_RETURN_IF_ERROR(r.ReadObject(doc, "", "optimizer", &section));
  if (section != nullptr) {
    OptimizerConfig optimizer;
    KOLO_RETURN_IF_ERROR(ParseOptimizer(r, *section, &optimizer));
    config.optimizer = optimizer;
  }
  KOLO_RETURN_IF_ERROR(r.ReadObject(doc, "", "scheduler", &section));
  if (section != nullptr) {
    KOLO_RETURN_IF_ERROR(
        ParseScheduler(r, *section, config.optimizer, &config.scheduler));
  }

  KOLO_RETURN_IF_ERROR(r.ReadNumber(doc, "", "gradient_clipping", 0, false,
                                    &config.gradient_clipping));

  bool fp16 = false;
  KOLO_RETURN_IF_ERROR(r.ReadObject(doc, "", "fp16", &section));
  if (section != nullptr) {
    KOLO_ASSIGN_OR_RETURN(fp16, ParseFp16(r, *section, &config.fp16));
  }
  // DeepSpeed reads "bf16", and the older "bfloat16" only when "bf16" is
  // absent.
  bool bf16 = false;
  std::string bf16_key = "bf16";
  KOLO_RETURN_IF_ERROR(r.ReadObject(doc, "", "bf16", &section));
  if (section == nullptr) {
    bf16_key = "bfloat16";
    KOLO_RETURN_IF_ERROR(r.ReadObject(doc, "", "bfloat16", &section));
  } else if (doc.contains("bfloat16")) {
    r.Warn("bfloat16", " when bf16 is given");
  }
  if (section != nullptr) {
    KOLO_ASSIGN_OR_RETURN(bf16, ParseBf16(r, *section, bf16_key));
  }
  if (fp16 && bf16) {
    return r.Error("fp16.enabled", "and '" + bf16_key +
                                       ".enabled' are both true; choose one "
                                       "precision");
  }
  config.precision = fp16   ? Precision::kFloat16
                     : bf16 ? Precision::kBFloat16
                            : Precision::kFloat32;

  KOLO_RETURN_IF_ERROR(r.ReadObject(doc, "", "zero_optimization", &section));
  if (section != nullptr) {
    KOLO_RETURN_IF_ERROR(ParseZero(r, *section, &config.zero_optimization));
  }
  KOLO_RETURN_IF_ERROR(r.ReadInteger(doc, "", "steps_per_print", 1, kInt64Max,
                                     &config.steps_per_print));

  KOLO_ASSIGN_OR_RETURN(const Json* seed, r.Member(doc, "", "seed"));
  if (seed != nullptr) {
    // A seed spans uint64_t, past what ReadInteger takes.
    if (seed->is_number_unsigned()) {
      config.seed = seed->get<uint64_t>();
    } else {
      int64_t value = 0;
      KOLO_RETURN_IF_ERROR(
          r.ReadInteger(doc, "", "seed", 0, kInt64Max, &value));
      config.seed = static_cast<uint64_t>(value);
    }
  }
  return config;
}

StatusOr<TrainingConfig> LoadTrainingConfig(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return NotFound("training configuration " + path +
                    ": cannot open it for reading");
  }
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) {
    return InvalidArgument("training configuration " + path + ": read failed");
  }
  return ParseTrainingConfig(text.str(), path);
}

Status ResolveBatchSizes(TrainingConfig* config, int32_t world_size) {
  if (world_size < 1) {
    return InvalidArgument("batch sizes: world size must be >= 1, got " +
                           std::to_string(world_size));
  }
  int64_t batch = config->train_batch_size;
  int64_t micro = config->train_micro_batch_size_per_gpu;
  int64_t steps = config->gradient_accumulation_steps;
  const std::string workers =
      std::to_string(world_size) + (world_size == 1 ? " worker" : " workers");
  const std::string batch_text = "train_batch_size " + std::to_string(batch);
  const std::string micro_text =
      "train_micro_batch_size_per_gpu " + std::to_string(micro);
  const std::string steps_text =
      "gradient_accumulation_steps " + std::to_string(steps);
  for (const auto& [value, text] :
       {std::pair{batch, &batch_text}, std::pair{micro, &micro_text},
        std::pair{steps, &steps_text}}) {
    if (value < 0) {
      return InvalidArgument("batch sizes: " + *text +
                             " is negative (0 means unset)");
    }
  }
  if (batch == 0 && micro == 0) {
    return InvalidArgument(
        "batch sizes: give train_batch_size or "
        "train_micro_batch_size_per_gpu (or both); " +
        (steps > 0 ? steps_text + " alone" : std::string("none is set")) +
        " does not determine the batch");
  }
  // Products that overflow int64_t are as wrong as ones that disagree.
  auto product = [](int64_t a, int64_t b, int64_t* out) {
    return !__builtin_mul_overflow(a, b, out);
  };
  // The global batch divided by (the given factor) x workers; the message
  // shows the divisor's arithmetic.
  auto divide = [&](int64_t factor, const std::string& factor_text,
                    int64_t* out) -> Status {
    int64_t divisor = 0;
    if (!product(factor, world_size, &divisor) || batch % divisor != 0) {
      const std::string arithmetic =
          factor_text.empty()
              ? workers
              : factor_text + " x " + workers + " = " + std::to_string(divisor);
      return InvalidArgument("batch sizes: " + batch_text +
                             " is not a multiple of " + arithmetic);
    }
    *out = batch / divisor;
    return Status::Ok();
  };

  if (batch > 0 && micro > 0 && steps > 0) {
    int64_t expected = 0;
    int64_t per_worker = 0;
    if (!product(micro, steps, &per_worker) ||
        !product(per_worker, world_size, &expected) || expected != batch) {
      return InvalidArgument("batch sizes: " + batch_text +
                             " != " + micro_text + " x " + steps_text + " x " +
                             workers + " = " + std::to_string(expected));
    }
  } else if (batch > 0 && micro > 0) {
    KOLO_RETURN_IF_ERROR(divide(micro, micro_text, &steps));
  } else if (batch > 0 && steps > 0) {
    KOLO_RETURN_IF_ERROR(divide(steps, steps_text, &micro));
  } else if (micro > 0 && steps > 0) {
    int64_t per_worker = 0;
    if (!product(micro, steps, &per_worker) ||
        !product(per_worker, world_size, &batch)) {
      return InvalidArgument("batch sizes: " + micro_text + " x " + steps_text +
                             " x " + workers + " overflows a 64-bit integer");
    }
  } else if (batch > 0) {
    steps = 1;
    KOLO_RETURN_IF_ERROR(divide(1, "", &micro));
  } else {
    steps = 1;
    if (!product(micro, world_size, &batch)) {
      return InvalidArgument("batch sizes: " + micro_text + " x " + workers +
                             " overflows a 64-bit integer");
    }
  }
  config->train_batch_size = batch;
  config->train_micro_batch_size_per_gpu = micro;
  config->gradient_accumulation_steps = steps;
  return Status::Ok();
}

}  // namespace kolo
