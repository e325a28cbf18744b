// kolo-train's command line:
//
//   kolorun -np 2 kolo-train --model lenet --dataset fashion-mnist
//       --epochs 5 --batch-size 128 --lr 0.01 [--checkpoint-dir D [--resume]]
//       [--json FILE] ...
//
// Every rank parses the same argv, so every rank reaches the same verdict on
// a bad command line before any of them joins the job; only rank 0 prints it.
#ifndef KOLO_TOOLS_KOLO_TRAIN_FLAGS_H_
#define KOLO_TOOLS_KOLO_TRAIN_FLAGS_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/training_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kolo::train {

struct Flags {
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: DefaultDataDir(dataset)
  // The defaults are the recipe that trains lenet on Fashion-MNIST (batch
  // 128 per worker) to about 88% at 1, 2 and 4 workers alike (88.19-88.45%
  // with seed 42, 87.85-88.02% with seed 7); see docs/benchmarks.md.
  int64_t epochs = 15;
  int64_t batch_size = 128;  // per worker
  double lr = 0.03;          // for one worker; scaled by the world size
  bool no_lr_scaling = false;
  int64_t warmup_epochs = 1;
  std::string lr_schedule = "cosine";  // cosine | constant
  std::string optimizer = "sgd";       // sgd | adam | adamw
  double momentum = 0.9;               // sgd only
  bool nesterov = true;                // sgd only
  double weight_decay = 1e-4;          // L2 penalty, sgd and adam
  int32_t threads = 0;                 // LibTorch threads per worker; 0: auto
  uint64_t seed = 42;
  std::string compression = "none";  // none | fp16 | bf16
  int32_t backward_passes_per_step = 1;
  int64_t bucket_kib =
      1024;  // DistributedOptimizerOptions::bucket_bytes / 1024
  std::string checkpoint_dir;
  bool resume = false;
  int64_t train_subset = 0;  // 0: the whole training set
  int64_t test_subset = 0;   // 0: the whole test set
  // Synthetic images are 3 x image_size x image_size: CIFAR-10's size by
  // default, MNIST's (28) for throughput at that scale.
  int64_t image_size = 32;
  std::string json_path;
  // Throughput mode: time this many steps after --benchmark-warmup untimed
  // ones, instead of training for --epochs; no evaluation, no checkpoint.
  int64_t benchmark_steps = 0;
  int64_t benchmark_warmup = 5;
  // Plain LibTorch in one process: no kolo::Init, no DistributedOptimizer.
  // The baseline that prices being distributed.
  bool no_kolo = false;

  // DeepSpeed-style training (config_file.h): --config FILE.json, and the
  // flags that override it. ZeRO, clipping or mixed precision make the run
  // use kolo::torch::ZeroOptimizer instead of DistributedOptimizer.
  std::string config_path;
  int32_t zero_stage = 0;          // 0, 1 or 2
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  double gradient_clipping = 0;    // global L2 norm; 0: none
  // Filled by ApplyConfigFile(): the file, for what no flag carries (Adam's
  // betas and eps, the scheduler, the fp16 section, bucket sizes,
  // steps_per_print).
  std::optional<TrainingConfig> config;
  // The flags given on the command line ("--batch-size"), which win over
  // the file; filled by main() after parsing.
  std::set<std::string> given;

  // Elastic training (RunElasticTraining in trainer.h), under kolorun --elastic.
  bool elastic = false;
  int64_t commit_every = 10;  // steps between in-memory commits
  // The global batch every step takes, whatever the number of workers;
  // 0: --batch-size times the workers of the first round.
  int64_t global_batch = 0;
  // For fault-injection tests and kolo-bench elastic: the worker that is
  // rank R of the first round kills itself (SIGKILL) at global step S,
  // given as "R:S"; empty: never.
  std::string kill_rank_at_step;

  // Pipeline parallelism (model_parallel.h): the model cut into this many
  // stages, each batch into --micro-batches; the world is stages x
  // replicas. 0: no pipeline.
  int32_t pipeline_stages = 0;
  int32_t micro_batches = 4;
  std::string schedule = "1f1b";       // gpipe | 1f1b
  std::string balance = "parameters";  // parameters | time

  // Parameter servers (model_parallel.h): the last K ranks, started by
  // kolorun --servers K, hold the parameters. 0: none.
  int32_t parameter_servers = 0;
  std::string ps_mode = "sync";  // sync | async | stale
  int32_t staleness = 1;         // --ps-mode stale
};

// The --model, --dataset, --optimizer and --compression choices.
std::vector<std::string> ModelChoices();
std::vector<std::string> DatasetChoices();

// Registers every flag on `app`, writing into `flags`.
void AddFlags(CLI::App& app, Flags* flags);

// The checks CLI11 does not make: ranges and flags that need each other.
// kInvalidArgument naming the flag and the value.
Status Validate(const Flags& flags);

// How a run's ranks train: one kolo::torch::Trainer strategy each
// (kolo/trainer.h, kolo/trainer_model_parallel.h), and elastic training's
// ElasticTrainer (kolo/elastic_trainer.h). Every place kolo-train branches
// on the mode asks ModeOf, so the rule that picks it is written once;
// Validate() has refused flags that ask for two.
enum class TrainingMode {
  kDataParallel,      // DistributedOptimizer
  kZero,              // ZeroOptimizer: a ZeRO stage, clipping or fp16/bf16
  kPipeline,          // --pipeline-stages
  kParameterServers,  // --parameter-servers
  kElastic,           // --elastic
};
TrainingMode ModeOf(const Flags& flags);

// Where --dataset looks without --data-dir: /usr/share/datasets/<name>.
std::string DefaultDataDir(const std::string& dataset);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_FLAGS_H_
