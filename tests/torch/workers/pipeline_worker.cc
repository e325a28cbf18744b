// A rank of the pipeline tests, started by kolorun. Runs every case its
// world allows in one launch:
//   world 2: 2 stages, GPipe and 1F1B, 1..4 micro-batches, one case
//            balanced by time;
//   world 4: 4 stages, GPipe and 1F1B, 1..8 micro-batches; and 2 stages x
//            2 replicas.
// For each case every rank builds the same float64 MLP twice from one seed:
// one copy is cut into the pipeline, the other (the reference) runs whole,
// on the whole global batch. After one TrainStep the loss and every
// gradient of the rank's stage must equal the reference's, the peak of
// micro-batches held must be m (GPipe) or min(stages - s, m) (1F1B), and
// after three SGD steps the stage's parameters must equal the reference's;
// Forward must give the reference's output on the last stage.
// Prints "rank R: case ... ok" per case and "rank R: N pipeline cases
// passed"; exits 1 at the first difference, naming the case and tensor.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/torch_pipeline.h"

namespace {

namespace kt = kolo::torch;
constexpr int64_t kReplicaBatch = 9;  // rows per replica: uneven micro-batches
constexpr double kTolerance = 1e-5;
constexpr int kSteps = 3;

torch::nn::Sequential MakeModel() {
  torch::manual_seed(42);
  torch::nn::Sequential model(torch::nn::Linear(5, 12), torch::nn::Tanh(),
                              torch::nn::Linear(12, 12), torch::nn::Tanh(),
                              torch::nn::Linear(12, 8), torch::nn::Tanh(),
                              torch::nn::Linear(8, 3));
  model->to(torch::kFloat64);
  return model;
}

// The global batch of step `step`: rows of every replica, end to end.
torch::Tensor Inputs(int64_t rows, int step) {
  return torch::sin(torch::arange(rows * 5, torch::kFloat64) * 0.37 + step)
      .reshape({rows, 5});
}
torch::Tensor Targets(int64_t rows, int step) {
  return torch::cos(torch::arange(rows * 3, torch::kFloat64) * 0.21 - step)
      .reshape({rows, 3});
}

torch::Tensor Mse(const torch::Tensor& out, const torch::Tensor& target) {
  return torch::mse_loss(out, target);
}

double MaxDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

struct Case {
  int32_t stages;
  int32_t micro_batches;
  kt::PipelineSchedule schedule;
  kt::PipelineOptions::Balance balance =
      kt::PipelineOptions::Balance::kParameters;
};

// Returns an empty string when the case passes, else what differed.
std::string Run(const Case& c) {
  const int32_t rank = kolo::Rank();
  kt::PipelineOptions options;
  options.stages = c.stages;
  options.micro_batches = c.micro_batches;
  options.schedule = c.schedule;
  options.balance = c.balance;
  torch::nn::Sequential model = MakeModel();
  torch::nn::Sequential reference = MakeModel();
  const int64_t replicas = kolo::Size() / c.stages;
  const int64_t global_rows = kReplicaBatch * replicas;
  auto created = kt::Pipeline::Create(model, options, Inputs(kReplicaBatch, 0));
  if (!created.ok()) return created.status().ToString();
  kt::Pipeline& pipeline = **created;
  const int64_t first_row = pipeline.replica() * kReplicaBatch;

  torch::optim::SGD sgd(pipeline.parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::SGD reference_sgd(reference->parameters(),
                                  torch::optim::SGDOptions(0.1));
  auto reference_parameters = reference->named_parameters();
  for (int step = 0; step < kSteps; ++step) {
    const torch::Tensor x = Inputs(global_rows, step);
    const torch::Tensor y = Targets(global_rows, step);
    sgd.zero_grad();
    reference_sgd.zero_grad();
    // Each stage gets only what it reads.
    torch::Tensor my_x = pipeline.is_first_stage()
                             ? x.narrow(0, first_row, kReplicaBatch)
                             : torch::Tensor();
    torch::Tensor my_y = pipeline.is_last_stage()
                             ? y.narrow(0, first_row, kReplicaBatch)
                             : torch::Tensor();
    kolo::StatusOr<double> loss = pipeline.TrainStep(my_x, my_y, Mse);
    if (!loss.ok()) return loss.status().ToString();
    torch::Tensor expected = Mse(reference->forward(x), y);
    expected.backward();
    const std::string at = "step " + std::to_string(step) + ": ";
    if (std::abs(*loss - expected.item<double>()) > kTolerance) {
      return at + "loss " + std::to_string(*loss) +
             " != " + std::to_string(expected.item<double>());
    }
    for (const auto& item : pipeline.named_parameters()) {
      const torch::Tensor& ref = reference_parameters[item.key()];
      double d = MaxDiff(item.value().grad(), ref.grad());
      if (!(d <= kTolerance)) {
        return at + "gradient of " + item.key() + " differs by " +
               std::to_string(d);
      }
    }
    const int32_t s = pipeline.stage();
    const int32_t expected_peak = c.schedule == kt::PipelineSchedule::kGPipe
                                      ? c.micro_batches
                                      : std::min(c.stages - s, c.micro_batches);
    if (pipeline.statistics().peak_activations != expected_peak) {
      return at + "held " +
             std::to_string(pipeline.statistics().peak_activations) +
             " micro-batches at once, expected " +
             std::to_string(expected_peak);
    }
    sgd.step();
    reference_sgd.step();
  }
  for (const auto& item : pipeline.named_parameters()) {
    double d = MaxDiff(item.value(), reference_parameters[item.key()]);
    if (!(d <= kTolerance)) {
      return "after " + std::to_string(kSteps) + " steps parameter " +
             item.key() + " differs by " + std::to_string(d);
    }
  }
  const torch::Tensor x = Inputs(global_rows, kSteps);
  auto out = pipeline.Forward(x.narrow(0, first_row, kReplicaBatch));
  if (!out.ok()) return out.status().ToString();
  if (pipeline.is_last_stage()) {
    torch::NoGradGuard no_grad;
    double d = MaxDiff(
        *out, reference->forward(x).narrow(0, first_row, kReplicaBatch));
    if (!(d <= kTolerance)) return "Forward differs by " + std::to_string(d);
  }
  const kt::PipelineStatistics& st = pipeline.statistics();
  std::printf(
      "rank %d: case stages %d micro-batches %d %s layers [%lld, %lld) "
      "peak %d busy %.4fs idle %.4fs ok\n",
      rank, c.stages, c.micro_batches, kt::PipelineScheduleName(c.schedule),
      static_cast<long long>(pipeline.layers().first),
      static_cast<long long>(pipeline.layers().second), st.peak_activations,
      st.total_busy_seconds, st.total_idle_seconds);
  return "";
}

}  // namespace

int main() {
  if (kolo::Status s = kolo::Init(); !s.ok()) {
    std::fprintf(stderr, "init: %s\n", s.ToString().c_str());
    return 1;
  }
  const int32_t size = kolo::Size();
  std::vector<Case> cases;
  const std::vector<int32_t> counts = size == 2
                                          ? std::vector<int32_t>{1, 2, 3, 4}
                                          : std::vector<int32_t>{1, 2, 3, 5, 8};
  for (auto schedule :
       {kt::PipelineSchedule::kGPipe, kt::PipelineSchedule::kOneFOneB}) {
    for (int32_t m : counts) cases.push_back({size, m, schedule});
  }
  for (auto schedule :
       {kt::PipelineSchedule::kGPipe, kt::PipelineSchedule::kOneFOneB}) {
    if (size == 4) {
      for (int32_t m : {1, 3}) cases.push_back({2, m, schedule});
    }
  }
  if (size == 2) {
    cases.push_back({2, 2, kt::PipelineSchedule::kOneFOneB,
                     kt::PipelineOptions::Balance::kTime});
  }
  int passed = 0;
  for (const Case& c : cases) {
    std::string error = Run(c);
    if (!error.empty()) {
      std::fprintf(stderr, "rank %d: case stages %d micro-batches %d %s: %s\n",
                   kolo::Rank(), c.stages, c.micro_batches,
                   kt::PipelineScheduleName(c.schedule), error.c_str());
      std::fflush(stderr);
      return 1;
    }
    ++passed;
  }
  std::printf("rank %d: %d pipeline cases passed\n", kolo::Rank(), passed);
  std::fflush(stdout);
  // The last stage's Forward returns before its predecessors' sends have
  // heard back; no rank leaves before all have.
  if (kolo::Status s = kolo::Barrier(); !s.ok()) {
    std::fprintf(stderr, "barrier: %s\n", s.ToString().c_str());
    return 1;
  }
  return kolo::Shutdown().ok() ? 0 : 1;
}
