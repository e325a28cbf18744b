// The arithmetic of a kolo-train run, kept free of LibTorch so that it can be
// tested alone.
//
// Learning rate. Data-parallel training on W workers with a per-worker batch
// b takes steps over W·b samples, so kolo-train scales --lr by W (each mode
// says what its W is: workers, pipeline replicas, or the global batch over
// --batch-size), climbs to it over --warmup-epochs and then holds it or
// decays it along half a cosine (--lr-schedule): kolo/lr_schedule.h's
// LinearScalingSchedule, which says why. The cosine is the default because
// it makes the final accuracy depend on the number of epochs rather than on
// where a constant rate happens to leave the weights; with it, 1, 2 and 4
// workers end within a fraction of a point of each other
// (docs/benchmarks.md gives the figures).
//
// Thread-safety: pure functions.
#ifndef KOLO_TOOLS_KOLO_TRAIN_PLAN_H_
#define KOLO_TOOLS_KOLO_TRAIN_PLAN_H_

#include <cstdint>

#include "flags.h"
#include "kolo/lr_schedule.h"

namespace kolo::train {

// The size of an evaluation batch: evaluation keeps no activations for
// backprop, so it can take larger batches than training; the size changes
// nothing but speed.
inline constexpr int64_t kEvalBatchSize = 512;

// The schedule of a run whose rate after the warm-up is `scaled_lr`. The
// warm-up runs only when that differs from --lr (there is nothing to climb
// to otherwise).
LinearScalingSchedule ScheduleOf(const Flags& f, double scaled_lr,
                                 int64_t batches_per_epoch);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_PLAN_H_
