// Fuzzes kolo-train's checkpoint header (tools/kolo-train/
// checkpoint_header.cc): the fields of a checkpoint.pt that describe the
// run, as checkpoint.cc reads them out of the LibTorch archive, before any
// tensor is read. Reading the archive itself is LibTorch's; this target
// fuzzes kolo's step after it.
//
// The input gives each header field in turn (checkpoint_header.h's
// kCheckpointHeaderKeys), the way libFuzzer's FuzzedDataProvider reads
// them: a byte from the back picks missing, an integer (8 more bytes from
// the back), a string (from the front) or another kind (one more byte from
// the back picks its name). Whatever the fields, parsing must return the
// run or kInvalidArgument naming the file and a field; a run it returns
// must keep the header's promises and survive a save and a reload.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint_header.h"

namespace {

constexpr char kPath[] = "ckpt/checkpoint.pt";
// IValue kinds a header field is not meant to hold.
constexpr const char* kOtherKinds[] = {"Double", "Bool",        "None",
                                       "Tensor", "GenericList", "Blob"};

// Traps with the broken promise on stderr.
void Promise(bool kept, const char* what) {
  if (kept) return;
  std::fprintf(stderr, "fuzz: a broken promise: %s\n", what);
  __builtin_trap();
}

kolo::train::HeaderFields ConsumeFields(FuzzedDataProvider& input) {
  kolo::train::HeaderFields fields;
  for (const char* key : kolo::train::kCheckpointHeaderKeys) {
    kolo::train::HeaderValue value;
    switch (input.ConsumeIntegralInRange(0, 3)) {
      case 0: continue;
      case 1:
        value.kind = kolo::train::kIntKind;
        value.integer = input.ConsumeIntegral<int64_t>();
        break;
      case 2:
        value.kind = kolo::train::kStringKind;
        value.text = input.ConsumeRandomLengthString();
        break;
      default: value.kind = input.PickValueInArray(kOtherKinds);
    }
    fields[key] = value;
  }
  return fields;
}

bool SameRun(const kolo::train::CheckpointInfo& a,
             const kolo::train::CheckpointInfo& b) {
  return a.epochs_done == b.epochs_done && a.seed == b.seed &&
         a.model == b.model && a.dataset == b.dataset &&
         a.optimizer == b.optimizer && a.history_json == b.history_json;
}

void CheckPromises(const kolo::train::CheckpointInfo& info) {
  Promise(info.epochs_done >= 0, "epochs_done at least 0");
  // What kolo-train does with a resumed history: parses it with
  // exceptions on (setup.cc) and, when no epoch is left to run, reports the
  // last record's train_loss (trainer.cc). An exception there would reach
  // kolo-train's edge long after the header was accepted, naming neither
  // the file nor the field; here it ends the run as a crash.
  const nlohmann::json history = nlohmann::json::parse(info.history_json);
  Promise(history.is_array(), "history a JSON array");
  if (!history.empty()) (void)history.back().value("train_loss", 0.0);
  auto again = kolo::train::ParseCheckpointHeader(
      kolo::train::ToHeaderFields(info), kPath);
  Promise(again.ok() && SameRun(*again, info), "a saved run reloads as it was");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const auto info =
      kolo::train::ParseCheckpointHeader(ConsumeFields(input), kPath);
  if (!info.ok()) {
    Promise(info.status().code() == kolo::StatusCode::kInvalidArgument &&
                info.status().message().find(std::string("checkpoint ") +
                                             kPath + ": header field ") == 0,
            "errors are kInvalidArgument naming the file and the field");
    return 0;
  }
  CheckPromises(*info);
  return 0;
}
