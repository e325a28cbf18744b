// PipelineStrategy (kolo/trainer_model_parallel.h): a Pipeline's stage on
// the Trainer.
#include <utility>
#include <vector>

#include "common/logging.h"
#include "kolo/kolo.h"
#include "kolo/trainer_model_parallel.h"
#include "torch/training/agreement.h"
#include "torch/training/shard_evaluation.h"

namespace kolo::torch {
namespace {

// A stage's layers as the models::Model the Trainer holds: train() and
// eval() reach them, and its parameters are the stage's.
class StageModel : public models::Model {
 public:
  explicit StageModel(::torch::nn::Sequential stage) : models::Model("Stage") {
    stage_ = register_module("stage", std::move(stage));
  }
  ::torch::Tensor forward(::torch::Tensor x) override {
    return stage_->forward(x);
  }

 private:
  ::torch::nn::Sequential stage_{nullptr};
};

::torch::Tensor CrossEntropy(const ::torch::Tensor& logits,
                             const ::torch::Tensor& labels) {
  return ::torch::nn::functional::cross_entropy(logits, labels);
}

}  // namespace

PipelineStrategy::PipelineStrategy(Pipeline& pipeline,
                                   const OptimizerFactory& make_optimizer)
    : PeerStrategy(TrainingPeers()),
      pipeline_(pipeline),
      model_(std::make_shared<StageModel>(pipeline.stage_module())) {
  std::vector<::torch::Tensor> parameters = pipeline.parameters();
  if (!parameters.empty()) optimizer_ = make_optimizer(std::move(parameters));
}

PipelineStrategy::~PipelineStrategy() = default;

// Pipeline::Create copied replica 0's stages to the others already.
Status PipelineStrategy::Start() { return Status::Ok(); }

void PipelineStrategy::ZeroGrad() {
  if (optimizer_) optimizer_->zero_grad();
}

void PipelineStrategy::Backward(const ::torch::Tensor&) {
  KOLO_CHECK(false) << "PipelineStrategy: Pipeline::TrainStep runs the "
                       "backward pass; the Trainer calls ForwardBackward";
}

StatusOr<StepOutcome> PipelineStrategy::Step() {
  if (optimizer_) optimizer_->step();
  StepOutcome outcome;
  outcome.stepped = true;
  return outcome;
}

void PipelineStrategy::SetLearningRate(double lr) {
  if (!optimizer_) return;
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
}

void PipelineStrategy::SetMomentum(double momentum) {
  if (optimizer_) SetOptimizerMomentum(*optimizer_, momentum);
}

StrategyMemory PipelineStrategy::Memory() const {
  StrategyMemory memory;
  if (optimizer_)
    memory.optimizer_state_bytes = OptimizerStateBytes(*optimizer_);
  return memory;
}

double PipelineStrategy::wait_seconds() const {
  return pipeline_.statistics().total_idle_seconds;
}

TrainingShard PipelineStrategy::Shard() const {
  TrainingShard shard;
  shard.index = pipeline_.replica();
  shard.count = pipeline_.replicas();
  shard.min_batch_rows = pipeline_.options().micro_batches;
  return shard;
}

StatusOr<::torch::Tensor> PipelineStrategy::ForwardBackward(
    models::Model&, const data::Batch& batch) {
  KOLO_ASSIGN_OR_RETURN(
      double loss,
      pipeline_.TrainStep(batch.images, batch.labels, CrossEntropy));
  return ::torch::tensor(loss, ::torch::kFloat64);
}

// Every rank of the world runs Forward equally often; a batch smaller than
// the micro-batches is padded by repeating its rows, the copies not
// counted.
StatusOr<Evaluation> PipelineStrategy::Evaluate(models::Model&,
                                                const data::Dataset& test,
                                                int64_t batch_size,
                                                const std::string&) {
  const int64_t micro_batches = pipeline_.options().micro_batches;
  auto logits = [this, micro_batches](const ::torch::Tensor& images,
                                      int64_t) -> StatusOr<::torch::Tensor> {
    const int64_t n = images.size(0);
    if (n >= micro_batches) return pipeline_.Forward(images);
    return pipeline_.Forward(images.index_select(
        0, ::torch::arange(micro_batches, ::torch::kInt64).remainder(n)));
  };
  return internal::EvaluateShard(test, pipeline_.replica(),
                                 pipeline_.replicas(), batch_size,
                                 pipeline_.is_last_stage(), logits, peers_);
}

StatusOr<uint64_t> PipelineStrategy::AgreeOnParameters(
    const ::torch::nn::Module& model) {
  KOLO_ASSIGN_OR_RETURN(std::vector<uint64_t> all,
                        internal::GatherChecksums(model, peers_));
  KOLO_RETURN_IF_ERROR(
      internal::CheckReplicasAgree(all, pipeline_.stages(), "rank"));
  // Replica 0's stages, in order, hashed as one (FNV-1a over the words).
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (int32_t s = 0; s < pipeline_.stages(); ++s) {
    hash ^= all[static_cast<size_t>(s)];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace kolo::torch
