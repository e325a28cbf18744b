// Learning-rate schedules, as pure functions of where training is.
//
// Two families live here. LinearScalingSchedule is kolo-train's own: data
// parallelism over W workers scales one worker's rate by W (Goyal et al.
// 2017, "Accurate, Large Minibatch SGD"), reached by a linear warm-up and
// then held or decayed along half a cosine (Loshchilov & Hutter 2017,
// "SGDR"); it counts batches. LrScheduleConfig holds DeepSpeed's schedulers,
// which a ds_config file names (kolo/training_config.h parses them); they
// count optimizer steps and follow DeepSpeed's step offsets exactly, so a
// DeepSpeed user's run keeps its rates. The two are not folded into one
// because they disagree on purpose at the edges (DeepSpeed's first steps
// sit at the minimum; kolo's ramp starts at the unscaled rate), and each
// side's figures depend on its own.
//
// Thread-safety: plain values and pure functions.
#ifndef KOLO_LR_SCHEDULE_H_
#define KOLO_LR_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace kolo {

// kolo-train's schedule. With base rate B, scaled rate S, warm-up W and
// total T iterations:
//
//   lr(i) = B + (S - B) * i / W                          for i < W
//   lr(i) = S                                            (kHold), or
//   lr(i) = S * (1 + cos(pi * (i - W) / (T - W))) / 2    (kCosine)
//
// Iterations count batches from the start of training (epoch * batches per
// epoch + batch), so the rate depends only on where training is, and a
// resumed run continues the ramp where its checkpoint left it.
struct LinearScalingSchedule {
  enum class AfterWarmup { kHold, kCosine };
  double base_lr = 0;    // one worker's rate, where the warm-up starts
  double scaled_lr = 0;  // the rate after the warm-up
  int64_t warmup_iterations = 0;
  int64_t total_iterations = 0;  // of the whole run, for the cosine
  AfterWarmup after_warmup = AfterWarmup::kCosine;
};

double LearningRate(const LinearScalingSchedule& schedule, int64_t iteration);

// "scheduler": {"type": ..., "params": {...}}, DeepSpeed's schedules with
// DeepSpeed's parameter names and defaults (type names matched without
// regard to case). Steps count optimizer steps that were taken
// (a step skipped for a loss-scale overflow does not count).
enum class LrScheduleType {
  kNone,            // the optimizer's lr throughout
  kWarmupLR,        // warm up from warmup_min_lr to warmup_max_lr, then hold
  kWarmupDecayLR,   // WarmupLR, then linear decay back to warmup_min_lr
  kWarmupCosineLR,  // warm up, then half a cosine (ratios of optimizer lr)
  kOneCycle,        // cycle_min_lr -> cycle_max_lr -> cycle_min_lr, decay
};

struct LrScheduleConfig {
  LrScheduleType type = LrScheduleType::kNone;
  // WarmupLR, WarmupDecayLR, WarmupCosineLR.
  double warmup_min_lr = 0;
  double warmup_max_lr = 1e-3;
  // WarmupLR given no warmup_max_lr warms up to the optimizer's lr, as
  // DeepSpeed's does: LearningRateAt() then uses its `optimizer_lr` (the
  // parser also copies the file's optimizer lr into warmup_max_lr).
  bool warmup_max_lr_from_optimizer = false;
  int64_t warmup_num_steps = 1000;
  std::string warmup_type = "log";  // "log" or "linear"
  int64_t total_num_steps = 0;      // WarmupDecayLR, WarmupCosineLR
  // WarmupCosineLR: fractions of the optimizer's lr.
  double warmup_min_ratio = 0;
  double cos_min_ratio = 1e-4;
  // OneCycle.
  double cycle_min_lr = 0;
  double cycle_max_lr = 0;
  double decay_lr_rate = 0;
  int64_t cycle_first_step_size = 2000;
  int64_t cycle_second_step_size = 0;  // 0: cycle_first_step_size
  // Stairs: the half cycle moves in this many equal jumps instead of every
  // step; 0: continuously.
  int64_t cycle_first_stair_count = 0;
  int64_t cycle_second_stair_count = 0;  // 0: cycle_first_stair_count
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0;
};

// The learning rate for optimizer step `step` (0-based: the rate the first
// step uses is LearningRateAt(config, lr, 0)). `optimizer_lr` is the
// optimizer's configured lr, which kNone returns and kWarmupCosineLR scales.
//
// The rates are DeepSpeed's, step for step. DeepSpeed sets the first step's
// rate when it builds the scheduler (its last_batch_iteration is -1) and
// calls scheduler.step() after each optimizer step that was taken, so kolo's
// step k runs with DeepSpeed's last_batch_iteration k - 1. With W =
// max(2, warmup_num_steps) and T = total_num_steps:
//   WarmupLR: step 0 warmup_min_lr; step k in 1..W: min + (max - min) x
//     log(k) / log(W) ("log") or (k - 1) / W ("linear"), so steps 0 and 1
//     both run at warmup_min_lr and step W reaches warmup_max_lr with "log";
//     warmup_max_lr from step W + 1 on.
//   WarmupDecayLR: as WarmupLR through step W; then min + (max - min) x
//     max(0, (T - k + 1) / max(1, T - W)), reaching warmup_min_lr at step
//     T + 1 and staying there.
//   WarmupCosineLR: optimizer_lr x ratio; step 0 has ratio 0 (DeepSpeed's
//     value before its scheduler starts, whatever warmup_min_ratio is);
//     warm-up ratio warmup_min_ratio + (1 - warmup_min_ratio) x the WarmupLR
//     fraction; after it cos_min_ratio + (1 - cos_min_ratio) x (1 +
//     cos(pi x p)) / 2 with p = min(1, (k - W) / max(1, T - W)).
//   OneCycle (cycle length L = first + second half): step k <= L is k steps
//     into the cycle, min -> max over the first half and back over the
//     second (in stairs when a stair count is set); step k > L decays:
//     cycle_min_lr / (1 + decay_lr_rate x (k - L) / decay_step_size), or
//     cycle_min_lr when decay_step_size or decay_lr_rate is 0.
double LearningRateAt(const LrScheduleConfig& config, double optimizer_lr,
                      int64_t step);
// OneCycle with cycle_momentum: the momentum (SGD) or beta1 (Adam) for
// `step`; std::nullopt for every other schedule. It moves opposite to the
// rate: cycle_max_mom - (cycle_max_mom - cycle_min_mom) x the cycle
// position, then cycle_max_mom x (1 + decay_mom_rate x (k - L) /
// decay_step_size). Two DeepSpeed details are left out on purpose: its
// constructor gives the very first step cycle_min_mom (not the cycle's
// cycle_max_mom), and it sets Adam's beta2 to 0.99 while cycling (kolo leaves
// beta2 alone); DeepSpeed also skips cycling for optimizers without betas
// (SGD), where kolo cycles SGD's momentum.
std::optional<double> MomentumAt(const LrScheduleConfig& config, int64_t step);

}  // namespace kolo

#endif  // KOLO_LR_SCHEDULE_H_
