// kolo-train's checkpoint header: the fields of checkpoint.pt that describe
// the run rather than hold its tensors (checkpoint.h says why each is
// kept), and their checks, all made before any tensor is read.
//
// The header lives inside a LibTorch archive; checkpoint.cc moves its
// fields between the archive and HeaderFields, and this unit, which needs
// no LibTorch, turns HeaderFields into a CheckpointInfo and back, so that
// fuzz/checkpoint_header_fuzzer.cc can feed it any fields.
//
// Thread-safety: functions of their arguments.
#ifndef KOLO_TOOLS_KOLO_TRAIN_CHECKPOINT_HEADER_H_
#define KOLO_TOOLS_KOLO_TRAIN_CHECKPOINT_HEADER_H_

#include <cstdint>
#include <map>
#include <string>

#include "kolo/status.h"

namespace kolo::train {

struct CheckpointInfo {
  int64_t epochs_done = 0;
  uint64_t seed = 0;
  std::string model;
  std::string dataset;
  std::string optimizer;
  // The per-epoch records of the run so far (a JSON array), so that a resumed
  // run reports the whole history.
  std::string history_json = "[]";
};

// The header's keys in the archive.
inline constexpr char kEpochsDoneKey[] = "epochs_done";
inline constexpr char kSeedKey[] = "seed";
inline constexpr char kModelNameKey[] = "model_name";
inline constexpr char kDatasetKey[] = "dataset";
inline constexpr char kOptimizerNameKey[] = "optimizer_name";
inline constexpr char kHistoryKey[] = "history";
// All of them, in the order SaveCheckpoint writes them.
inline constexpr const char* kCheckpointHeaderKeys[] = {
    kEpochsDoneKey, kSeedKey,          kModelNameKey,
    kDatasetKey,    kOptimizerNameKey, kHistoryKey};

// The kinds of value a header holds, as LibTorch's IValue::tagKind() names
// them; any other kind is kept by its name only.
inline constexpr char kIntKind[] = "Int";
inline constexpr char kStringKind[] = "String";

// One header field as the archive holds it.
struct HeaderValue {
  std::string kind;     // kIntKind, kStringKind or another IValue kind
  int64_t integer = 0;  // when kind is kIntKind
  std::string text;     // when kind is kStringKind
};

// A header's fields by key; a key that is not there is a missing field.
using HeaderFields = std::map<std::string, HeaderValue>;

// The fields SaveCheckpoint writes for `info`.
HeaderFields ToHeaderFields(const CheckpointInfo& info);

// The run that the checkpoint at `path` describes. kInvalidArgument, naming
// `path` and the field, when a field is missing or of another kind, when
// epochs_done is negative, or when history is not a JSON array of objects
// (epoch records) whose train_loss, where there is one, is a number.
StatusOr<CheckpointInfo> ParseCheckpointHeader(const HeaderFields& fields,
                                               const std::string& path);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_CHECKPOINT_HEADER_H_
