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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int64_t epochs = std::atoll(argv[1]);
  if (kolo::Status s = kolo::Init(); !s.ok()) return Fail(s);
  torch::set_num_threads(1);
  const kolo::data::Dataset set = kolo::testing::TrainingSet();
  kolo::testing::TwinModels twins;
  torch::optim::SGD sgd = kolo::testing::TestSgd(twins.model);
  kt::DataParallelStrategy strategy(sgd, twins.model);
  kt::TrainerOptions options;
  options.epochs = epochs;
  options.batch_size = kTrainingBatch;
  options.seed = 5;
  kt::Trainer trainer(twins.model, strategy, options);
  int steps = 0, epochs_seen = 0;
  trainer.hooks().on_step = [&](const kt::StepReport&) { ++steps; };
  trainer.hooks().on_epoch = [&](const kt::EpochReport&) { ++epochs_seen; };
  kolo::StatusOr<kt::FitResult> fit = trainer.Fit(set, set);
  if (!fit.ok()) return Fail(fit.status());
  if (kolo::Status s = kolo::testing::TrainReference(
          twins.reference, set, epochs, kTrainingBatch * kolo::Size(),
          options.seed);
      !s.ok())
    return Fail(s);
  const double difference =
      kolo::testing::MaxParameterDifference(twins.model, twins.reference);
  std::printf("rank %d: max parameter difference %.3g; %d steps, %d epochs\n",
              kolo::Rank(), difference, steps, epochs_seen);
  if (kolo::Status s = kolo::Shutdown(); !s.ok()) return Fail(s);
  return difference <= 1e-5 ? 0 : 1;
}
