// A rank of trainer_test, started by kolorun:
//   trainer_worker EPOCHS
// Trains testing::Mlp with a Trainer and DataParallelStrategy (SGD with
// momentum) for EPOCHS epochs of per-rank batch b; alongside, every rank
// trains a reference copy in one process, without kolo, on batches of N·b
// in the order a one-rank DistributedSampler visits. Data parallelism
// promises the same update, so the parameters must agree to float32
// rounding. Prints "rank R: max parameter difference D" and the hooks it
// saw; exits 1 when D exceeds 1e-5 or a step failed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kolo/trainer.h"
#include "torch/training/training_testing.h"

namespace {

namespace kt = kolo::torch;
using kolo::testing::kTrainingBatch;

int Fail(const kolo::Status& status) {
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(),
               status.ToString().c_str());
  return 1;
}

torch::optim::SGD Sgd(kolo::testing::Mlp& model) {
  return torch::optim::SGD(model.parameters(),
                           torch::optim::SGDOptions(0.1).momentum(0.9));
}

// One process, batch N·b, the sampler order of a one-rank world.
kolo::Status TrainReference(kolo::testing::Mlp& model,
                            const kolo::data::Dataset& set, int64_t epochs) {
  torch::optim::SGD sgd = Sgd(model);
  kolo::data::DistributedSampler::Options options;
  options.seed = 5;
  KOLO_ASSIGN_OR_RETURN(
      kolo::data::DistributedSampler sampler,
      kolo::data::DistributedSampler::Create(set.size(), options));
  const int64_t batch = kTrainingBatch * kolo::Size();
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> rows = sampler.Indices(epoch);
    for (size_t start = 0; start < rows.size(); start += batch) {
      torch::Tensor index = torch::tensor(std::vector<int64_t>(
          rows.begin() + start, rows.begin() + start + batch));
      sgd.zero_grad();
      torch::nn::functional::cross_entropy(
          model.forward(set.images.index_select(0, index)),
          set.labels.index_select(0, index))
          .backward();
      sgd.step();
    }
  }
  return kolo::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int64_t epochs = std::atoll(argv[1]);
  if (kolo::Status s = kolo::Init(); !s.ok()) return Fail(s);
  torch::set_num_threads(1);
  const kolo::data::Dataset set = kolo::testing::TrainingSet();
  torch::manual_seed(7);
  kolo::testing::Mlp model;
  kolo::testing::Mlp reference;
  {
    torch::NoGradGuard no_grad;
    auto from = model.parameters();
    auto to = reference.parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  torch::optim::SGD sgd = Sgd(model);
  kt::DataParallelStrategy strategy(sgd, model);
  kt::TrainerOptions options;
  options.epochs = epochs;
  options.batch_size = kTrainingBatch;
  options.seed = 5;
  kt::Trainer trainer(model, strategy, options);
  int steps = 0, epochs_seen = 0;
  trainer.hooks().on_step = [&](const kt::StepReport&) { ++steps; };
  trainer.hooks().on_epoch = [&](const kt::EpochReport&) { ++epochs_seen; };
  kolo::StatusOr<kt::FitResult> fit = trainer.Fit(set, set);
  if (!fit.ok()) return Fail(fit.status());
  if (kolo::Status s = TrainReference(reference, set, epochs); !s.ok())
    return Fail(s);
  double difference = 0;
  auto trained = model.parameters();
  auto expected = reference.parameters();
  for (size_t i = 0; i < trained.size(); ++i) {
    difference = std::max(
        difference, (trained[i] - expected[i]).abs().max().item<double>());
  }
  std::printf("rank %d: max parameter difference %.3g; %d steps, %d epochs\n",
              kolo::Rank(), difference, steps, epochs_seen);
  if (kolo::Status s = kolo::Shutdown(); !s.ok()) return Fail(s);
  return difference <= 1e-5 ? 0 : 1;
}
