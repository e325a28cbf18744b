#include "plan.h"

#include <algorithm>
#include <cmath>

namespace kolo::train {
namespace {

// SplitMix64's finaliser: a bijection on 64-bit words that spreads every
// input bit over the output.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

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

int64_t UnpaddedShardSize(int64_t dataset_size, int32_t rank,
                          int32_t world_size) {
  if (rank >= dataset_size) return 0;
  return (dataset_size - rank + world_size - 1) / world_size;
}

uint64_t EpochSeed(uint64_t seed, int64_t epoch, int32_t rank) {
  uint64_t h = Mix(seed);
  h = Mix(h ^ static_cast<uint64_t>(epoch));
  h = Mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(rank)));
  // LibTorch's CPU generator takes any 64-bit seed; keep it below 2^63 so
  // that it also prints and round-trips as a signed number.
  return h >> 1;
}

}  // namespace kolo::train
