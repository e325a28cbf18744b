#include "checkpoint.h"

#include <fmt/format.h>

#include <exception>
#include <filesystem>
#include <sstream>

#include "kolo_internal/files.h"

namespace kolo::train {
namespace {

// Keys of the archive besides the header's.
constexpr char kModelKey[] = "model";
constexpr char kOptimizerKey[] = "optimizer";

// ToHeaderFields makes integers and strings only.
c10::IValue ToIValue(const HeaderValue& value) {
  if (value.kind == kIntKind) return c10::IValue(value.integer);
  return c10::IValue(value.text);
}

HeaderValue FromIValue(const c10::IValue& ivalue) {
  HeaderValue value;
  value.kind = ivalue.tagKind();
  if (ivalue.isInt()) value.integer = ivalue.toInt();
  if (ivalue.isString()) value.text = ivalue.toStringRef();
  return value;
}

// The header's fields that `archive` holds; ParseCheckpointHeader checks
// them.
HeaderFields ReadHeaderFields(::torch::serialize::InputArchive& archive) {
  HeaderFields fields;
  for (const char* key : kCheckpointHeaderKeys) {
    c10::IValue value;
    if (archive.try_read(key, value)) fields[key] = FromIValue(value);
  }
  return fields;
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
    const HeaderFields header = ToHeaderFields(info);
    for (const char* key : kCheckpointHeaderKeys)
      archive.write(key, ToIValue(header.at(key)));
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
    KOLO_ASSIGN_OR_RETURN(
        info, ParseCheckpointHeader(ReadHeaderFields(archive), path));
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
