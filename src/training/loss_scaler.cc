#include "kolo/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace kolo {

LossScaler::LossScaler(const LossScaleConfig& config) : config_(config) {
  state_.scale = dynamic() ? std::ldexp(1.0, config_.initial_scale_power)
                           : config_.loss_scale;
  state_.hysteresis_left = config_.hysteresis;
}

LossScaler::Verdict LossScaler::Update(bool overflow) {
  const int64_t iteration = state_.iteration++;
  if (overflow) ++state_.skipped_steps;
  if (!dynamic()) return overflow ? Verdict::kSkip : Verdict::kApply;

  const double min_scale = config_.min_loss_scale;
  if (config_.rule == LossScaleRule::kTorchGradScaler) {
    if (overflow) {
      state_.clean_steps = 0;
      if (state_.scale <= min_scale) return Verdict::kSkipAtMinimum;
      state_.scale = std::max(state_.scale * 0.5, min_scale);
      return Verdict::kSkip;
    }
    if (++state_.clean_steps >= config_.loss_scale_window) {
      state_.scale *= 2;
      state_.clean_steps = 0;
    }
    return Verdict::kApply;
  }

  // DeepSpeed's rule. Hysteresis lets a run ride out isolated overflows:
  // only the overflow that finds one unit of hysteresis left lowers the
  // scale.
  if (overflow) {
    state_.last_overflow_iteration = iteration;
    if (config_.hysteresis > 1 && state_.hysteresis_left > 1) {
      --state_.hysteresis_left;
      return Verdict::kSkip;
    }
    if (state_.scale <= min_scale) return Verdict::kSkipAtMinimum;
    state_.scale = std::max(state_.scale / 2, min_scale);
    return Verdict::kSkip;
  }
  if (config_.consecutive_hysteresis) {
    state_.hysteresis_left = config_.hysteresis;
  }
  // The distance to the last overflow (or to iteration -1 at the start)
  // reaching a multiple of the window means loss_scale_window clean steps
  // in a row, this one included.
  const int64_t window = std::max<int64_t>(1, config_.loss_scale_window);
  if ((iteration - state_.last_overflow_iteration) % window == 0) {
    state_.hysteresis_left = config_.hysteresis;
    state_.scale *= 2;
  }
  return Verdict::kApply;
}

}  // namespace kolo
