// The arithmetic of a kolo-train run, kept free of LibTorch so that it can be
// tested alone: the learning rate at each iteration.
//
// Learning rate. Data-parallel training on W workers with a per-worker batch
// b takes steps over W·b samples, so it scales the single-worker rate by W
// (the linear scaling rule of Goyal et al. 2017, "Accurate, Large Minibatch
// SGD"). Starting at W times the rate can diverge while the weights are still
// random, so the rate climbs linearly from the base rate to the scaled one
// over the first warm-up iterations:
//
//   lr(i) = base + (scaled - base) · i / warmup        for i < warmup
//
// After the warm-up the rate either stays at the scaled rate (constant) or
// follows half a cosine from it down to zero at the last iteration (cosine,
// Loshchilov & Hutter 2017, "SGDR"):
//
//   lr(i) = scaled · (1 + cos(π · (i - warmup) / (total - warmup))) / 2
//
// The cosine is the default because it makes the final accuracy depend on
// the number of epochs rather than on where a constant rate happens to leave
// the weights; with it, 1, 2 and 4 workers end within a fraction of a point
// of each other (docs/benchmarks.md gives the figures).
//
// Iterations count batches from the start of training (epoch · batches per
// epoch + batch), so the rate at any point depends only on where training
// is, and a resumed run continues the ramp where the checkpoint left it.
//
// Thread-safety: pure functions.
#ifndef KOLO_TOOLS_KOLO_TRAIN_PLAN_H_
#define KOLO_TOOLS_KOLO_TRAIN_PLAN_H_

#include <cstdint>

namespace kolo::train {

// The size of an evaluation batch: evaluation keeps no activations for
// backprop, so it can take larger batches than training; the size changes
// nothing but speed.
inline constexpr int64_t kEvalBatchSize = 512;

enum class LrSchedule { kConstant, kCosine };

struct LrPlan {
  double base_lr = 0;    // the rate of one worker, where the warm-up starts
  double scaled_lr = 0;  // the rate after the warm-up
  int64_t warmup_iterations = 0;
  int64_t total_iterations = 0;  // of the whole run, for the cosine
  LrSchedule schedule = LrSchedule::kCosine;
};

double LearningRate(const LrPlan& plan, int64_t iteration);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_PLAN_H_
