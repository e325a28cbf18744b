// The Trainer's strategies for ranks that do not each hold the whole model:
// pipeline parallelism (kolo/torch_pipeline.h) and parameter servers
// (kolo/torch_parameter_server.h). kolo-train's --pipeline-stages and
// --parameter-servers are these strategies on a kolo::torch::Trainer.
//
// Pipeline. The world is stages x replicas; every rank builds the same
// Sequential (the same seed), cuts it with Pipeline::Create, and trains its
// stage on the Trainer:
//
//   ::torch::manual_seed(0);
//   ::torch::nn::Sequential layers(::torch::nn::Flatten(),
//                                  ::torch::nn::Linear(784, 10));
//   kolo::torch::PipelineOptions options;  // 2 stages, 4 micro-batches
//   KOLO_ASSIGN_OR_RETURN(std::unique_ptr<kolo::torch::Pipeline> pipeline,
//                         kolo::torch::Pipeline::Create(layers, options));
//   kolo::torch::PipelineStrategy strategy(
//       *pipeline, kolo::torch::MakeOptimizer(kolo::OptimizerConfig{}));
//   kolo::torch::Trainer trainer(strategy.model(), strategy, {});
//   kolo::data::Dataset train, test;  // yours
//   KOLO_ASSIGN_OR_RETURN(kolo::torch::FitResult fit, trainer.Fit(train, test));
//   (void)fit;
//
// The training set is sharded across the replicas, not the ranks: every
// stage of replica q reads shard q, so they all hold the same batch (the
// first stage feeds its images, the last scores its labels), and
// TrainerOptions::batch_size is per replica. A shard's last batch with
// fewer rows than the micro-batches is dropped. Each step is one
// Pipeline::TrainStep (whose gradients are averaged across the replicas)
// and one step of this stage's optimizer; the loss reported is the global
// batch's. The test set is evaluated through Pipeline::Forward, each
// replica its shard, the last stages counting; the layers stay in training
// mode there and batch-norm statistics stay each replica's own. At the end
// every stage's replicas must hold bit-identical parameters.
//
// Parameter servers. Every rank builds the same model and calls
// ParameterServerStrategy::Create (collective over the world); a server
// then serves until every worker finished, and the workers train:
//
//   ::torch::manual_seed(0);
//   std::shared_ptr<kolo::models::Model> model = kolo::models::LeNet();
//   kolo::torch::ParameterServerOptions options;  // servers from kolorun
//   KOLO_ASSIGN_OR_RETURN(
//       std::unique_ptr<kolo::torch::ParameterServerStrategy> strategy,
//       kolo::torch::ParameterServerStrategy::Create(*model, options));
//   kolo::torch::ParameterServer& server = strategy->server();
//   if (server.IsServer()) return server.Serve();
//   kolo::torch::Trainer trainer(*model, *strategy, {});
//   kolo::data::Dataset train, test;  // yours
//   kolo::StatusOr<kolo::torch::FitResult> fit = trainer.Fit(train, test);
//   KOLO_RETURN_IF_ERROR(server.Finish());  // even after an error
//   return fit.status();
//
// The workers shard the training set among themselves, push each batch's
// gradients and pull the servers' parameters (ParameterServer::Step), and
// evaluate and average their losses in a process group of their own, since
// the servers take part in no collective once they serve. The learning
// rate the Trainer's hook sets is the rate each push asks the servers for.
// In synchronous mode the workers end with identical parameters (checked);
// in the asynchronous modes each holds its last pull, and Fit's checksum is
// worker 0's.
//
// Thread-safety: as kolo/trainer.h's strategies.
#ifndef KOLO_TRAINER_MODEL_PARALLEL_H_
#define KOLO_TRAINER_MODEL_PARALLEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kolo/point_to_point.h"
#include "kolo/torch_parameter_server.h"
#include "kolo/torch_pipeline.h"
#include "kolo/torch_zero.h"
#include "kolo/trainer.h"

namespace kolo::torch {

// The ranks a strategy evaluates and averages with: a process group, or
// the whole world when the group is null. Collectives have kolo.h's
// meaning over those ranks.
class TrainingPeers {
 public:
  explicit TrainingPeers(std::shared_ptr<ProcessGroup> group = nullptr)
      : group_(std::move(group)) {}
  int32_t size() const;
  int32_t rank() const;
  Status Allreduce(void* values, int64_t count, DataType type, ReduceOp op);
  Status Allgather(const void* send, void* recv, int64_t count, DataType type);
  Status Barrier();
  // The mean of `value` over the peers: their sum divided by size().
  StatusOr<double> Average(double value);

 private:
  std::shared_ptr<ProcessGroup> group_;
};

// What both strategies share: the peers they evaluate and average their
// train loss with (sum over the peers, divided by their number).
class PeerStrategy : public TrainingStrategy {
 public:
  TrainingPeers& peers() { return peers_; }
  StatusOr<double> AverageLoss(double loss, const std::string& name) override;

 protected:
  explicit PeerStrategy(TrainingPeers peers) : peers_(std::move(peers)) {}
  TrainingPeers peers_;
};

class PipelineStrategy : public PeerStrategy {
 public:
  // `make_optimizer` builds this stage's optimizer over its parameters (a
  // stage without parameters has none). `pipeline` must outlive this.
  PipelineStrategy(Pipeline& pipeline, const OptimizerFactory& make_optimizer);
  ~PipelineStrategy() override;

  // peers(): the world, every rank of every replica.
  // What the Trainer trains on this rank: this stage's layers.
  models::Model& model() { return *model_; }
  Pipeline& pipeline() { return pipeline_; }
  Status Start() override;
  void ZeroGrad() override;
  // The pipeline's TrainStep runs backward; this is never called.
  void Backward(const ::torch::Tensor& loss) override;
  StatusOr<StepOutcome> Step() override;
  void SetLearningRate(double lr) override;
  void SetMomentum(double momentum) override;
  StrategyMemory Memory() const override;
  void ResetPeakMemory() override {}
  // The pipeline's idle time: its bubble and transfers.
  double wait_seconds() const override;

  TrainingShard Shard() const override;
  StatusOr<::torch::Tensor> ForwardBackward(models::Model& model,
                                            const data::Batch& batch) override;
  StatusOr<Evaluation> Evaluate(models::Model& model, const data::Dataset& test,
                                int64_t batch_size,
                                const std::string& name) override;
  // A hash of every stage's checksum, once each stage's replicas agree.
  StatusOr<uint64_t> AgreeOnParameters(
      const ::torch::nn::Module& model) override;

 private:
  Pipeline& pipeline_;
  std::shared_ptr<models::Model> model_;
  std::unique_ptr<::torch::optim::Optimizer> optimizer_;  // null: none
};

class ParameterServerStrategy : public PeerStrategy {
 public:
  // Collective over the world, on every rank with the same model and
  // options: the workers' process group, then ParameterServer::Create over
  // `model`'s parameters (which returns on a worker once the servers serve).
  static StatusOr<std::unique_ptr<ParameterServerStrategy>> Create(
      models::Model& model, const ParameterServerOptions& options);

  // peers(): the workers (meaningless on a server).
  ParameterServer& server() { return *server_; }

  Status Start() override { return Status::Ok(); }
  void ZeroGrad() override;
  void Backward(const ::torch::Tensor& loss) override;
  // Pushes the gradients and pulls the parameters.
  StatusOr<StepOutcome> Step() override;
  // The rate the next pushes ask the servers for.
  void SetLearningRate(double lr) override;
  // The servers' optimizer is fixed at Create.
  void SetMomentum(double) override {}
  StrategyMemory Memory() const override { return {}; }
  void ResetPeakMemory() override {}
  // Seconds Step() waited for the servers.
  double wait_seconds() const override;

  TrainingShard Shard() const override;
  StatusOr<Evaluation> Evaluate(models::Model& model, const data::Dataset& test,
                                int64_t batch_size,
                                const std::string& name) override;
  StatusOr<uint64_t> AgreeOnParameters(
      const ::torch::nn::Module& model) override;

 private:
  ParameterServerStrategy(std::unique_ptr<ParameterServer> server,
                          std::shared_ptr<ProcessGroup> workers)
      : PeerStrategy(TrainingPeers(std::move(workers))),
        server_(std::move(server)) {}

  std::unique_ptr<ParameterServer> server_;
};

}  // namespace kolo::torch

#endif  // KOLO_TRAINER_MODEL_PARALLEL_H_
