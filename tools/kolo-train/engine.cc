#include "engine.h"

#include <algorithm>
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
  options.precision = f.precision == "bf16"   ? Precision::kBFloat16
                      : f.precision == "fp16" ? Precision::kFloat16
                                              : Precision::kFloat32;
  return options;
}

Engine::Engine(const Flags& f, models::Model& model,
               ::torch::optim::Optimizer& inner)
    : flags_(f), model_(model), inner_(inner) {}

StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const Flags& f, models::Model& model, ::torch::optim::Optimizer& inner) {
  std::unique_ptr<Engine> engine(new Engine(f, model, inner));
  if (UsesZero(f)) {
    KOLO_ASSIGN_OR_RETURN(engine->zero_,
                          kolo::torch::ZeroOptimizer::Create(
                              model.named_parameters(),
                              kolo::torch::MakeOptimizer(RunOptimizerConfig(f)),
                              RunZeroOptions(f)));
    return engine;
  }
  kolo::torch::DistributedOptimizerOptions options;
  options.compression = ParseCompression(f.compression);
  options.backward_passes_per_step = f.backward_passes_per_step;
  options.bucket_bytes = f.bucket_kib * 1024;
  engine->distributed_ = std::make_unique<kolo::torch::DistributedOptimizer>(
      inner, model.named_parameters(), options);
  return engine;
}

void Engine::ZeroGrad() {
  if (zero_) {
    zero_->ZeroGrad();
  } else {
    distributed_->ZeroGrad();
  }
}

void Engine::Backward(const ::torch::Tensor& loss) {
  if (zero_) {
    zero_->ScaleLoss(loss).backward();
  } else {
    loss.backward();
    NoteGradientBytes();
  }
}

StatusOr<kolo::torch::StepOutcome> Engine::Step() {
  kolo::torch::StepOutcome outcome;
  if (zero_) {
    KOLO_ASSIGN_OR_RETURN(outcome, zero_->Step());
    if (outcome.overflow) ++skipped_steps_;
  } else {
    KOLO_RETURN_IF_ERROR(distributed_->Step());
    outcome.stepped = ++passes_ % flags_.backward_passes_per_step == 0;
  }
  if (outcome.stepped) ++steps_taken_;
  return outcome;
}

void Engine::SetLearningRate(double lr) {
  if (zero_) {
    zero_->SetLearningRate(lr);
    return;
  }
  for (auto& group : inner_.param_groups()) group.options().set_lr(lr);
}

void Engine::SetMomentum(double momentum) {
  if (zero_) {
    zero_->SetMomentum(momentum);
    return;
  }
  kolo::torch::SetOptimizerMomentum(inner_, momentum);
}

double Engine::wait_seconds() const {
  return distributed_ ? distributed_->wait_seconds() : 0.0;
}

void Engine::NoteGradientBytes() {
  int64_t bytes = distributed_->bucket_bytes();
  for (const auto& p : model_.parameters()) {
    if (p.grad().defined()) bytes += static_cast<int64_t>(p.grad().nbytes());
  }
  peak_gradient_bytes_ = std::max(peak_gradient_bytes_, bytes);
}

EngineMemory Engine::Memory() const {
  EngineMemory memory;
  if (zero_) {
    const kolo::torch::ZeroMemory z = zero_->Memory();
    memory.optimizer_state_bytes = z.optimizer_state_bytes;
    memory.master_weight_bytes = z.master_weight_bytes;
    memory.gradient_bytes = z.peak_gradient_bytes;
  } else {
    memory.optimizer_state_bytes = kolo::torch::OptimizerStateBytes(inner_);
    memory.gradient_bytes = peak_gradient_bytes_;
  }
  return memory;
}

void Engine::ResetPeakMemory() {
  peak_gradient_bytes_ = 0;
  if (zero_) zero_->ResetPeakMemory();
}

}  // namespace kolo::train
