// The loss scale of float16 training: the loss is multiplied by the scale
// before backward so that small gradients do not flush to zero in float16,
// and the gradients are divided by it before the optimizer step. A step
// whose gradients overflowed (inf or NaN anywhere, on any rank) is skipped,
// and the scale adapts.
//
// Two rules, chosen explicitly (LossScaleConfig::rule):
//
// DeepSpeed's (kDeepSpeed; deepspeed/runtime/fp16/loss_scaler.py): the scale
// starts at 2^initial_scale_power. On an overflow the scale is halved, but
// only once `hysteresis` overflows have been seen since it last changed
// (each earlier one only uses up one unit of hysteresis), and never below
// min_loss_scale. After loss_scale_window steps in a row without an
// overflow the scale doubles and the hysteresis is restored (with
// consecutive_hysteresis, every clean step restores it). Precisely: the
// scale doubles on a clean Update() when (iteration - last_overflow_iteration)
// is a multiple of loss_scale_window, so on the window-th clean step after
// the start or after the last overflow (an overflow that only used up
// hysteresis also restarts the count). This is DeepSpeed up to v0.17.0;
// v0.17.1 changed the test to wait one clean step more.
//
// PyTorch GradScaler's (kTorchGradScaler): the scale starts at
// 2^initial_scale_power, is halved on every overflow (no hysteresis, no
// floor but min_loss_scale) and doubles after loss_scale_window clean steps
// in a row.
//
// A static scale (loss_scale > 0) never changes; overflowed steps are still
// skipped.
//
// At the minimum scale an overflow skips the step and reports
// kSkipAtMinimum, so that the caller warns instead of crashing (DeepSpeed
// raises an exception there). Under DeepSpeed's rule that is an overflow
// that would lower the scale (no hysteresis left) while it is at the
// minimum; one that only uses up hysteresis is a plain kSkip, as in
// DeepSpeed.
//
// Update() counts every call in `iteration`, and every overflow in
// skipped_steps, under all rules.
//
// Thread-safety: none; one training thread owns a scaler.
#ifndef KOLO_LOSS_SCALER_H_
#define KOLO_LOSS_SCALER_H_

#include <cstdint>

#include "kolo/training_config.h"

namespace kolo {

class LossScaler {
 public:
  enum class Verdict {
    kApply,          // no overflow: take the step
    kSkip,           // overflow: skip the step
    kSkipAtMinimum,  // overflow at min_loss_scale: skip, and warn
  };

  // What a checkpoint keeps so that a resumed run scales as if it had not
  // stopped.
  struct State {
    double scale = 1;
    int64_t iteration = 0;  // Update() calls so far
    int64_t last_overflow_iteration = -1;
    int32_t hysteresis_left = 1;
    int64_t clean_steps = 0;  // in a row, for kTorchGradScaler
    int64_t skipped_steps = 0;
  };

  explicit LossScaler(const LossScaleConfig& config);

  double scale() const { return state_.scale; }
  // Records one step's overflow verdict (the same on every rank) and moves
  // the scale by the rule.
  Verdict Update(bool overflow);
  int64_t skipped_steps() const { return state_.skipped_steps; }
  bool dynamic() const { return config_.loss_scale <= 0; }

  const State& state() const { return state_; }
  void Restore(const State& state) { state_ = state; }

 private:
  LossScaleConfig config_;
  State state_;
};

}  // namespace kolo

#endif  // KOLO_LOSS_SCALER_H_
