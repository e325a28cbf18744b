// A rank of model_parallel_test, started by kolorun:
//   model_parallel_worker pipeline EPOCHS
//     The world is 2 stages x R replicas. Trains a Sequential MLP on the
//     Trainer with PipelineStrategy (SGD with momentum, 4 micro-batches,
//     batch b per replica); alongside, every rank trains a copy of the
//     unsplit model in one process on batches of R·b in the order a
//     one-rank DistributedSampler visits. The pipeline promises the same
//     update, so this rank's stage must equal the copy's layers.
//   model_parallel_worker servers EPOCHS   (kolorun -np N --servers 1)
//     N workers train testing::Mlp on the Trainer with a synchronous
//     ParameterServerStrategy, batch b each; every worker also trains a copy
//     in one process on batches of N·b. A synchronous step is one step over
//     the N batches, so the parameters must agree.
//   model_parallel_worker small-batches
//     A pipeline of 2 stages and 4 micro-batches: Fit must refuse a batch
//     of 2 rows, and a training set of 2 rows, naming the figures; exits 1
//     when either trains.
// Prints "rank R: max parameter difference D; S steps" (or the error);
// exits 1 when D exceeds 1e-5 or training failed.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kolo/trainer.h"
#include "kolo/trainer_model_parallel.h"
#include "torch/training/training_testing.h"

namespace {

namespace kt = kolo::torch;
using kolo::testing::kTrainingBatch;

constexpr double kLr = 0.1;
constexpr double kMomentum = 0.9;
constexpr uint64_t kSeed = 5;

int Fail(const kolo::Status& status) {
  std::printf("rank %d: %s\n", kolo::Rank(), status.ToString().c_str());
  return 1;
}

kolo::OptimizerConfig Sgd() {
  kolo::OptimizerConfig config;
  config.type = kolo::OptimizerType::kSgd;
  config.lr = kLr;
  config.momentum = kMomentum;
  return config;
}

kt::TrainerOptions Options(int64_t epochs) {
  kt::TrainerOptions options;
  options.epochs = epochs;
  options.batch_size = kTrainingBatch;
  options.seed = kSeed;
  return options;
}

// One process, batches of `batch` rows in the sampler order of a one-rank
// world, SGD with momentum on all of `model`.
kolo::Status TrainReference(
    torch::nn::Module& model,
    const std::function<torch::Tensor(torch::Tensor)>& forward,
    const kolo::data::Dataset& set, int64_t epochs, int64_t batch) {
  torch::optim::SGD sgd(model.parameters(),
                        torch::optim::SGDOptions(kLr).momentum(kMomentum));
  kolo::data::DistributedSampler::Options options;
  options.seed = kSeed;
  KOLO_ASSIGN_OR_RETURN(
      kolo::data::DistributedSampler sampler,
      kolo::data::DistributedSampler::Create(set.size(), options));
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> rows = sampler.Indices(epoch);
    for (size_t start = 0; start < rows.size(); start += batch) {
      torch::Tensor index = torch::tensor(std::vector<int64_t>(
          rows.begin() + start, rows.begin() + start + batch));
      sgd.zero_grad();
      torch::nn::functional::cross_entropy(
          forward(set.images.index_select(0, index)),
          set.labels.index_select(0, index))
          .backward();
      sgd.step();
    }
  }
  return kolo::Status::Ok();
}

// The largest difference between `trained` and the tensors of the same
// names in `expected`.
double MaxDifference(
    const torch::OrderedDict<std::string, torch::Tensor>& trained,
    const torch::OrderedDict<std::string, torch::Tensor>& expected) {
  double difference = 0;
  for (const auto& item : trained) {
    difference = std::max(
        difference,
        (item.value() - expected[item.key()]).abs().max().item<double>());
  }
  return difference;
}

torch::nn::Sequential Mlp() {
  return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(6, 16),
                               torch::nn::Tanh(), torch::nn::Linear(16, 3));
}

kolo::StatusOr<std::unique_ptr<kt::Pipeline>> TwoStages(
    torch::nn::Sequential model) {
  kt::PipelineOptions options;
  options.stages = 2;
  options.micro_batches = 4;
  options.split = {2, 2};
  return kt::Pipeline::Create(model, options);
}

int RunPipeline(int64_t epochs) {
  const kolo::data::Dataset set = kolo::testing::TrainingSet();
  torch::manual_seed(7);
  torch::nn::Sequential model = Mlp();
  torch::manual_seed(7);
  torch::nn::Sequential reference = Mlp();
  kolo::StatusOr<std::unique_ptr<kt::Pipeline>> pipeline = TwoStages(model);
  if (!pipeline.ok()) return Fail(pipeline.status());
  kt::PipelineStrategy strategy(**pipeline, kt::MakeOptimizer(Sgd()));
  kt::Trainer trainer(strategy.model(), strategy, Options(epochs));
  int steps = 0;
  trainer.hooks().on_step = [&](const kt::StepReport&) { ++steps; };
  kolo::StatusOr<kt::FitResult> fit =
      trainer.Fit(set, kolo::testing::TrainingSet(30));
  if (!fit.ok()) return Fail(fit.status());
  kolo::Status trained = TrainReference(
      *reference, [&](torch::Tensor x) { return reference->forward(x); }, set,
      epochs, kTrainingBatch * (*pipeline)->replicas());
  if (!trained.ok()) return Fail(trained);
  const double difference = MaxDifference((*pipeline)->named_parameters(),
                                          reference->named_parameters());
  std::printf("rank %d: max parameter difference %.3g; %d steps\n",
              kolo::Rank(), difference, steps);
  return difference <= 1e-5 ? 0 : 1;
}

int RunServers(int64_t epochs) {
  const kolo::data::Dataset set = kolo::testing::TrainingSet();
  torch::manual_seed(7);
  kolo::testing::Mlp model;
  torch::manual_seed(7);
  kolo::testing::Mlp reference;
  kt::ParameterServerOptions options;
  options.optimizer = Sgd();
  kolo::StatusOr<std::unique_ptr<kt::ParameterServerStrategy>> strategy =
      kt::ParameterServerStrategy::Create(model, options);
  if (!strategy.ok()) return Fail(strategy.status());
  kt::ParameterServer& server = (*strategy)->server();
  if (server.IsServer()) {
    kolo::Status served = server.Serve();
    return served.ok() ? 0 : Fail(served);
  }
  kt::Trainer trainer(model, **strategy, Options(epochs));
  int steps = 0;
  trainer.hooks().on_step = [&](const kt::StepReport&) { ++steps; };
  kolo::StatusOr<kt::FitResult> fit = trainer.Fit(set, set);
  kolo::Status finished = server.Finish();
  if (!fit.ok()) return Fail(fit.status());
  if (!finished.ok()) return Fail(finished);
  const int64_t workers = static_cast<int64_t>(server.workers().size());
  kolo::Status trained = TrainReference(
      reference, [&](torch::Tensor x) { return reference.forward(x); }, set,
      epochs, kTrainingBatch * workers);
  if (!trained.ok()) return Fail(trained);
  const double difference =
      MaxDifference(model.named_parameters(), reference.named_parameters());
  std::printf("rank %d: max parameter difference %.3g; %d steps\n",
              kolo::Rank(), difference, steps);
  return difference <= 1e-5 ? 0 : 1;
}

// Two refusals, each before any collective: a batch below the 4
// micro-batches, and a training set too small for one batch of 4 rows.
int RunSmallBatches() {
  torch::manual_seed(7);
  kolo::StatusOr<std::unique_ptr<kt::Pipeline>> pipeline = TwoStages(Mlp());
  if (!pipeline.ok()) return Fail(pipeline.status());
  kt::PipelineStrategy strategy(**pipeline, kt::MakeOptimizer(Sgd()));
  int refused = 0;
  for (auto [batch, rows] : {std::pair<int64_t, int64_t>{2, 96}, {8, 2}}) {
    kt::TrainerOptions options = Options(1);
    options.batch_size = batch;
    kt::Trainer trainer(strategy.model(), strategy, options);
    const kolo::data::Dataset set = kolo::testing::TrainingSet(rows);
    kolo::StatusOr<kt::FitResult> fit = trainer.Fit(set, set);
    std::printf("rank %d: batch %lld of %lld rows: %s\n", kolo::Rank(),
                static_cast<long long>(batch), static_cast<long long>(rows),
                fit.status().ToString().c_str());
    if (!fit.ok()) ++refused;
  }
  return refused == 2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 1;
  if (kolo::Status s = kolo::Init(); !s.ok()) return Fail(s);
  torch::set_num_threads(1);
  int code = 2;
  if (mode == "pipeline") code = RunPipeline(epochs);
  if (mode == "servers") code = RunServers(epochs);
  if (mode == "small-batches") code = RunSmallBatches();
  std::fflush(stdout);
  if (kolo::Status s = kolo::Shutdown(); !s.ok()) return Fail(s);
  return code;
}
