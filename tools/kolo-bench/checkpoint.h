// kolo-bench checkpoint: what saving a sharded training state costs, and
// what resuming it at another number of ranks costs, for kolo's ZeRO
// checkpoints (per-rank shard files plus a manifest, resharded at load:
// kolo/torch_zero.h) against PyTorch Distributed Checkpoint (DCP), whose
// design kolo's follows.
//
//   kolo-bench checkpoint [--models resnet18] [--save-np 2]
//       [--load-np 1,2,4] [--variants kolo-zero2,torch-dcp]
//       [--batch-size 8] [--image-size 32] [--threads 1] [--repeat 3]
//       [--python PYTHON] [--json FILE]
//
// Variants, each a save job and load jobs started the way a user would:
//
//   kolo-zero2  kolorun -np N kolo-bench-checkpoint-worker --mode save, then
//               kolorun -np M ... --mode load (checkpoint_worker.cc):
//               ZeroOptimizer stage 2 over Adam, Save() and Load()
//   kolo-zero1  the same at stage 1 (the gradients unsharded; the
//               checkpoint holds the same master weights and moments)
//   torch-dcp   PYTHON bench/peers/torch_checkpoint.py --mode save --np N,
//               then --mode load --np M: the model sharded by FSDP2 with
//               Adam, dcp.save() and get_state_dict + dcp.load() +
//               set_state_dict(), in the project's Python (peer_python.h)
//
// Both sides hold the same state: the model's float32 weights and Adam's
// two moments, sharded over the ranks, after one step on a synthetic batch
// of --batch-size images per rank. A save job times the save between two
// barriers; a load job builds the model from another seed and times the
// load, which must give back the saved weights and moments: the float64
// sums of both, which every job reports, must equal the save's (to 1e-6 of
// their size), or kolo-bench names the variant and exits 1.
//
// Per repeat, model and variant: one save at each --save-np into a fresh
// directory, then a load at each --load-np from it, the directory removed
// after. Repeats cycle through every configuration, as the other commands'
// do, and the table gives medians: per model, variant, save np and load
// np, the save and load seconds, the checkpoint's size and files, the
// largest rank's peak RSS in the load, and kolo's save and load time over
// torch-dcp's for the same model and world sizes. Its last line names the
// LibTorch kolo was built with and the peers' torch.
//
// --json FILE appends one record ({"benchmark": "checkpoint", ...}: the
// configuration, the environment, every row with the torch its side ran
// and every job's JSON).
#ifndef KOLO_TOOLS_KOLO_BENCH_CHECKPOINT_H_
#define KOLO_TOOLS_KOLO_BENCH_CHECKPOINT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "table.h"

namespace kolo::bench {

inline constexpr const char* kTorchDcp = "torch-dcp";

struct CheckpointFlags {
  std::string models = "resnet18";
  std::string save_np = "2";
  std::string load_np = "1,2,4";
  std::string variants = "kolo-zero2,torch-dcp";
  int64_t batch_size = 8;  // per rank, in the step before the save
  int64_t image_size = 32;
  int32_t threads = 1;
  int32_t repeat = 3;
  std::string json_path;
  std::string kolorun;  // empty: found next to kolo-bench
  std::string worker;   // kolo-bench-checkpoint-worker; empty: found so
  std::string python;   // empty: FindPython's default (peer_python.h)
};

// One variant: who saves and loads, and for kolo at which ZeRO stage.
struct CheckpointVariant {
  std::string name;       // "kolo-zero2"
  std::string framework;  // "kolo" or kTorchDcp
  int32_t zero_stage = 0;
};

// The variants of `text` in the order given, duplicates dropped;
// kInvalidArgument naming --variants and the first unknown item.
StatusOr<std::vector<CheckpointVariant>> ParseCheckpointVariants(
    const std::string& text);

// The programs the jobs run.
struct CheckpointTools {
  std::string kolorun;
  std::string worker;  // kolo-bench-checkpoint-worker
  std::string python;
  std::string script;  // torch_checkpoint.py
};

// The command line of one job: `variant` saving (`save`) or loading `model`
// at `np` ranks in `dir`, its JSON written to `json_path`.
std::vector<std::string> CheckpointCommand(const CheckpointFlags& flags,
                                           const CheckpointVariant& variant,
                                           const std::string& model, bool save,
                                           int32_t np, const std::string& dir,
                                           const CheckpointTools& tools,
                                           const std::string& json_path);

// What one job measured.
struct CheckpointMeasurement {
  double seconds = 0;
  int64_t bytes = 0;
  int64_t files = 0;
  double parameter_sum = 0;
  double optimizer_state_sum = 0;
  std::vector<int64_t> peak_rss_bytes;  // one per rank
  std::string torch_version;            // config.torch_version; may be empty
};

// Reads one job's JSON. kInternal naming the field and quoting the end of
// `output` when result.seconds is missing or not positive, bytes or files
// missing or not positive, a sum missing or not finite, or peak_rss_bytes
// not `np` non-negative integers.
StatusOr<CheckpointMeasurement> ReadCheckpointMeasurement(
    const nlohmann::json& job, const std::string& output, int32_t np);

// Ok when `load` holds the weights and moments `save` wrote: each sum equal
// to within 1e-6 of its size (plus 1e-9), which summing the same float32
// values in another order never exceeds. kInternal naming `what` and the
// sum that differs otherwise.
Status CheckRestored(const CheckpointMeasurement& save,
                     const CheckpointMeasurement& load,
                     const std::string& what);

// One line of the table: medians over the repeats.
struct CheckpointRow {
  std::string model;
  std::string variant;
  std::string framework;
  int32_t save_np = 0;
  int32_t load_np = 0;
  double save_seconds = 0;
  double load_seconds = 0;
  double bytes = 0;
  double files = 0;
  double load_peak_rss_bytes = 0;  // the largest rank's
  std::string torch_version;
  // Save and load seconds over torch-dcp's for the same model, save np and
  // load np; kolo's rows only, and only where torch-dcp ran.
  std::optional<double> save_ratio;
  std::optional<double> load_ratio;
};

// The row of one configuration from its repeats' (save, load) pairs (at
// least one).
CheckpointRow SummarizeCheckpoint(
    const std::string& model, const CheckpointVariant& variant, int32_t save_np,
    int32_t load_np, const std::vector<CheckpointMeasurement>& saves,
    const std::vector<CheckpointMeasurement>& loads);

// Fills kolo's rows' save_ratio and load_ratio from the torch-dcp row of
// the same model, save np and load np.
void CompareWithDcp(std::vector<CheckpointRow>* rows);

Table CheckpointTable();
std::vector<std::string> CheckpointCells(const CheckpointRow& row);

CLI::App* AddCheckpointCommand(CLI::App& app, CheckpointFlags* flags);

// What `kolo-bench checkpoint` runs: every job, the table, the record
// appended to flags.json_path (when set), which it returns.
StatusOr<nlohmann::json> RunCheckpoint(const CheckpointFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_CHECKPOINT_H_
