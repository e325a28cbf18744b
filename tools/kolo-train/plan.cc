#include "plan.h"

#include <algorithm>

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

double LearningRate(double base_lr, double scaled_lr, int64_t iteration,
                    int64_t warmup_iterations) {
  if (warmup_iterations <= 0 || iteration >= warmup_iterations) {
    return scaled_lr;
  }
  const double progress = static_cast<double>(std::max<int64_t>(iteration, 0)) /
                          static_cast<double>(warmup_iterations);
  return base_lr + (scaled_lr - base_lr) * progress;
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
