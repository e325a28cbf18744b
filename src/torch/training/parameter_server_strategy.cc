// ParameterServerStrategy (kolo/trainer_model_parallel.h): a parameter
// server's worker on the Trainer.
#include <algorithm>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/trainer_model_parallel.h"
#include "torch/training/agreement.h"
#include "torch/training/shard_evaluation.h"

namespace kolo::torch {

StatusOr<std::unique_ptr<ParameterServerStrategy>>
ParameterServerStrategy::Create(models::Model& model,
                                const ParameterServerOptions& options) {
  // The roles may be wrong on one rank only (its KOLO_ROLE); all must know
  // before the collectives below.
  StatusOr<std::vector<int32_t>> servers = ParameterServerRanks(options);
  KOLO_RETURN_IF_ERROR(AgreeAcrossRanks(servers.status()));
  std::vector<int32_t> workers;
  for (int32_t r = 0; r < Size(); ++r) {
    if (!std::binary_search(servers->begin(), servers->end(), r))
      workers.push_back(r);
  }
  // Before ParameterServer::Create: a worker returns from it only once the
  // servers serve, and then they join no collective.
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> group, NewGroup(workers));
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<ParameterServer> server,
      ParameterServer::Create(model.named_parameters(), options));
  return std::unique_ptr<ParameterServerStrategy>(
      new ParameterServerStrategy(std::move(server), std::move(group)));
}

void ParameterServerStrategy::ZeroGrad() { server_->ZeroGrad(); }

void ParameterServerStrategy::Backward(const ::torch::Tensor& loss) {
  loss.backward();
}

StatusOr<StepOutcome> ParameterServerStrategy::Step() {
  KOLO_RETURN_IF_ERROR(server_->Step());
  StepOutcome outcome;
  outcome.stepped = true;
  return outcome;
}

void ParameterServerStrategy::SetLearningRate(double lr) {
  server_->SetLearningRate(lr);
}

double ParameterServerStrategy::wait_seconds() const {
  return server_->statistics().wait_seconds;
}

TrainingShard ParameterServerStrategy::Shard() const {
  TrainingShard shard;
  shard.index = server_->role_index();
  shard.count = static_cast<int32_t>(server_->workers().size());
  return shard;
}

StatusOr<Evaluation> ParameterServerStrategy::Evaluate(
    models::Model& model, const data::Dataset& test, int64_t batch_size,
    const std::string&) {
  ::torch::NoGradGuard no_grad;
  model.eval();
  auto logits = [&model](const ::torch::Tensor& images,
                         int64_t real_rows) -> StatusOr<::torch::Tensor> {
    if (real_rows == 0) return ::torch::Tensor();
    return model.forward(images.narrow(0, 0, real_rows));
  };
  const TrainingShard shard = Shard();
  return internal::EvaluateShard(test, shard.index, shard.count, batch_size,
                                 /*counts=*/true, logits, peers_);
}

StatusOr<uint64_t> ParameterServerStrategy::AgreeOnParameters(
    const ::torch::nn::Module& model) {
  KOLO_ASSIGN_OR_RETURN(std::vector<uint64_t> all,
                        internal::GatherChecksums(model, peers_));
  // Only a synchronous step answers every worker with the same values.
  if (server_->options().mode == ParameterServerMode::kSynchronous) {
    KOLO_RETURN_IF_ERROR(internal::CheckReplicasAgree(all, 1, "worker"));
  }
  return all[0];
}

}  // namespace kolo::torch
