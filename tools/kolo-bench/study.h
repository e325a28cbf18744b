// kolo-bench study: named presets of kolo-bench train, each a set of runs
// that answers one question about kolo against its peers, sized to finish in
// under 15 minutes on a 2-core machine.
//
//   kolo-bench study small-cnn [--peer torch-ddp] [--json FILE] [--quick]
//
// A preset is a list of steps, each one kolo-bench train configuration
// (TrainFlags) run through RunTrain, the same code path as the command, so a
// study measures exactly what the equivalent `kolo-bench train` lines would.
// Every record it appends to --json (default kolo-study-NAME.json) carries
// "study": NAME.
//
//   small-cnn         lenet on Fashion-MNIST, batch 128 per worker: wall
//                     time, images/s and test accuracy after full training
//                     at np 1, 2 and 4
//   resnet-mobilenet  resnet50 on 28x28 synthetic images, batch 32:
//                     throughput at np 1 and 2; mobilenetv2 on Fashion-MNIST,
//                     batch 32: wall time, images/s and test accuracy at
//                     np 1 and 2
//   scaling           resnet18 on synthetic 32x32 images, global batch 128:
//                     weak (128 per worker) and strong (128 / np per worker)
//                     scaling at np 1, 2 and 4, as throughput, speedup and
//                     efficiency
//   deepspeed         the framework study's DeepSpeed configuration, as a
//                     ds_config file passed to kolo-train --config: Adam (lr
//                     1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay
//                     3e-7), gradient_clipping 1.0, bf16, ZeRO stage 2; lenet
//                     trained on Fashion-MNIST (wall time, images/s, test
//                     accuracy) and resnet18 timed on CIFAR-style synthetic
//                     3x32x32 images (images/s), at np 1, 2 and 4. The study
//                     used fp16 on GPUs; LibTorch has no CPU fp16 kernels, so
//                     bf16 stands in. No "scheduler": the rate stays 1e-3,
//                     the global rate as DeepSpeed reads it, so kolo-train
//                     runs with --no-lr-scaling --lr-schedule constant
//                     --warmup-epochs 0. The torch-ddp peer runs the closest
//                     it has: the same Adam, clipping and constant rate, bf16
//                     autocast over fp32 weights, and ZeroRedundancyOptimizer
//                     (ZeRO stage 1: its gradients are allreduced whole,
//                     where stage 2 reduce-scatters them)
//   ps-vs-allreduce   kolo's parameter server against its allreduce, each
//                     a kolorun job of kolo-train: allreduce (rows "kolo"),
//                     synchronous, asynchronous and bounded-staleness (2)
//                     parameter servers (kolo-train --parameter-servers K
//                     --ps-mode sync|async|stale under kolorun --servers K;
//                     rows "kolo-ps-MODE-K") on 1 server at 2 and 4
//                     workers, and sync and async on 2 servers at 4; lenet
//                     trained on Fashion-MNIST (wall time, images/s, test
//                     accuracy, and the asynchronous modes' accuracy less
//                     the synchronous one's) and resnet18 timed on
//                     synthetic 3x32x32 images. The servers are processes
//                     beside the workers on the same cores. A table of every
//                     variant against allreduce at the same workers ends the
//                     run. --quick runs lenet's step alone, at 2 workers and
//                     1 server
//
// What a preset scales down to fit its time is the number of steps, epochs
// or examples (--train-subset, --test-subset), never the model, the batch
// or the worker counts; PresetScale() says what each preset uses and the
// help text repeats it. --quick shrinks those further, for tests: its
// figures show the plumbing works, not how fast or how accurate kolo is.
//
// Peers: torch-ddp joins every step when asked; libtorch (np 1 only) joins
// the throughput steps, since kolo-train --no-kolo has no accuracy mode,
// except deepspeed's, since it has no ZeRO.
#ifndef KOLO_TOOLS_KOLO_BENCH_STUDY_H_
#define KOLO_TOOLS_KOLO_BENCH_STUDY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "train.h"

namespace kolo::bench {

struct StudyFlags {
  std::string name;
  std::string peers;      // comma-separated: torch-ddp, libtorch
  std::string json_path;  // empty: kolo-study-NAME.json
  bool quick = false;
  std::string data_dir;    // empty: each program's default
  std::string kolorun;     // as kolo-bench train's
  std::string kolo_train;  // as kolo-bench train's
  std::string ddp_script;  // as kolo-bench train's
  std::string python;      // as kolo-bench train's
};

// One step of a study: a kolo-bench train run under a title.
struct StudyStep {
  std::string title;
  TrainFlags flags;
};

// The presets' names, in the order the help lists them.
std::vector<std::string> StudyNames();

// One line per preset: what it scales down, and to what, for the help text.
std::string PresetScale(const std::string& name);

// The steps of `flags.name`, with flags.peers, --json, --data-dir and the
// tool paths applied; kInvalidArgument naming an unknown preset or peer.
// A step with flags.config_path set needs that file written first
// (WriteStudyConfigs).
StatusOr<std::vector<StudyStep>> PlanStudy(const StudyFlags& flags);

// The deepspeed preset's ds_config for `micro_batch` images per worker per
// step (train_micro_batch_size_per_gpu, gradient_accumulation_steps 1).
nlohmann::json DeepSpeedConfig(int64_t micro_batch);

// Writes each step's ds_config file (those with a config_path);
// kInternal naming the file when one cannot be written.
Status WriteStudyConfigs(const std::vector<StudyStep>& steps);

// ps-vs-allreduce's closing table, from the records its steps returned:
// per model, workers and variant, images/s and its ratio to allreduce's at
// the same workers, and the test accuracy and wall time where measured.
std::vector<std::string> PsSummaryLines(
    const std::vector<nlohmann::json>& records);

CLI::App* AddStudyCommand(CLI::App& app, StudyFlags* flags);
int RunStudyCommand(const StudyFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_STUDY_H_
