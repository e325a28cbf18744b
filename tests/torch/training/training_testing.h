// What the Trainer's tests train: a small MLP classifier on a synthetic set
// whose size divides by 1, 2 and 3 ranks times the per-rank batch, so that
// no rank's shard is padded and every global batch is whole; and the one
// process, without kolo, that the distributed runs must match.
#ifndef KOLO_TESTS_TORCH_TRAINING_TRAINING_TESTING_H_
#define KOLO_TESTS_TORCH_TRAINING_TRAINING_TESTING_H_

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kolo/data.h"
#include "kolo/models.h"
#include "kolo/status.h"

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

// Makes `to`'s parameters `from`'s.
inline void CopyParameters(Mlp& from, Mlp& to) {
  ::torch::NoGradGuard no_grad;
  auto source = from.parameters();
  auto target = to.parameters();
  for (size_t i = 0; i < source.size(); ++i) target[i].copy_(source[i]);
}

// The model a test trains distributed and the copy it trains alone, equal
// at the start (an Mlp drawn from seed 7).
struct TwinModels {
  TwinModels() {
    ::torch::manual_seed(7);
    Mlp start;
    CopyParameters(start, model);
    CopyParameters(start, reference);
  }
  Mlp model;
  Mlp reference;
};

// SGD with momentum: the optimizer both sides of an equivalence train with.
inline ::torch::optim::SGD TestSgd(Mlp& model) {
  return ::torch::optim::SGD(model.parameters(),
                             ::torch::optim::SGDOptions(0.1).momentum(0.9));
}

// Trains `model` in this process, without kolo: `epochs` epochs of `set`
// in the order a one-rank DistributedSampler with `seed` visits, in batches
// of `batch` (the mean loss of each).
inline Status TrainReference(Mlp& model, const data::Dataset& set,
                             int64_t epochs, int64_t batch, uint64_t seed) {
  ::torch::optim::SGD sgd = TestSgd(model);
  data::DistributedSampler::Options options;
  options.seed = seed;
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        data::DistributedSampler::Create(set.size(), options));
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> rows = sampler.Indices(epoch);
    for (size_t start = 0; start < rows.size();
         start += static_cast<size_t>(batch)) {
      const size_t end =
          std::min(rows.size(), start + static_cast<size_t>(batch));
      ::torch::Tensor index = ::torch::tensor(
          std::vector<int64_t>(rows.begin() + start, rows.begin() + end));
      sgd.zero_grad();
      ::torch::nn::functional::cross_entropy(
          model.forward(set.images.index_select(0, index)),
          set.labels.index_select(0, index))
          .backward();
      sgd.step();
    }
  }
  return Status::Ok();
}

// The largest difference between two models' parameters.
inline double MaxParameterDifference(Mlp& a, Mlp& b) {
  double difference = 0;
  auto from = a.parameters();
  auto to = b.parameters();
  for (size_t i = 0; i < from.size(); ++i) {
    difference =
        std::max(difference, (from[i] - to[i]).abs().max().item<double>());
  }
  return difference;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TORCH_TRAINING_TRAINING_TESTING_H_
