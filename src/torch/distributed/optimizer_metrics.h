// The series kolo's optimizers keep (kolo/metrics.h), shared by
// DistributedOptimizer and ZeroOptimizer:
//   kolo_optimizer_steps_total            steps taken
//   kolo_optimizer_skipped_steps_total    float16 steps skipped (overflow)
//   kolo_optimizer_gradient_wait_seconds  how long one step waited for the
//       gradient reductions the backward pass did not hide: the
//       communication a profile of the step would show.
#ifndef KOLO_TORCH_DISTRIBUTED_OPTIMIZER_METRICS_H_
#define KOLO_TORCH_DISTRIBUTED_OPTIMIZER_METRICS_H_

#include "kolo/metrics.h"

namespace kolo {
namespace torch {

struct OptimizerMetrics {
  metrics::Counter steps;
  metrics::Counter skipped_steps;
  metrics::Histogram gradient_wait;
};

const OptimizerMetrics& GetOptimizerMetrics();

}  // namespace torch
}  // namespace kolo

#endif  // KOLO_TORCH_DISTRIBUTED_OPTIMIZER_METRICS_H_
