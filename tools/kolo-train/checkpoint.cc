#include "checkpoint.h"

#include <fmt/format.h>

#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kolo_internal/files.h"

namespace kolo::train {
namespace {

// Keys of the archive.
constexpr char kModelKey[] = "model";
constexpr char kOptimizerKey[] = "optimizer";
constexpr char kEpochsDoneKey[] = "epochs_done";
constexpr char kSeedKey[] = "seed";
constexpr char kModelNameKey[] = "model_name";
constexpr char kDatasetKey[] = "dataset";
constexpr char kOptimizerNameKey[] = "optimizer_name";
constexpr char kHistoryKey[] = "history";

Status BadField(const std::string& path, const char* key,
                const std::string& what) {
  return InvalidArgument(
      fmt::format("checkpoint {}: header field {} {}", path, key, what));
}

// A header field: present and of its type, or an error naming the file
// and the field.
StatusOr<c10::IValue> ReadField(::torch::serialize::InputArchive& archive,
                                const std::string& path, const char* key) {
  c10::IValue value;
  if (!archive.try_read(key, value)) return BadField(path, key, "is missing");
  return value;
}

StatusOr<std::string> ReadString(::torch::serialize::InputArchive& archive,
                                 const std::string& path, const char* key) {
  KOLO_ASSIGN_OR_RETURN(c10::IValue value, ReadField(archive, path, key));
  if (!value.isString())
    return BadField(path, key, "is a " + value.tagKind() + ", not a string");
  return value.toStringRef();
}

StatusOr<int64_t> ReadInt(::torch::serialize::InputArchive& archive,
                          const std::string& path, const char* key) {
  KOLO_ASSIGN_OR_RETURN(c10::IValue value, ReadField(archive, path, key));
  if (!value.isInt())
    return BadField(path, key, "is a " + value.tagKind() + ", not an integer");
  return value.toInt();
}

// Reads and checks the fields that describe the run (all but the model's
// and the optimizer's state).
StatusOr<CheckpointInfo> ReadHeader(::torch::serialize::InputArchive& archive,
                                    const std::string& path) {
  CheckpointInfo info;
  KOLO_ASSIGN_OR_RETURN(info.epochs_done,
                        ReadInt(archive, path, kEpochsDoneKey));
  if (info.epochs_done < 0) {
    return BadField(
        path, kEpochsDoneKey,
        "is " + std::to_string(info.epochs_done) + "; it must be at least 0");
  }
  KOLO_ASSIGN_OR_RETURN(const int64_t seed, ReadInt(archive, path, kSeedKey));
  info.seed = static_cast<uint64_t>(seed);
  KOLO_ASSIGN_OR_RETURN(info.model, ReadString(archive, path, kModelNameKey));
  KOLO_ASSIGN_OR_RETURN(info.dataset, ReadString(archive, path, kDatasetKey));
  KOLO_ASSIGN_OR_RETURN(info.optimizer,
                        ReadString(archive, path, kOptimizerNameKey));
  KOLO_ASSIGN_OR_RETURN(info.history_json,
                        ReadString(archive, path, kHistoryKey));
  const nlohmann::json history =
      nlohmann::json::parse(info.history_json, nullptr,
                            /*allow_exceptions=*/false);
  if (history.is_discarded() || !history.is_array())
    return BadField(path, kHistoryKey, "is not a JSON array");
  return info;
}

}  // namespace

std::string CheckpointPath(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.pt").string();
}

Status SaveCheckpoint(const std::string& dir, ::torch::nn::Module& model,
                      ::torch::optim::Optimizer& optimizer,
                      const CheckpointInfo& info) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return InvalidArgument(fmt::format("--checkpoint-dir: cannot create {}: {}",
                                       dir, error.message()));
  }
  const std::string path = CheckpointPath(dir);
  // Serialized in memory, then written whole or not at all: a crash
  // mid-save leaves the previous checkpoint as it was.
  std::ostringstream bytes;
  try {
    ::torch::serialize::OutputArchive archive;
    ::torch::serialize::OutputArchive model_archive;
    model.save(model_archive);
    archive.write(kModelKey, model_archive);
    ::torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write(kOptimizerKey, optimizer_archive);
    archive.write(kEpochsDoneKey, c10::IValue(info.epochs_done));
    // IValue holds signed integers; the seed's bits travel unchanged.
    archive.write(kSeedKey, c10::IValue(static_cast<int64_t>(info.seed)));
    archive.write(kModelNameKey, c10::IValue(info.model));
    archive.write(kDatasetKey, c10::IValue(info.dataset));
    archive.write(kOptimizerNameKey, c10::IValue(info.optimizer));
    archive.write(kHistoryKey, c10::IValue(info.history_json));
    archive.save_to(bytes);
  } catch (const std::exception& e) {
    return Internal(
        fmt::format("checkpoint: serializing {} failed: {}", path, e.what()));
  }
  return WriteFileAtomically(path, bytes.str()).WithContext("checkpoint");
}

StatusOr<CheckpointInfo> LoadCheckpoint(const std::string& dir,
                                        const CheckpointInfo& expected,
                                        ::torch::nn::Module& model,
                                        ::torch::optim::Optimizer& optimizer) {
  const std::string path = CheckpointPath(dir);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return NotFound(fmt::format("no checkpoint at {}", path));
  }
  CheckpointInfo info;
  try {
    ::torch::serialize::InputArchive archive;
    archive.load_from(path);
    KOLO_ASSIGN_OR_RETURN(info, ReadHeader(archive, path));
    auto differs = [&](const char* flag, const std::string& found,
                       const std::string& wanted) -> StatusOr<CheckpointInfo> {
      return InvalidArgument(fmt::format(
          "checkpoint {} was written with {} {}, not {}; resume with the "
          "same flags or use another --checkpoint-dir",
          path, flag, found, wanted));
    };
    if (info.model != expected.model) {
      return differs("--model", info.model, expected.model);
    }
    if (info.dataset != expected.dataset) {
      return differs("--dataset", info.dataset, expected.dataset);
    }
    if (info.optimizer != expected.optimizer) {
      return differs("--optimizer", info.optimizer, expected.optimizer);
    }
    if (info.seed != expected.seed) {
      return differs("--seed", std::to_string(info.seed),
                     std::to_string(expected.seed));
    }
    ::torch::serialize::InputArchive model_archive;
    archive.read(kModelKey, model_archive);
    model.load(model_archive);
    ::torch::serialize::InputArchive optimizer_archive;
    archive.read(kOptimizerKey, optimizer_archive);
    optimizer.load(optimizer_archive);
  } catch (const std::exception& e) {
    // c10::Error messages carry a C++ backtrace after the first line.
    std::string message = e.what();
    message = message.substr(0, message.find('\n'));
    return InvalidArgument(
        fmt::format("cannot read checkpoint {}: {}", path, message));
  }
  return info;
}

}  // namespace kolo::train
