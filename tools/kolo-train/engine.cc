#include "engine.h"

#include <utility>

#include "config_file.h"
#include "setup.h"

namespace kolo::train {

kolo::torch::ZeroOptions RunZeroOptions(const Flags& f) {
  kolo::torch::ZeroOptions options;
  options.stage = f.zero_stage;
  if (f.config) {
    options.reduce_bucket_elements =
        f.config->zero_optimization.reduce_bucket_size;
    options.allgather_bucket_elements =
        f.config->zero_optimization.allgather_bucket_size;
    options.overlap_comm = f.config->zero_optimization.overlap_comm;
    options.loss_scale = f.config->fp16;
  } else {
    // --bucket-kib sizes DistributedOptimizer's float32 buckets.
    if (f.bucket_kib > 0) options.reduce_bucket_elements = f.bucket_kib * 256;
  }
  options.gradient_accumulation_steps = f.backward_passes_per_step;
  options.gradient_clipping = f.gradient_clipping;
  options.precision = RunPrecision(f);
  return options;
}

RunStrategy MakeStrategy(const Flags& f, models::Model& model,
                         ::torch::optim::Optimizer& inner) {
  RunStrategy run;
  if (ModeOf(f) == TrainingMode::kZero) {
    auto zero = std::make_unique<kolo::torch::ZeroStrategy>(
        inner, model, kolo::torch::MakeOptimizer(RunOptimizerConfig(f)),
        RunZeroOptions(f));
    run.zero = zero.get();
    run.strategy = std::move(zero);
    return run;
  }
  kolo::torch::DistributedOptimizerOptions options;
  options.compression = ParseCompression(f.compression);
  options.backward_passes_per_step = f.backward_passes_per_step;
  options.bucket_bytes = f.bucket_kib * 1024;
  run.strategy = std::make_unique<kolo::torch::DataParallelStrategy>(
      inner, model, options);
  return run;
}

}  // namespace kolo::train
