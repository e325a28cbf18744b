// A worker of elastic_trainer_test, started by kolorun --elastic:
//   elastic_trainer_worker EPOCHS BATCH COMMIT_EVERY
//                          [KILL_RANK KILL_STEP [PAUSE_STEP]]
// Trains testing::Mlp with an ElasticTrainer (SGD with momentum) for EPOCHS
// epochs of global batch BATCH times the first round's workers, committing
// every COMMIT_EVERY steps; rank KILL_RANK of the first round SIGKILLs
// itself before global step KILL_STEP, and after a reset every worker
// sleeps 3 s before global step PAUSE_STEP. Then trains a reference copy in one
// process, without kolo, with the whole global batch G. The elastic promise
// is the same result however many workers share a step, through resets, so
// the parameters must agree to float32 rounding. Prints its pid, a line per
// reset, and "final: max parameter difference D; global batch G; ran N
// steps; resets R; lost L"; exits 1 when D exceeds 1e-5 or training failed.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "kolo/elastic_trainer.h"
#include "torch/training/training_testing.h"

namespace {

namespace kt = kolo::torch;

constexpr uint64_t kSeed = 5;

int Fail(const kolo::Status& status) {
  std::fprintf(stderr, "elastic_trainer_worker: %s\n",
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6 && argc != 7) return 2;
  const int64_t epochs = std::atoll(argv[1]);
  kt::ElasticTrainerOptions options;
  options.epochs = epochs;
  options.batch_size = std::atoll(argv[2]);
  options.commit_every = std::atoll(argv[3]);
  options.seed = kSeed;
  const int64_t kill_rank = argc >= 6 ? std::atoll(argv[4]) : -1;
  const int64_t kill_step = argc >= 6 ? std::atoll(argv[5]) : -1;
  // After a reset, the survivors pause before this step, so that the
  // killed worker's replacement registers before their next commit.
  const int64_t pause_step = argc == 7 ? std::atoll(argv[6]) : -1;
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  torch::set_num_threads(1);
  const kolo::data::Dataset set = kolo::testing::TrainingSet();
  kolo::testing::TwinModels twins;
  torch::optim::SGD sgd = kolo::testing::TestSgd(twins.model);
  kt::ElasticTrainer trainer(twins.model, sgd, options);
  int64_t steps = 0, lost = 0;
  trainer.hooks().before_step = [&](const kt::ElasticPosition& p) {
    if (!p.first_round && p.global_step == pause_step) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    if (!p.first_round || p.global_step != kill_step ||
        kolo::Rank() != kill_rank)
      return;
    std::printf("rank %d kills itself at step %lld\n", kolo::Rank(),
                static_cast<long long>(p.global_step));
    std::fflush(stdout);
    raise(SIGKILL);
  };
  trainer.hooks().on_step = [&](const kt::StepReport&) { ++steps; };
  trainer.hooks().on_reset = [&](const kt::ElasticReset& r) {
    lost += r.lost;
    std::printf(
        "reset %d: %d workers, resumed at global step %lld (reached "
        "%lld, lost %lld)\n",
        r.resets, r.workers,
        static_cast<long long>(r.epoch * trainer.StepsPerEpoch() + r.step),
        static_cast<long long>(r.reached), static_cast<long long>(r.lost));
    std::fflush(stdout);
  };
  kolo::StatusOr<kt::ElasticFitResult> fit = trainer.Fit(set, set);
  if (!fit.ok()) return Fail(fit.status());
  if (kolo::Status s = kolo::testing::TrainReference(
          twins.reference, set, epochs, fit->global_batch, kSeed);
      !s.ok())
    return Fail(s);
  const double difference =
      kolo::testing::MaxParameterDifference(twins.model, twins.reference);
  std::printf(
      "final: max parameter difference %.3g; global batch %lld; ran %lld "
      "steps; resets %d; lost %lld\n",
      difference, static_cast<long long>(fit->global_batch),
      static_cast<long long>(steps), fit->resets, static_cast<long long>(lost));
  return difference <= 1e-5 ? 0 : 1;
}
