// kolo-bench train: training throughput (and, with --epochs, accuracy) of
// kolo and of its peers, measured alternately in one invocation on the same
// model, data, batch and threads.
//
//   kolo-bench train --model lenet --dataset fashion-mnist --batch-size 128
//       --np 1,2 --threads 1 --warmup 5 --iters 100 --repeat 3
//       --peer torch-ddp,libtorch [--scaling weak|strong] [--json FILE]
//   kolo-bench train --model lenet --dataset fashion-mnist --batch-size 128
//       --np 1,2,4 --epochs 15 --repeat 1 --peer torch-ddp
//
// Every measurement is its own job, started the way a user would:
//
//   kolo       kolorun -np N kolo-train --benchmark-steps ...
//   libtorch   kolo-train --no-kolo --benchmark-steps ... (np 1 only): the
//              same loop on the bare LibTorch optimizer in one process, the
//              price of being distributed when alone
//   torch-ddp  PYTHON torch_ddp.py --np N ... (PyTorch
//              DistributedDataParallel on gloo, the same architecture
//              defined in Python), PYTHON the project's interpreter
//              (peer_python.h), whose torch is the one kolo's LibTorch
//              came from
//
// Throughput (the default): each reports images/s over the same window
// (warm-up steps untimed, the ranks meeting at a barrier before and after).
//
// Accuracy (--epochs E, a real dataset): each job trains for E epochs with
// kolo-train's default recipe (kolorun -np N kolo-train --epochs E; the
// torch-ddp peer's --epochs mode follows the same recipe, schedule and
// evaluation) and reports its wall time, images/s over its training loops
// and the final test accuracy. --train-subset and --test-subset shorten a
// run by using fewer examples; what each job measures stays the same. The
// libtorch peer has no such mode (kolo-train --no-kolo only times steps).
//
// Repeats cycle through every
// configuration in turn, so drift on a noisy machine spreads over all of
// them alike. The table gives the mean and 95% interval over the repeats
// (Student's t, as Horovod's synthetic benchmark reports), the step time,
// kolo's time inside engine calls per step (its runtime statistics), the
// largest worker's peak RSS, the speedup and scaling efficiency against the
// same framework's np=1, and kolo's ratio to each peer. A peer that is not
// installed gets a row saying so; nothing is estimated in its place.
//
// --json FILE appends one record (configuration, environment: CPU, cores,
// kernel, kolo's commit, the LibTorch kolo was built with, the peers'
// interpreter and its torch; every row with the torch its side ran and
// every run's own JSON) to the array in FILE, so one file collects the
// runs a report is drawn from. The table's last line names both torches.
//
// Scaling: weak keeps --batch-size per worker; strong keeps the global batch
// (--batch-size at np=1) and divides it among the workers.
//
// The recipe: --optimizer, --lr and --precision reach kolo-train and the
// DDP peer alike (fp16 only where the peer's torch has CPU float16
// autocast: torch 2.x, not 1.13); --config FILE (a DeepSpeed-style
// ds_config) reaches kolo-train only, and its command-line flags override
// it. Left out, each program keeps its default (SGD, Nesterov momentum).
#ifndef KOLO_TOOLS_KOLO_BENCH_TRAIN_H_
#define KOLO_TOOLS_KOLO_BENCH_TRAIN_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "job_runner.h"
#include "kolo/status.h"

namespace kolo::bench {

// What the commands whose jobs time kolo-train steps (train, zero,
// pipeline) share: the images, the threads and the timing window of each
// job, and how often each runs. The defaults are train's; zero and
// pipeline set their own windows.
struct TimedJobFlags {
  int64_t batch_size = 32;
  int64_t image_size = 32;  // --dataset synthetic's height and width
  int32_t threads = 1;
  int64_t warmup = 5;
  int64_t iters = 50;
  int32_t repeat = 3;
};

// kInvalidArgument naming the flags unless --iters, --repeat, --threads,
// --batch-size and --image-size are at least 1 and --warmup at least 0, or
// when --image-size is not 32 with another `dataset` than synthetic.
Status ValidateTimedJob(const TimedJobFlags& f, const std::string& dataset);

// The record's "config" entries of `f`: batch_size, image_size, threads,
// warmup, iters and repeat.
nlohmann::json TimedJobConfig(const TimedJobFlags& f);

struct TrainFlags : TimedJobFlags {
  std::string model = "lenet";
  std::string dataset = "synthetic";
  std::string data_dir;
  std::string np = "1,2";
  std::string scaling = "weak";
  // Accuracy mode: train for this many epochs instead of timing --iters
  // steps; 0: throughput.
  int64_t epochs = 0;
  int64_t train_subset = 0;  // the first N training images; 0: all
  int64_t test_subset = 0;   // the first N test images (--epochs); 0: all
  std::string peers;         // comma-separated: torch-ddp, libtorch
  // The recipe; empty (0): each program's default.
  std::string optimizer;    // sgd, adam, adamw: both programs
  double lr = 0;            // --lr: both programs
  std::string precision;    // fp32, bf16, fp16 (the peer: with torch 2.x)
  std::string config_path;  // kolo-train --config: a ds_config JSON file
  // Appended as they are to kolo-train's (kolo, libtorch) and to
  // torch_ddp.py's command lines, after every other flag: how kolo-bench
  // zero picks a ZeRO stage (--zero-stage 2, --zero) and kolo-bench study a
  // schedule.
  std::vector<std::string> kolo_train_args;
  std::vector<std::string> ddp_args;
  // Appended to kolorun's flags for kolo's jobs (kolo-bench study
  // ps-vs-allreduce: --servers K), and the name kolo's rows go by in the
  // table and the record (empty: "kolo"), so that variants of kolo measured
  // in separate runs stay apart in the report ("kolo-ps-sync-1").
  std::vector<std::string> kolorun_args;
  std::string kolo_name;
  std::string json_path;
  std::string study;       // kolo-bench study's preset, stamped on the record
  std::string kolorun;     // empty: found next to kolo-bench
  std::string kolo_train;  // empty: found next to kolo-bench
  std::string ddp_script;  // empty: the installed or source-tree script
  std::string python;      // empty: FindPython's default (peer_python.h)
};

CLI::App* AddTrainCommand(CLI::App& app, TrainFlags* flags);

// The flags that say where a benchmark's programs are, shared by train,
// study, zero, pipeline and elastic: --kolorun, --kolo-train and, where
// `ddp_script` is given, --ddp-script, where `python` is, --python. Empty
// values are found as sibling_tools.h and peer_python.h say.
void AddToolFlags(CLI::App* cmd, std::string* kolorun, std::string* kolo_train,
                  std::string* ddp_script = nullptr,
                  std::string* python = nullptr);

// What `kolo-bench train` runs, and kolo-bench study composes: runs every
// measurement `flags` describe, prints the table, appends the record to
// flags.json_path (when set) and returns it. kInvalidArgument naming the
// flag for a bad configuration; kInternal quoting a failed job's output.
StatusOr<nlohmann::json> RunTrain(const TrainFlags& flags);

// The peers of a --peer list (torch-ddp, libtorch); kInvalidArgument naming
// the flag and the first other item.
StatusOr<std::vector<std::string>> ParseTrainPeers(const std::string& text);

// The programs a measurement runs.
struct TrainTools {
  std::string kolorun;
  std::string kolo_train;
  std::string python;
  std::string ddp_script;
};

// The command line of one measurement: `framework` (kolo, kolo-metrics,
// libtorch or torch-ddp) at `np` workers of `batch` images each, writing its JSON to
// `json_path`.
std::vector<std::string> TrainCommand(const TrainFlags& flags,
                                      const std::string& framework, int32_t np,
                                      int64_t batch, const TrainTools& tools,
                                      const std::string& json_path);

// The worker counts of an --np list ("1,2,4"); kInvalidArgument naming --np.
StatusOr<std::vector<int32_t>> ParseNpList(const std::string& text);

// The programs to run: the paths given (empty: found beside kolo-bench, or
// the installed or source-tree script, and FindPython's interpreter).
// kNotFound naming --kolorun or --kolo-train when one is not an
// executable.
StatusOr<TrainTools> FindTrainTools(const std::string& kolorun,
                                    const std::string& kolo_train,
                                    const std::string& ddp_script,
                                    const std::string& python = "");

// The torch a job ran, for its JSON row: a peer's own report
// (config.torch_version in its JSON), else `fallback`.
std::string JobTorchVersion(const nlohmann::json& job,
                            const std::string& fallback);

// The per-worker batch of a configuration: weak scaling keeps `batch`,
// strong scaling divides it by `np` (kInvalidArgument when it does not
// divide evenly).
StatusOr<int64_t> PerWorkerBatch(int64_t batch, int32_t np,
                                 const std::string& scaling);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_TRAIN_H_
