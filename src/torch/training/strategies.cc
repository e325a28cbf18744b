// The data-parallel strategies of kolo/trainer.h: DistributedOptimizer's and
// ZeroOptimizer's, behind the one interface the Trainer steps.
#include <algorithm>
#include <utility>

#include "kolo/trainer.h"

namespace kolo::torch {
namespace {

// Rank 0's weights and optimizer state on every rank; before kolo::Init
// this process is the whole world and has nothing to copy.
Status StartFromRankZero(::torch::nn::Module& model,
                         ::torch::optim::Optimizer& optimizer) {
  if (!IsInitialized()) return Status::Ok();
  KOLO_RETURN_IF_ERROR(BroadcastParameters(model, 0));
  return BroadcastOptimizerState(optimizer, 0);
}

}  // namespace

DataParallelStrategy::DataParallelStrategy(::torch::optim::Optimizer& optimizer,
                                           ::torch::nn::Module& model,
                                           DistributedOptimizerOptions options)
    : optimizer_(optimizer), model_(model), options_(options) {}

Status DataParallelStrategy::Start() {
  KOLO_RETURN_IF_ERROR(StartFromRankZero(model_, optimizer_));
  distributed_ = std::make_unique<DistributedOptimizer>(
      optimizer_, model_.named_parameters(), options_);
  return Status::Ok();
}

void DataParallelStrategy::ZeroGrad() { distributed_->ZeroGrad(); }

void DataParallelStrategy::Backward(const ::torch::Tensor& loss) {
  loss.backward();
  int64_t bytes = distributed_->bucket_bytes();
  for (const auto& p : model_.parameters()) {
    if (p.grad().defined()) bytes += static_cast<int64_t>(p.grad().nbytes());
  }
  peak_gradient_bytes_ = std::max(peak_gradient_bytes_, bytes);
}

StatusOr<StepOutcome> DataParallelStrategy::Step() {
  KOLO_RETURN_IF_ERROR(distributed_->Step());
  StepOutcome outcome;
  outcome.stepped = ++passes_ % options_.backward_passes_per_step == 0;
  return outcome;
}

void DataParallelStrategy::SetLearningRate(double lr) {
  for (auto& group : optimizer_.param_groups()) group.options().set_lr(lr);
}

void DataParallelStrategy::SetMomentum(double momentum) {
  SetOptimizerMomentum(optimizer_, momentum);
}

StrategyMemory DataParallelStrategy::Memory() const {
  StrategyMemory memory;
  memory.optimizer_state_bytes = OptimizerStateBytes(optimizer_);
  memory.gradient_bytes = peak_gradient_bytes_;
  return memory;
}

void DataParallelStrategy::ResetPeakMemory() { peak_gradient_bytes_ = 0; }

double DataParallelStrategy::wait_seconds() const {
  return distributed_ ? distributed_->wait_seconds() : 0.0;
}

ZeroStrategy::ZeroStrategy(::torch::optim::Optimizer& optimizer,
                           ::torch::nn::Module& model,
                           OptimizerFactory make_optimizer, ZeroOptions options)
    : optimizer_(optimizer),
      model_(model),
      make_optimizer_(std::move(make_optimizer)),
      options_(options) {}

Status ZeroStrategy::Start() {
  KOLO_RETURN_IF_ERROR(StartFromRankZero(model_, optimizer_));
  KOLO_ASSIGN_OR_RETURN(
      zero_, ZeroOptimizer::Create(model_.named_parameters(), make_optimizer_,
                                   options_));
  return Status::Ok();
}

void ZeroStrategy::ZeroGrad() { zero_->ZeroGrad(); }

void ZeroStrategy::Backward(const ::torch::Tensor& loss) {
  zero_->ScaleLoss(loss).backward();
}

StatusOr<StepOutcome> ZeroStrategy::Step() { return zero_->Step(); }

void ZeroStrategy::SetLearningRate(double lr) { zero_->SetLearningRate(lr); }

void ZeroStrategy::SetMomentum(double momentum) {
  zero_->SetMomentum(momentum);
}

StrategyMemory ZeroStrategy::Memory() const {
  const ZeroMemory z = zero_->Memory();
  StrategyMemory memory;
  memory.optimizer_state_bytes = z.optimizer_state_bytes;
  memory.master_weight_bytes = z.master_weight_bytes;
  memory.gradient_bytes = z.peak_gradient_bytes;
  return memory;
}

void ZeroStrategy::ResetPeakMemory() { zero_->ResetPeakMemory(); }

}  // namespace kolo::torch
