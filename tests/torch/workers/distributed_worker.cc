// A rank of the kolo_torch multi-process tests, started by kolorun.
//   equivalence OPT COMPRESSION PASSES STEPS
//       N ranks with per-rank batch b train a small MLP with
//       DistributedOptimizer; every rank also trains a reference copy on the
//       whole batch N*b in one process; prints the largest parameter
//       difference and exits 1 when it exceeds the tolerance.
//   tensors    every tensor collective, dtypes and shapes, closed form
//   overlap    gradients are enqueued while backward still runs
//   unused     ranks use different branches; Step() must not hang
//   predivide F
//       gradients of 40000 + 32*rank, averaged as float16 on the wire with
//       gradient_predivide_factor F: the sum of two such gradients
//       overflows float16 (max 65504) unless F divides them first; prints
//       the averaged gradient and exits 1 when it is not finite and right
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kolo/torch.h"

namespace {

namespace kt = kolo::torch;
constexpr int64_t kPerRankBatch = 8;

int Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(), what.c_str());
  return 1;
}

struct Mlp : torch::nn::Module {
  Mlp() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const std::string& kind,
                                                       Mlp& model) {
  if (kind == "adam") {
    return std::make_unique<torch::optim::Adam>(
        model.parameters(), torch::optim::AdamOptions(0.01));
  }
  return std::make_unique<torch::optim::SGD>(
      model.parameters(),
      torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
}

int Equivalence(const std::string& opt, const std::string& compression,
                int passes, int steps) {
  const int32_t rank = kolo::Rank();
  const int32_t size = kolo::Size();
  torch::manual_seed(7 + rank);  // different on purpose: the broadcast fixes it
  Mlp model;
  if (auto s = kt::BroadcastParameters(model, 0); !s.ok())
    return Fail(s.ToString());
  Mlp reference;
  {
    torch::NoGradGuard no_grad;
    auto from = model.parameters();
    auto to = reference.parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  auto inner = MakeOptimizer(opt, model);
  auto reference_optimizer = MakeOptimizer(opt, reference);
  kt::DistributedOptimizerOptions options;
  options.backward_passes_per_step = passes;
  if (compression == "fp16") options.compression = kt::Compression::kFloat16;
  if (compression == "bf16") options.compression = kt::Compression::kBFloat16;
  kt::DistributedOptimizer optimizer(*inner, model.named_parameters(), options);

  for (int step = 0; step < steps; ++step) {
    // The same global batch on every rank, from a per-step seed.
    torch::manual_seed(1000 + step);
    torch::Tensor x = torch::randn({size * kPerRankBatch, 6});
    torch::Tensor y = torch::randn({size * kPerRankBatch, 3});
    optimizer.ZeroGrad();
    torch::Tensor mine_x = x.narrow(0, rank * kPerRankBatch, kPerRankBatch);
    torch::Tensor mine_y = y.narrow(0, rank * kPerRankBatch, kPerRankBatch);
    const int64_t micro = kPerRankBatch / passes;
    for (int pass = 0; pass < passes; ++pass) {
      torch::mse_loss(model.forward(mine_x.narrow(0, pass * micro, micro)),
                      mine_y.narrow(0, pass * micro, micro))
          .backward();
      if (auto s = optimizer.Step(); !s.ok()) return Fail(s.ToString());
    }
    reference_optimizer->zero_grad();
    torch::mse_loss(reference.forward(x), y).backward();
    reference_optimizer->step();
  }
  double worst = 0;
  auto got = model.parameters();
  auto want = reference.parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, (got[i] - want[i]).abs().max().item<double>());
  }
  const double tolerance = compression == "none" ? 1e-5 : 2e-2;
  std::printf("rank %d: max parameter difference %.3g (tolerance %.0e)\n", rank,
              worst, tolerance);
  return worst <= tolerance ? 0 : 1;
}

int Tensors() {
  const int32_t rank = kolo::Rank();
  const int32_t size = kolo::Size();
  for (auto dtype :
       {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
        torch::kInt8, torch::kUInt8, torch::kInt32, torch::kInt64}) {
    const std::string type = c10::toString(dtype);
    // Non-contiguous input: a transposed view.
    torch::Tensor base =
        torch::arange(12, torch::kInt64).reshape({3, 4}).to(dtype);
    torch::Tensor input = (base + rank).t();  // 4x3, not contiguous
    auto sum = kt::Allreduce(input, "sum." + type, kolo::ReduceOp::kSum);
    if (!sum.ok()) return Fail(sum.status().ToString());
    torch::Tensor want =
        (base.t().to(torch::kInt64) * size + size * (size - 1) / 2);
    if (!torch::equal(sum->to(torch::kInt64), want) ||
        sum->sizes() != input.sizes()) {
      return Fail("allreduce " + type);
    }
    // Allgather: rank r contributes r + 1 rows of 2.
    torch::Tensor rows =
        torch::full({rank + 1, 2}, rank, torch::kInt64).to(dtype);
    auto gathered = kt::Allgather(rows, "gather." + type);
    if (!gathered.ok()) return Fail(gathered.status().ToString());
    if (gathered->size(0) != size * (size + 1) / 2 || gathered->size(1) != 2) {
      return Fail("allgather shape " + type);
    }
    auto broadcast =
        kt::Broadcast(torch::full({5}, rank + 3, torch::kInt64).to(dtype),
                      "bcast." + type, size - 1);
    if (!broadcast.ok() ||
        broadcast->to(torch::kInt64)[4].item<int64_t>() != size + 2) {
      return Fail("broadcast " + type);
    }
    // Alltoall: row j goes to rank j and carries the sender's rank.
    torch::Tensor send = torch::full({size, 3}, rank, torch::kInt64).to(dtype);
    auto exchanged = kt::Alltoall(send, "alltoall." + type);
    if (!exchanged.ok()) return Fail(exchanged.status().ToString());
    if (!torch::equal(exchanged->to(torch::kInt64).select(1, 0),
                      torch::arange(size, torch::kInt64))) {
      return Fail("alltoall " + type);
    }
    auto scattered = kt::Reducescatter(torch::ones({2 * size, 3}, dtype),
                                       "rs." + type, kolo::ReduceOp::kSum);
    if (!scattered.ok() || scattered->size(0) != 2 ||
        scattered->to(torch::kInt64).min().item<int64_t>() != size) {
      return Fail("reducescatter " + type);
    }
  }
  auto metric = kt::AverageMetric(rank, "metric");
  if (!metric.ok() || *metric != (size - 1) / 2.0)
    return Fail("average metric");
  std::printf("rank %d: tensor collectives correct\n", rank);
  return 0;
}

int Overlap() {
  torch::manual_seed(1);
  torch::nn::Sequential model;
  for (int i = 0; i < 24; ++i) {
    model->push_back(torch::nn::Linear(384, 384));
    model->push_back(torch::nn::Tanh());
  }
  if (auto s = kt::BroadcastParameters(*model, 0); !s.ok())
    return Fail(s.ToString());
  torch::optim::SGD sgd(model->parameters(), 0.01);
  kt::DistributedOptimizer optimizer(sgd, model->named_parameters());
  torch::Tensor x = torch::randn({256, 384});
  int64_t completed_during_backward = 0;
  for (int step = 0; step < 3; ++step) {
    optimizer.ZeroGrad();
    torch::Tensor loss = model->forward(x).pow(2).mean();
    const kolo::RuntimeStats before = kolo::GetRuntimeStats();
    const auto start = std::chrono::steady_clock::now();
    loss.backward();
    const auto end = std::chrono::steady_clock::now();
    const kolo::RuntimeStats during = kolo::GetRuntimeStats();
    const auto [first, last] = optimizer.last_enqueue_window();
    const double backward_ms =
        std::chrono::duration<double, std::milli>(end - start).count();
    const double first_ms =
        std::chrono::duration<double, std::milli>(first - start).count();
    std::printf(
        "rank %d step %d: backward %.1f ms, first gradient enqueued at %.1f "
        "ms, "
        "%lld operations completed during backward\n",
        kolo::Rank(), step, backward_ms, first_ms,
        static_cast<long long>(during.operations - before.operations));
    if (!(first > start && first < end && last <= end))
      return Fail("enqueues outside backward");
    if (first_ms > backward_ms / 2)
      return Fail("first gradient enqueued late in backward");
    completed_during_backward += during.operations - before.operations;
    if (auto s = optimizer.Step(); !s.ok()) return Fail(s.ToString());
  }
  // Over the steps, not in each: an allreduce needs the other rank's
  // gradient too, and on a loaded machine one rank's backward can end
  // before the other's first gradient is ready (seen under CI's load with
  // LibTorch 2.11, whose backward is faster).
  if (completed_during_backward == 0)
    return Fail("no allreduce finished during any backward");
  return 0;
}

int Unused() {
  torch::manual_seed(3);
  torch::nn::Linear a(4, 4), b(4, 4);
  torch::nn::Sequential holder;
  holder->push_back("a", a);
  holder->push_back("b", b);
  if (auto s = kt::BroadcastParameters(*holder, 0); !s.ok())
    return Fail(s.ToString());
  torch::Tensor before_a = a->weight.detach().clone();
  torch::optim::SGD sgd(holder->parameters(), 1.0);
  kt::DistributedOptimizer optimizer(sgd, holder->named_parameters());
  optimizer.ZeroGrad();
  torch::Tensor x = torch::ones({2, 4});
  // Rank 0 uses only branch a, the others only branch b.
  torch::Tensor out = kolo::Rank() == 0 ? a(x) : b(x);
  out.sum().backward();
  if (auto s = optimizer.Step(); !s.ok()) return Fail(s.ToString());
  // a's gradient is rank 0's divided by the number of ranks.
  torch::Tensor moved = (before_a - a->weight.detach());
  const double want = 2.0 / kolo::Size();  // d(sum)/dW = batch 2 of ones
  if (std::abs(moved.mean().item<double>() - want) > 1e-6)
    return Fail("unused branch average");
  std::printf("rank %d: unused branches reduced as zeros\n", kolo::Rank());
  return 0;
}

int Predivide(double factor) {
  const int32_t rank = kolo::Rank();
  const int32_t size = kolo::Size();
  struct Weights : torch::nn::Module {
    Weights() { w = register_parameter("w", torch::zeros({8})); }
    torch::Tensor w;
  } model;
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(1.0));
  kt::DistributedOptimizerOptions options;
  options.compression = kt::Compression::kFloat16;
  options.gradient_predivide_factor = factor;
  kt::DistributedOptimizer optimizer(sgd, model.named_parameters(), options);
  optimizer.ZeroGrad();
  const double gradient = 40000.0 + 32.0 * rank;  // exact in float16
  (model.w * gradient).sum().backward();
  if (auto s = optimizer.Step(); !s.ok()) return Fail(s.ToString());
  // lr 1 from 0: the parameter is minus the averaged gradient.
  const double averaged = -model.w[3].item<double>();
  const double expected = 40000.0 + 16.0 * (size - 1);
  std::printf("rank %d: predivide %g: averaged gradient %g (expected %g)\n",
              rank, factor, averaged, expected);
  // float16 spacing is 32 between 32768 and 65536: two roundings at most.
  return std::isfinite(averaged) && std::abs(averaged - expected) <= 64 ? 0 : 1;
}

// BroadcastOptimizerState: the ranks' optimizer states differ (rank 0
// took three steps, rank 1 one, the others none, so they have no state at
// all); after broadcasting rank 0's parameters and state, one identical
// step must give identical parameters everywhere, which it does only if
// every tensor of the state and Adam's step count arrived.
int OptimizerState(const std::string& kind) {
  const int32_t rank = kolo::Rank();
  torch::manual_seed(11);
  Mlp model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (kind == "adam") {
    optimizer = std::make_unique<torch::optim::Adam>(
        model.parameters(), torch::optim::AdamOptions(0.01));
  } else if (kind == "adamw") {
    optimizer = std::make_unique<torch::optim::AdamW>(
        model.parameters(), torch::optim::AdamWOptions(0.01).amsgrad(true));
  } else {
    optimizer = std::make_unique<torch::optim::SGD>(
        model.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  auto local_step = [&](uint64_t seed) {
    torch::manual_seed(seed);
    optimizer->zero_grad();
    model.forward(torch::randn({4, 6})).pow(2).mean().backward();
    optimizer->step();
  };
  const int local_steps = rank == 0 ? 3 : rank % 2;
  for (int i = 0; i < local_steps; ++i) local_step(100 * rank + i);
  if (auto s = kt::BroadcastParameters(model, 0); !s.ok())
    return Fail(s.ToString());
  if (auto s = kt::BroadcastOptimizerState(*optimizer, 0); !s.ok())
    return Fail(s.ToString());
  local_step(999);
  double checksum = 0;
  for (const torch::Tensor& p : model.parameters()) {
    checksum += (p.flatten().to(torch::kFloat64) *
                 torch::arange(1, p.numel() + 1, torch::kFloat64))
                    .sum()
                    .item<double>();
  }
  const torch::Tensor mine = torch::full({1}, checksum, torch::kFloat64);
  auto highest = kt::Allreduce(mine, "state.max", kolo::ReduceOp::kMax);
  auto lowest = kt::Allreduce(mine, "state.min", kolo::ReduceOp::kMin);
  if (!highest.ok() || !lowest.ok()) return Fail("checksum allreduce failed");
  const bool equal = highest->item<double>() == lowest->item<double>();
  std::printf("rank %d: %s state: parameters after a step %s\n", rank,
              kind.c_str(), equal ? "equal on all ranks" : "differ");
  return equal ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (auto s = kolo::Init(); !s.ok()) return Fail(s.ToString());
  torch::set_num_threads(1);
  const std::string scenario = argv[1];
  int code = 2;
  if (scenario == "equivalence" && argc == 6) {
    code =
        Equivalence(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]));
  } else if (scenario == "tensors") {
    code = Tensors();
  } else if (scenario == "overlap") {
    code = Overlap();
  } else if (scenario == "unused") {
    code = Unused();
  } else if (scenario == "optimizer-state" && argc == 3) {
    code = OptimizerState(argv[2]);
  } else if (scenario == "predivide" && argc == 3) {
    code = Predivide(std::atof(argv[2]));
  }
  if (code == 0) {
    if (auto s = kolo::Shutdown(); !s.ok()) return Fail(s.ToString());
  }
  return code;
}
