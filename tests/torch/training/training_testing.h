// What the Trainer's tests train: a small MLP classifier on a synthetic set
// whose size divides by 1, 2 and 3 ranks times the per-rank batch, so that
// no rank's shard is padded and every global batch is whole.
#ifndef KOLO_TESTS_TORCH_TRAINING_TRAINING_TESTING_H_
#define KOLO_TESTS_TORCH_TRAINING_TRAINING_TESTING_H_

#include <torch/torch.h>

#include "kolo/data.h"
#include "kolo/models.h"

namespace kolo::testing {

constexpr int64_t kTrainingRows = 96;
constexpr int64_t kTrainingBatch = 8;  // per rank

class Mlp : public models::Model {
 public:
  Mlp() : models::Model("Mlp") {
    fc1_ = register_module("fc1", ::torch::nn::Linear(6, 16));
    fc2_ = register_module("fc2", ::torch::nn::Linear(16, 3));
  }
  ::torch::Tensor forward(::torch::Tensor x) override {
    return fc2_(::torch::tanh(fc1_(x.flatten(1))));
  }

 private:
  ::torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

// The same rows on every rank: images 1x2x3, three classes.
inline data::Dataset TrainingSet(int64_t rows = kTrainingRows) {
  ::torch::manual_seed(11);
  data::Dataset set;
  set.images = ::torch::randn({rows, 1, 2, 3});
  set.labels = ::torch::randint(3, {rows}, ::torch::kLong);
  set.num_classes = 3;
  return set;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TORCH_TRAINING_TRAINING_TESTING_H_
