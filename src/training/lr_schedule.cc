#include "kolo/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace kolo {
namespace {

constexpr double kPi = 3.14159265358979323846;

// WarmupLR and WarmupDecayLR's warm-up fraction for DeepSpeed's
// last_batch_iteration `last` (0 <= last < warmup).
double WarmupGamma(const LrScheduleConfig& config, int64_t warmup,
                   int64_t last) {
  if (config.warmup_type == "linear") {
    return static_cast<double>(last) / static_cast<double>(warmup);
  }
  return std::log(static_cast<double>(last + 1)) /
         std::log(static_cast<double>(warmup));
}

// OneCycle's position in its cycle for step `step` (<= the cycle's
// length): 0 at cycle_min_lr, 1 at cycle_max_lr. DeepSpeed works with the
// fraction step / total in floating point; with integers the halves and the
// stairs fall on exactly the steps they should.
double OneCycleScale(const LrScheduleConfig& config, int64_t step) {
  const int64_t first = std::max<int64_t>(1, config.cycle_first_step_size);
  const int64_t second =
      config.cycle_second_step_size > 0 ? config.cycle_second_step_size : first;
  const int64_t total = first + second;
  const int64_t in_cycle = std::max<int64_t>(0, step) % total;
  const bool rising = in_cycle <= first;
  const int64_t first_stairs = config.cycle_first_stair_count;
  const int64_t second_stairs = config.cycle_second_stair_count > 0
                                    ? config.cycle_second_stair_count
                                    : first_stairs;
  const int64_t stairs = rising ? first_stairs : second_stairs;
  const int64_t half = rising ? first : second;
  const int64_t distance = rising ? in_cycle : total - in_cycle;
  if (stairs > 0) {
    // Whole stairs climbed: floor(distance * stairs / half) / stairs.
    return static_cast<double>(distance * stairs / half) /
           static_cast<double>(stairs);
  }
  return static_cast<double>(distance) / static_cast<double>(half);
}

int64_t OneCycleLength(const LrScheduleConfig& config) {
  const int64_t first = std::max<int64_t>(1, config.cycle_first_step_size);
  return first + (config.cycle_second_step_size > 0
                      ? config.cycle_second_step_size
                      : first);
}

// OneCycle past its cycle (step > OneCycleLength): `rate` times the decay
// intervals since the cycle ended, 0 without a decay. The rate divides by
// 1 + this, the momentum multiplies by it.
double OneCycleDecay(const LrScheduleConfig& config, int64_t step,
                     double rate) {
  if (config.decay_step_size <= 0 || rate == 0) return 0;
  const double intervals = static_cast<double>(step - OneCycleLength(config)) /
                           static_cast<double>(config.decay_step_size);
  return rate * intervals;
}

}  // namespace

double LearningRate(const LinearScalingSchedule& schedule, int64_t iteration) {
  iteration = std::max<int64_t>(iteration, 0);
  if (iteration < schedule.warmup_iterations) {
    const double progress = static_cast<double>(iteration) /
                            static_cast<double>(schedule.warmup_iterations);
    return schedule.base_lr +
           (schedule.scaled_lr - schedule.base_lr) * progress;
  }
  const int64_t decay_iterations =
      schedule.total_iterations - schedule.warmup_iterations;
  if (schedule.after_warmup == LinearScalingSchedule::AfterWarmup::kHold ||
      decay_iterations <= 0) {
    return schedule.scaled_lr;
  }
  const double progress = std::min(
      1.0, static_cast<double>(iteration - schedule.warmup_iterations) /
               static_cast<double>(decay_iterations));
  return schedule.scaled_lr * 0.5 * (1.0 + std::cos(kPi * progress));
}

// The schedules below follow DeepSpeed's lr_schedules.py. DeepSpeed sets
// the rate for its first optimizer step when the scheduler is built
// (last_batch_iteration -1) and moves the schedule after each step that was
// taken, so kolo's step k runs with DeepSpeed's last_batch_iteration k - 1.
double LearningRateAt(const LrScheduleConfig& config, double optimizer_lr,
                      int64_t step) {
  const int64_t last = step - 1;  // DeepSpeed's last_batch_iteration
  // DeepSpeed raises warm-ups shorter than 2 steps to 2, so log() of the
  // length is never 0.
  const int64_t warmup = std::max<int64_t>(2, config.warmup_num_steps);
  switch (config.type) {
    case LrScheduleType::kNone: return optimizer_lr;
    case LrScheduleType::kWarmupLR:
    case LrScheduleType::kWarmupDecayLR: {
      const double max_lr = config.warmup_max_lr_from_optimizer
                                ? optimizer_lr
                                : config.warmup_max_lr;
      const double delta = max_lr - config.warmup_min_lr;
      double gamma = 0;  // before the first step: warmup_min_lr
      if (last < 0) {
        gamma = 0;
      } else if (last < warmup) {
        gamma = WarmupGamma(config, warmup, last);
      } else if (config.type == LrScheduleType::kWarmupLR) {
        gamma = 1;
      } else {
        const int64_t decay_steps =
            std::max<int64_t>(1, config.total_num_steps - warmup);
        gamma =
            std::max(0.0, static_cast<double>(config.total_num_steps - last) /
                              static_cast<double>(decay_steps));
      }
      return config.warmup_min_lr + delta * gamma;
    }
    case LrScheduleType::kWarmupCosineLR: {
      // DeepSpeed's ratio before the first step is 0, whatever
      // warmup_min_ratio is.
      if (last < 0) return 0;
      double ratio = 0;
      if (last < warmup) {
        ratio = config.warmup_min_ratio + WarmupGamma(config, warmup, last) *
                                              (1 - config.warmup_min_ratio);
      } else {
        const double decay_steps = static_cast<double>(
            std::max<int64_t>(1, config.total_num_steps - warmup));
        // Clamped, so that past total_num_steps the rate stays at its floor.
        const double progress =
            std::min(1.0, static_cast<double>(last - warmup + 1) / decay_steps);
        const double half_cosine = (1 + std::cos(kPi * progress)) / 2;
        ratio = std::max(0.0, config.cos_min_ratio +
                                  (1 - config.cos_min_ratio) * half_cosine);
      }
      return optimizer_lr * ratio;
    }
    case LrScheduleType::kOneCycle: {
      const int64_t length = OneCycleLength(config);
      if (step <= length) {
        return config.cycle_min_lr +
               (config.cycle_max_lr - config.cycle_min_lr) *
                   OneCycleScale(config, step);
      }
      return config.cycle_min_lr /
             (1 + OneCycleDecay(config, step, config.decay_lr_rate));
    }
  }
  return optimizer_lr;
}

std::optional<double> MomentumAt(const LrScheduleConfig& config, int64_t step) {
  if (config.type != LrScheduleType::kOneCycle || !config.cycle_momentum) {
    return std::nullopt;
  }
  const int64_t length = OneCycleLength(config);
  if (step <= length) {
    return config.cycle_max_mom -
           (config.cycle_max_mom - config.cycle_min_mom) *
               OneCycleScale(config, step);
  }
  return config.cycle_max_mom *
         (1 + OneCycleDecay(config, step, config.decay_mom_rate));
}

}  // namespace kolo
