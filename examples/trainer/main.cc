// kolo-train's loop in a LibTorch program: kolo::torch::Trainer trains LeNet
// data-parallel on a synthetic set (noisy class templates), then each rank
// prints the accuracy every rank agrees on.   kolorun -np 2 ./train_with_trainer
#include <torch/torch.h>

#include <cstdio>

#include "kolo/kolo.h"
#include "kolo/models.h"
#include "kolo/trainer.h"

// `rows` images of ten 28x28 class templates plus noise.
kolo::data::Dataset Synthetic(int64_t rows, uint64_t seed) {
  torch::manual_seed(0);  // the same templates for both sets
  const torch::Tensor templates = torch::randn({10, 1, 28, 28});
  torch::manual_seed(seed);
  kolo::data::Dataset set;
  set.labels = torch::randint(10, {rows}, torch::kLong);
  set.images = templates.index_select(0, set.labels) +
               0.5 * torch::randn({rows, 1, 28, 28});
  set.num_classes = 10;
  return set;
}

int main() {
  if (!kolo::Init().ok()) return 1;
  torch::set_num_threads(1);
  const kolo::data::Dataset train = Synthetic(1024, 1),
                            test = Synthetic(256, 2);
  auto model = kolo::models::LeNet();
  torch::optim::SGD sgd(model->parameters(),
                        torch::optim::SGDOptions(0.02).momentum(0.9));
  kolo::torch::DataParallelStrategy strategy(sgd, *model);
  kolo::torch::TrainerOptions options;
  options.epochs = 2;
  options.batch_size = 32;  // per rank
  kolo::torch::Trainer trainer(*model, strategy, options);
  trainer.hooks().on_epoch = [](const kolo::torch::EpochReport& e) {
    if (kolo::Rank() == 0)
      std::printf("epoch %lld: loss %.3f, accuracy %.3f\n",
                  static_cast<long long>(e.epoch), e.train_loss,
                  e.eval.accuracy());
  };
  kolo::StatusOr<kolo::torch::FitResult> fit = trainer.Fit(train, test);
  if (!fit.ok()) {
    std::fprintf(stderr, "%s\n", fit.status().ToString().c_str());
    return 1;
  }
  const bool learned = fit->eval.accuracy() > 0.9;
  std::printf("rank %d: accuracy %.3f, %s; parameters identical on %d ranks\n",
              kolo::Rank(), fit->eval.accuracy(),
              learned ? "learned" : "did NOT learn", kolo::Size());
  return kolo::Shutdown().ok() && learned ? 0 : 1;
}
