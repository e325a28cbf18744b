// A rank of the parameter server tests, started by kolorun --servers K.
//
//   parameter_server_worker MODE STEPS THRESHOLD STALENESS SLOW_MS KILL_MS
//
// Every rank prints the role kolorun gave it. Servers serve and print their
// statistics; workers train a float64 MLP (6 -> 40 -> 3: weights of 240 and
// 120 elements, biases of 40 and 3) for STEPS steps, worker 0 sleeping
// SLOW_MS before each step, and check by MODE:
//   sync   their parameters equal those of data parallelism over the same
//          workers and global batch (allreduce average, then SGD with
//          momentum and weight decay), computed here on the whole batch,
//          within 1e-5, and their starting parameters are worker 0's.
//   async  the loss on the one global batch they all train on halved.
//   ssp    (bounded staleness STALENESS) print the staleness they saw.
// KILL_MS > 0: the last server kills itself (SIGKILL) that many ms after it
// starts serving; workers print the error their Step() returned.
// The data of step s is a function of s alone (the global batch of 4 rows
// per worker); worker w trains on rows [4w, 4w + 4).
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/process_role.h"
#include "kolo/torch.h"
#include "kolo/torch_parameter_server.h"

namespace {

namespace kt = kolo::torch;
constexpr int64_t kRowsPerWorker = 4;

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 40));
    fc2 = register_module("fc2", torch::nn::Linear(40, 3));
    to(torch::kFloat64);
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// Rows [first, first + count) of the global batch of `step`.
std::pair<torch::Tensor, torch::Tensor> Rows(int64_t step, int64_t first,
                                             int64_t count, int64_t global) {
  auto row = torch::arange(first, first + count, torch::kFloat64)
                 .add(static_cast<double>(step * global))
                 .unsqueeze(1);
  auto x = torch::sin(0.37 * row * torch::arange(1, 7, torch::kFloat64));
  auto y = torch::cos(0.21 * row * torch::arange(1, 4, torch::kFloat64));
  return {x, y};
}

double MaxDifference(Net& a, Net& b) {
  double most = 0;
  auto pa = a.parameters();
  auto pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    most = std::max(most, (pa[i] - pb[i]).abs().max().item<double>());
  }
  return most;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(), what.c_str());
  std::fflush(stderr);
  return 1;
}

int Run(int argc, char** argv) {
  if (argc != 7) {
    return Fail(
        "usage: parameter_server_worker MODE STEPS THRESHOLD STALENESS "
        "SLOW_MS KILL_MS");
  }
  const std::string mode_text = argv[1];
  const int steps = std::stoi(argv[2]);
  const int64_t threshold = std::stoll(argv[3]);
  const int staleness = std::stoi(argv[4]);
  const int slow_ms = std::stoi(argv[5]);
  const int kill_ms = std::stoi(argv[6]);
  if (kolo::Status s = kolo::Init(); !s.ok()) return Fail(s.ToString());
  const int rank = kolo::Rank();
  kolo::StatusOr<kolo::RoleInfo> role = kolo::Role();
  if (!role.ok()) return Fail(role.status().ToString());
  std::printf("rank %d: role %s of %d servers\n", rank,
              role->role == kolo::ProcessRole::kServer ? "server" : "worker",
              role->server_count);

  // Every rank starts from different values; worker 0's must win.
  torch::manual_seed(1 + rank);
  Net net;
  kt::ParameterServerOptions options;
  kolo::StatusOr<kt::ParameterServerMode> mode =
      kt::ParseParameterServerMode(mode_text);
  if (!mode.ok()) return Fail(mode.status().ToString());
  options.mode = *mode;
  options.staleness = staleness;
  options.shard_threshold_elements = threshold;
  options.optimizer.lr = 0.1;
  if (options.mode == kt::ParameterServerMode::kSynchronous) {
    options.optimizer.momentum = 0.9;
    options.optimizer.weight_decay = 1e-3;
  }
  auto ps = kt::ParameterServer::Create(net.named_parameters(), options);
  if (!ps.ok()) return Fail(ps.status().ToString());
  kt::ParameterServer& server = **ps;

  if (server.IsServer()) {
    const bool dies =
        kill_ms > 0 &&
        server.role_index() == static_cast<int>(server.servers().size()) - 1;
    if (dies) {
      std::thread([kill_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(kill_ms));
        raise(SIGKILL);
      }).detach();
    }
    kolo::Status served = server.Serve();
    if (!served.ok()) return Fail(served.ToString());
    kt::ParameterServerStatistics stats = server.statistics();
    std::printf("server rank %d: steps %lld max staleness %lld held %lld\n",
                rank, static_cast<long long>(stats.steps),
                static_cast<long long>(stats.max_staleness),
                static_cast<long long>(stats.held_pulls));
    std::fflush(stdout);
    kolo::Status down = kolo::Shutdown();
    return down.ok() ? 0 : Fail(down.ToString());
  }

  const int worker = server.role_index();
  const int64_t workers = static_cast<int64_t>(server.workers().size());
  const int64_t global = kRowsPerWorker * workers;
  // The reference: data parallelism, whose allreduce average of the
  // workers' mean-loss gradients is the gradient of the whole batch's mean
  // loss (equal rows per worker).
  torch::manual_seed(1);
  Net reference;
  if (double d = MaxDifference(net, reference); d != 0) {
    return Fail("starting parameters differ from worker 0's by " +
                std::to_string(d));
  }
  torch::optim::SGD sgd(reference.parameters(),
                        torch::optim::SGDOptions(0.1)
                            .momentum(options.optimizer.momentum)
                            .weight_decay(options.optimizer.weight_decay));
  // Asynchronous training fits one fixed global batch, so the loss on it
  // must fall however the updates interleave; the other modes see a new
  // batch each step.
  const bool fixed_data =
      options.mode == kt::ParameterServerMode::kAsynchronous;
  auto eval = Rows(fixed_data ? 0 : 1000, 0, global, global);
  const double first_loss =
      torch::mse_loss(net.forward(eval.first), eval.second).item<double>();

  for (int step = 0; step < steps; ++step) {
    if (worker == 0 && slow_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    }
    server.ZeroGrad();
    auto [x, y] = Rows(fixed_data ? 0 : step, worker * kRowsPerWorker,
                       kRowsPerWorker, global);
    torch::mse_loss(net.forward(x), y).backward();
    kolo::Status stepped = server.Step();
    if (!stepped.ok())
      return Fail("step " + std::to_string(step) + ": " + stepped.ToString());
    if (options.mode == kt::ParameterServerMode::kSynchronous) {
      sgd.zero_grad();
      auto [gx, gy] = Rows(step, 0, global, global);
      torch::mse_loss(reference.forward(gx), gy).backward();
      sgd.step();
    }
  }
  kolo::Status finished = server.Finish();
  if (!finished.ok()) return Fail(finished.ToString());
  const double last_loss =
      torch::mse_loss(net.forward(eval.first), eval.second).item<double>();
  kt::ParameterServerStatistics stats = server.statistics();
  std::printf("rank %d: loss %.6f -> %.6f, max staleness %lld\n", rank,
              first_loss, last_loss,
              static_cast<long long>(stats.max_staleness));
  if (options.mode == kt::ParameterServerMode::kSynchronous) {
    const double d = MaxDifference(net, reference);
    std::printf("rank %d: max parameter difference %.3g\n", rank, d);
    if (!(d < 1e-5)) return Fail("parameters differ from data parallelism");
  }
  if (options.mode == kt::ParameterServerMode::kAsynchronous &&
      !(last_loss < 0.5 * first_loss)) {
    return Fail("asynchronous training did not halve the loss");
  }
  std::fflush(stdout);
  kolo::Status down = kolo::Shutdown();
  return down.ok() ? 0 : Fail(down.ToString());
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
