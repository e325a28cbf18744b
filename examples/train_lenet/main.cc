// Data-parallel training of LeNet with kolo's DistributedOptimizer, written
// as docs/data-parallel.md shows it:
//   kolorun -np 2 ./train_lenet
// Each rank trains on its own shard of a synthetic set (ten noisy class
// templates, so it can be learned in a few dozen steps), then checks what
// data parallelism promises: the loss fell, and every rank ends with the
// same parameters. Prints one line per rank; exits 1 if either fails.
#include <torch/torch.h>

#include <cstdio>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/models.h"
#include "kolo/torch.h"

namespace {

constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 32;  // per rank
constexpr int kSteps = 40;

// Batch `step` of rank `rank`: images are their class's template plus
// noise, and every (rank, step) draws its own.
std::pair<torch::Tensor, torch::Tensor> Batch(const torch::Tensor& templates,
                                              int32_t rank, int step) {
  torch::manual_seed(1000 * step + rank);
  torch::Tensor labels = torch::randint(kClasses, {kBatch}, torch::kLong);
  torch::Tensor images = templates.index_select(0, labels) +
                         0.5 * torch::randn({kBatch, 1, 28, 28});
  return {images, labels};
}

double Loss(kolo::models::Model& model, const torch::Tensor& images,
            const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  model.eval();
  const double loss =
      torch::nn::functional::cross_entropy(model.forward(images), labels)
          .item<double>();
  model.train();
  return loss;
}

int Fail(const char* what, const kolo::Status& status) {
  std::fprintf(stderr, "rank %d: %s: %s\n", kolo::Rank(), what,
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  if (kolo::Status s = kolo::Init(); !s.ok()) return Fail("init", s);
  torch::set_num_threads(1);
  const int32_t rank = kolo::Rank();

  torch::manual_seed(0);  // the same templates and held-out batch everywhere
  const torch::Tensor templates = torch::randn({kClasses, 1, 28, 28});
  const auto [held_out_images, held_out_labels] =
      Batch(templates, /*rank=*/-1, /*step=*/-1);

  torch::manual_seed(rank);  // different on purpose: the broadcast fixes it
  auto model = kolo::models::LeNet();
  torch::optim::SGD sgd(model->parameters(),
                        torch::optim::SGDOptions(0.02).momentum(0.9));
  if (kolo::Status s = kolo::torch::BroadcastParameters(*model, /*root=*/0);
      !s.ok()) {
    return Fail("broadcast", s);
  }
  kolo::torch::DistributedOptimizer optimizer(sgd, model->named_parameters());

  const double loss_before = Loss(*model, held_out_images, held_out_labels);
  for (int step = 0; step < kSteps; ++step) {
    auto [images, labels] = Batch(templates, rank, step);
    optimizer.ZeroGrad();
    torch::nn::functional::cross_entropy(model->forward(images), labels)
        .backward();
    if (kolo::Status s = optimizer.Step(); !s.ok()) return Fail("step", s);
  }
  const double loss_after = Loss(*model, held_out_images, held_out_labels);

  // Identical parameters give identical checksums: the largest and the
  // smallest over the ranks agree.
  double checksum = 0;
  for (const torch::Tensor& p : model->parameters()) {
    checksum += (p.to(torch::kDouble) *
                 (1 + torch::arange(p.numel(), torch::kDouble).view_as(p) / 7))
                    .sum()
                    .item<double>();
  }
  double largest = checksum;
  double smallest = checksum;
  if (kolo::Status s =
          kolo::Allreduce(&largest, &largest, 1, kolo::DataType::kFloat64,
                          kolo::ReduceOp::kMax);
      !s.ok()) {
    return Fail("allreduce", s);
  }
  if (kolo::Status s =
          kolo::Allreduce(&smallest, &smallest, 1, kolo::DataType::kFloat64,
                          kolo::ReduceOp::kMin);
      !s.ok()) {
    return Fail("allreduce", s);
  }
  const bool learned = loss_after < 0.5 * loss_before;
  const bool identical = largest == smallest;
  std::printf(
      "rank %d: held-out loss %.3f -> %.3f, %s; parameters %s on %d ranks\n",
      rank, loss_before, loss_after, learned ? "learned" : "did NOT learn",
      identical ? "identical" : "DIFFER", kolo::Size());
  if (kolo::Status s = kolo::Shutdown(); !s.ok()) return Fail("shutdown", s);
  return learned && identical ? 0 : 1;
}
