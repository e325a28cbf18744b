// A training run's configuration in DeepSpeed's JSON format ("ds_config"):
// batch sizes and gradient accumulation, the optimizer, the learning-rate
// schedule, gradient clipping, mixed precision with loss scaling, and ZeRO's
// sharding stage. kolo-train reads it with --config FILE; programs that do
// not use kolo-train fill the same struct in C++ and hand its parts to
// kolo::torch::ZeroOptimizer (kolo/torch_zero.h). A complete file opens the
// declarations below.
//
// Keys and meanings are DeepSpeed's, so a DeepSpeed user's file works as it
// is. Where kolo differs, it does so on purpose. Integer fields accept
// numbers written as 5e8 (DeepSpeed's own examples do this) but not
// fractions. "auto" (filled
// in by HuggingFace's integration, not by DeepSpeed) is an error, for any
// key kolo reads, that says kolo needs a value for that key (under a key
// kolo ignores it is only warned about, like the key). Unknown keys are not
// errors: each is named in `warnings`, so a file written for DeepSpeed with
// features kolo lacks (offload, stage 3 knobs) still runs, and the user sees
// what was ignored; so are optimizer parameters of the other family (SGD's
// momentum given to Adam) and schedule parameters the chosen schedule does
// not take. Values that DeepSpeed only warns about, or fails on later, are
// errors here: a warmup_type other than "log" or "linear", a missing
// total_num_steps (WarmupDecayLR, WarmupCosineLR) or cycle_min_lr or
// cycle_max_lr (OneCycle). And "fp16": {"loss_scaler": "torch"} picks
// PyTorch GradScaler's rule instead of DeepSpeed's (see kolo/loss_scaler.h).
//
// Thread-safety: plain values and pure functions.
#ifndef KOLO_TRAINING_CONFIG_H_
#define KOLO_TRAINING_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kolo/lr_schedule.h"
#include "kolo/status.h"

namespace kolo {

// A configuration file (the study configuration):
//
//   {
//     "train_batch_size": 256,
//     "gradient_accumulation_steps": 2,
//     "optimizer": {"type": "Adam",
//                   "params": {"lr": 1e-3, "betas": [0.9, 0.999],
//                              "eps": 1e-8, "weight_decay": 0.01}},
//     "scheduler": {"type": "WarmupLR",
//                   "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3,
//                              "warmup_num_steps": 100}},
//     "gradient_clipping": 1.0,
//     "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000,
//              "hysteresis": 2, "min_loss_scale": 1,
//              "initial_scale_power": 16},
//     "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8,
//                           "overlap_comm": true}
//   }

// "optimizer": {"type": ..., "params": {...}}. Type names are matched
// without regard to case ("Adam", "adam", "AdamW", "SGD").
enum class OptimizerType { kSgd, kAdam, kAdamW };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdam;
  double lr = 1e-3;
  double beta1 = 0.9;  // "betas": [beta1, beta2]
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;   // Adam, AdamW
  double momentum = 0;    // SGD
  double dampening = 0;   // SGD
  bool nesterov = false;  // SGD
};

enum class Precision { kFloat32, kBFloat16, kFloat16 };

// Which rule moves a dynamic loss scale (kolo/loss_scaler.h).
enum class LossScaleRule { kDeepSpeed, kTorchGradScaler };

// The "fp16" section.
struct LossScaleConfig {
  double loss_scale = 0;  // 0: dynamic; > 0: this static scale
  int32_t initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int32_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
  LossScaleRule rule = LossScaleRule::kDeepSpeed;  // "loss_scaler"
};

// The "zero_optimization" section. Bucket sizes count elements, as in
// DeepSpeed; kolo's defaults are smaller than DeepSpeed's 5e8 so that
// communication overlaps the backward pass on CPU-sized models.
struct ZeroConfig {
  int32_t stage = 0;  // 0 (none), 1 (optimizer state), 2 (and gradients)
  int64_t reduce_bucket_size = int64_t{1} << 18;
  int64_t allgather_bucket_size = int64_t{1} << 20;
  bool overlap_comm = true;
  bool contiguous_gradients = true;
};

struct TrainingConfig {
  // Batch sizes: 0 means unset. ResolveBatchSizes() fills them in.
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;

  std::optional<OptimizerConfig> optimizer;  // unset: the program's own
  LrScheduleConfig scheduler;
  double gradient_clipping = 0;  // 0: no clipping
  Precision precision = Precision::kFloat32;
  LossScaleConfig fp16;  // used when precision is kFloat16
  ZeroConfig zero_optimization;
  int64_t steps_per_print = 10;
  uint64_t seed = 0;  // "seed"; 0: unset

  // One line per key the file had that kolo does not use, naming the key
  // with its path ("zero_optimization.offload_optimizer").
  std::vector<std::string> warnings;
};

// Parses a configuration; `source` (a file name) starts every error message
// and warning. kInvalidArgument naming the key and the bad value: invalid
// JSON (with nlohmann's line and column), wrong types, negative or zero
// sizes, a negative gradient_clipping, an unknown optimizer or scheduler
// type (the message lists the known ones), a ZeRO stage other than 0, 1 or
// 2, fp16 and bf16 both enabled, min_loss_scale <= 0, loss_scale_window or
// hysteresis < 1, "auto" for a key kolo reads. A key whose value is null
// counts as absent, as in DeepSpeed. "bfloat16" is read when "bf16" is
// absent (and warned about when both are given).
StatusOr<TrainingConfig> ParseTrainingConfig(const std::string& json_text,
                                             const std::string& source);
// Reads and parses `path`; kNotFound or kInvalidArgument naming the file.
StatusOr<TrainingConfig> LoadTrainingConfig(const std::string& path);

// Fills in the batch sizes for `world_size` workers from the ones given:
// train_batch_size = micro batch x accumulation steps x workers. Any two
// give the third; the micro batch alone or the global batch alone mean one
// accumulation step. kInvalidArgument when none is given, when only the
// accumulation steps are given, when the global batch does not divide, or
// when all three are given and disagree; the message shows the arithmetic
// ("train_batch_size 256 != train_micro_batch_size_per_gpu 16 x
// gradient_accumulation_steps 2 x 4 workers = 128").
Status ResolveBatchSizes(TrainingConfig* config, int32_t world_size);

}  // namespace kolo

#endif  // KOLO_TRAINING_CONFIG_H_
