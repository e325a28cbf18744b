// The data-parallel strategies of kolo/trainer.h: DistributedOptimizer's and
// ZeroOptimizer's, behind the one interface the Trainer steps, and the
// interface's data-parallel defaults.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kolo/trainer.h"
#include "torch/training/agreement.h"

namespace kolo::torch {
namespace internal {

Status CheckReplicasAgree(const std::vector<uint64_t>& checksums,
                          int32_t replica_stride, const char* peer) {
  for (size_t i = 0; i < checksums.size(); ++i) {
    const size_t reference = i % static_cast<size_t>(replica_stride);
    if (checksums[i] == checksums[reference]) continue;
    char text[160];
    std::snprintf(text, sizeof(text),
                  "the %ss ended with different parameters: %s %zu checksum "
                  "%#018" PRIx64 ", %s %zu %#018" PRIx64,
                  peer, peer, reference, checksums[reference], peer, i,
                  checksums[i]);
    return Internal(text);
  }
  return Status::Ok();
}

}  // namespace internal

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

TrainingShard TrainingStrategy::Shard() const {
  TrainingShard shard;
  shard.index = Rank();
  shard.count = Size();
  return shard;
}

StatusOr<::torch::Tensor> TrainingStrategy::ForwardBackward(
    models::Model& model, const data::Batch& batch) {
  ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
      model.forward(ModelInput(model, batch.images)).to(::torch::kFloat32),
      batch.labels);
  Backward(loss);
  return loss;
}

StatusOr<Evaluation> TrainingStrategy::Evaluate(models::Model& model,
                                                const data::Dataset& test,
                                                int64_t batch_size,
                                                const std::string& name) {
  // Batch-norm statistics follow each rank's own batches; rank 0's become
  // everyone's, so every rank evaluates (and checkpoints) the same model.
  if (IsInitialized() && !model.buffers().empty()) {
    KOLO_RETURN_IF_ERROR(BroadcastParameters(model, 0));
  }
  return kolo::torch::Evaluate(model, test, batch_size, name);
}

StatusOr<double> TrainingStrategy::AverageLoss(double loss,
                                               const std::string& name) {
  if (!IsInitialized()) return loss;
  return AverageMetric(loss, name);
}

StatusOr<uint64_t> TrainingStrategy::AgreeOnParameters(
    const ::torch::nn::Module& model) {
  return ::kolo::torch::AgreeOnParameters(model);
}

StatusOr<uint64_t> AgreeOnParameters(const ::torch::nn::Module& model) {
  const uint64_t checksum = ParameterChecksum(model);
  if (!IsInitialized()) return checksum;
  TrainingPeers world;
  KOLO_ASSIGN_OR_RETURN(std::vector<uint64_t> all,
                        internal::GatherChecksums(model, world));
  KOLO_RETURN_IF_ERROR(internal::CheckReplicasAgree(all, 1, "rank"));
  return checksum;
}

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
