#include "plan.h"

namespace kolo::train {

LinearScalingSchedule ScheduleOf(const Flags& f, double scaled_lr,
                                 int64_t batches_per_epoch) {
  LinearScalingSchedule schedule;
  schedule.base_lr = f.lr;
  schedule.scaled_lr = scaled_lr;
  schedule.warmup_iterations =
      scaled_lr == f.lr ? 0 : f.warmup_epochs * batches_per_epoch;
  schedule.total_iterations = f.epochs * batches_per_epoch;
  schedule.after_warmup = f.lr_schedule == "constant"
                              ? LinearScalingSchedule::AfterWarmup::kHold
                              : LinearScalingSchedule::AfterWarmup::kCosine;
  return schedule;
}

}  // namespace kolo::train
