#include "checkpoint_header.h"

#include <nlohmann/json.hpp>

namespace kolo::train {
namespace {

Status BadField(const std::string& path, const char* key,
                const std::string& what) {
  return InvalidArgument("checkpoint " + path + ": header field " + key + " " +
                         what);
}

// A header field: present and of its kind, or an error naming the file
// and the field.
StatusOr<HeaderValue> ReadField(const HeaderFields& fields,
                                const std::string& path, const char* key,
                                const char* kind, const char* kind_name) {
  auto found = fields.find(key);
  if (found == fields.end()) return BadField(path, key, "is missing");
  if (found->second.kind != kind) {
    return BadField(path, key,
                    "is a " + found->second.kind + ", not " + kind_name);
  }
  return found->second;
}

StatusOr<std::string> ReadString(const HeaderFields& fields,
                                 const std::string& path, const char* key) {
  KOLO_ASSIGN_OR_RETURN(HeaderValue value,
                        ReadField(fields, path, key, kStringKind, "a string"));
  return value.text;
}

StatusOr<int64_t> ReadInt(const HeaderFields& fields, const std::string& path,
                          const char* key) {
  KOLO_ASSIGN_OR_RETURN(HeaderValue value,
                        ReadField(fields, path, key, kIntKind, "an integer"));
  return value.integer;
}

HeaderValue Integer(int64_t integer) {
  HeaderValue value;
  value.kind = kIntKind;
  value.integer = integer;
  return value;
}

HeaderValue String(const std::string& text) {
  HeaderValue value;
  value.kind = kStringKind;
  value.text = text;
  return value;
}

// A resumed run's history is an array of epoch records. kolo-train
// parses it with exceptions on and reports the last record's train_loss
// when no epoch is left to run (trainer.cc); a record that is not an
// object, or a train_loss that is not a number, would throw there, at the
// run's end, with a message that names neither the file nor the field.
Status CheckHistory(const std::string& text, const std::string& path) {
  const nlohmann::json history =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (history.is_discarded() || !history.is_array())
    return BadField(path, kHistoryKey, "is not a JSON array");
  for (size_t i = 0; i < history.size(); ++i) {
    const nlohmann::json& record = history[i];
    const std::string where = "record " + std::to_string(i) + " ";
    if (!record.is_object()) {
      return BadField(path, kHistoryKey,
                      where + "is a " + record.type_name() + ", not an object");
    }
    auto loss = record.find("train_loss");
    if (loss != record.end() && !loss->is_number()) {
      return BadField(path, kHistoryKey,
                      where + "has a train_loss that is a " +
                          std::string(loss->type_name()) + ", not a number");
    }
  }
  return Status::Ok();
}

}  // namespace

HeaderFields ToHeaderFields(const CheckpointInfo& info) {
  // IValue holds signed integers; the seed's bits travel unchanged.
  return {{kEpochsDoneKey, Integer(info.epochs_done)},
          {kSeedKey, Integer(static_cast<int64_t>(info.seed))},
          {kModelNameKey, String(info.model)},
          {kDatasetKey, String(info.dataset)},
          {kOptimizerNameKey, String(info.optimizer)},
          {kHistoryKey, String(info.history_json)}};
}

StatusOr<CheckpointInfo> ParseCheckpointHeader(const HeaderFields& fields,
                                               const std::string& path) {
  CheckpointInfo info;
  KOLO_ASSIGN_OR_RETURN(info.epochs_done,
                        ReadInt(fields, path, kEpochsDoneKey));
  if (info.epochs_done < 0) {
    return BadField(
        path, kEpochsDoneKey,
        "is " + std::to_string(info.epochs_done) + "; it must be at least 0");
  }
  KOLO_ASSIGN_OR_RETURN(const int64_t seed, ReadInt(fields, path, kSeedKey));
  info.seed = static_cast<uint64_t>(seed);
  KOLO_ASSIGN_OR_RETURN(info.model, ReadString(fields, path, kModelNameKey));
  KOLO_ASSIGN_OR_RETURN(info.dataset, ReadString(fields, path, kDatasetKey));
  KOLO_ASSIGN_OR_RETURN(info.optimizer,
                        ReadString(fields, path, kOptimizerNameKey));
  KOLO_ASSIGN_OR_RETURN(info.history_json,
                        ReadString(fields, path, kHistoryKey));
  KOLO_RETURN_IF_ERROR(CheckHistory(info.history_json, path));
  return info;
}

}  // namespace kolo::train
