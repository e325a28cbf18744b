#include "plan.h"

#include <algorithm>
#include <cmath>

namespace kolo::train {

double LearningRate(const LrPlan& plan, int64_t iteration) {
  iteration = std::max<int64_t>(iteration, 0);
  if (iteration < plan.warmup_iterations) {
    const double progress = static_cast<double>(iteration) /
                            static_cast<double>(plan.warmup_iterations);
    return plan.base_lr + (plan.scaled_lr - plan.base_lr) * progress;
  }
  const int64_t decay_iterations =
      plan.total_iterations - plan.warmup_iterations;
  if (plan.schedule == LrSchedule::kConstant || decay_iterations <= 0) {
    return plan.scaled_lr;
  }
  const double progress =
      std::min(1.0, static_cast<double>(iteration - plan.warmup_iterations) /
                        static_cast<double>(decay_iterations));
  return plan.scaled_lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace kolo::train
