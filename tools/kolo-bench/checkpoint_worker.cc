// kolo-bench-checkpoint-worker: kolo's side of `kolo-bench checkpoint`, one
// rank of one timed ZeroOptimizer::Save or Load (kolo/torch_zero.h), run
// under kolorun:
//
//   kolorun -np 2 kolo-bench-checkpoint-worker --mode save --model resnet18
//       --dir D --json save.json
//   kolorun -np 4 kolo-bench-checkpoint-worker --mode load --model resnet18
//       --dir D --json load.json
//
// save: every rank builds the model from --seed, wraps Adam in a
// ZeroOptimizer (--zero-stage, 2 by default: optimizer state and gradients
// sharded), takes one step on a synthetic batch of --batch-size images (so
// the optimizer holds its moments), and times Save(D). load: every rank
// builds the model from another seed (so that only a working load gives it
// the saved weights) and times Load(D), which reshards a checkpoint written
// at any number of ranks. The ranks meet at a barrier before and after the
// operation; the seconds between are its time.
//
// kolo-bench reads the JSON rank 0 writes: the seconds, the bytes and files
// in D, the float64 sums of every parameter and of Adam's moments over the
// shards (a load must give back what the save wrote), every rank's peak
// RSS, and the LibTorch this program was built with. torch_checkpoint.py
// is the same job for PyTorch Distributed Checkpoint.
//
// A separate program because kolo-bench itself does not link LibTorch.
// Exit status: 0, or 1 after one line on stderr saying what failed.
#include <fmt/format.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "json_file.h"
#include "kolo/build_info.h"
#include "kolo/kolo.h"
#include "kolo/models.h"
#include "kolo/torch.h"
#include "kolo/torch_zero.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Flags {
  std::string mode;
  std::string model = "resnet18";
  std::string dir;
  int32_t zero_stage = 2;
  int64_t batch_size = 8;
  int64_t image_size = 32;
  int32_t threads = 1;
  double lr = 1e-3;
  uint64_t seed = 42;
  std::string json_path;
};

constexpr int64_t kClasses = 10;
constexpr int64_t kChannels = 3;

int64_t PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// The sum of every parameter, in float64: the same on every rank, whose
// model ZeroOptimizer keeps whole.
double ParameterSum(kolo::models::Model& model) {
  double sum = 0;
  for (const ::torch::Tensor& p : model.parameters()) {
    sum += p.to(::torch::kFloat64).sum().item<double>();
  }
  return sum;
}

// The sum of Adam's moments (exp_avg, exp_avg_sq) over every rank's
// shards, in float64; the step counts left out, as torch_checkpoint.py
// leaves them out.
kolo::StatusOr<double> MomentSum(::torch::optim::Optimizer& optimizer) {
  double sum = 0;
  for (const auto& entry : optimizer.state()) {
    const auto* adam =
        dynamic_cast<const ::torch::optim::AdamParamState*>(entry.second.get());
    if (adam == nullptr) continue;
    for (const ::torch::Tensor& t : {adam->exp_avg(), adam->exp_avg_sq()}) {
      if (t.defined()) sum += t.to(::torch::kFloat64).sum().item<double>();
    }
  }
  KOLO_RETURN_IF_ERROR(kolo::Allreduce(&sum, &sum, 1, kolo::DataType::kFloat64,
                                       kolo::ReduceOp::kSum));
  return sum;
}

// (bytes, files) of the regular files under `dir`.
std::pair<int64_t, int64_t> DirectorySize(const std::string& dir) {
  int64_t bytes = 0, files = 0;
  std::error_code error;
  for (const fs::directory_entry& entry :
       fs::recursive_directory_iterator(dir, error)) {
    if (!entry.is_regular_file()) continue;
    bytes += static_cast<int64_t>(entry.file_size());
    ++files;
  }
  return {bytes, files};
}

// One timed Save or Load (`f.mode`), collective over the world.
kolo::Status Run(const Flags& f) {
  ::torch::set_num_threads(f.threads);
  const int32_t rank = kolo::Rank();
  const bool save = f.mode == "save";
  ::torch::manual_seed(save ? f.seed : f.seed + 1);
  KOLO_ASSIGN_OR_RETURN(
      std::shared_ptr<kolo::models::Model> model,
      kolo::models::CreateModel(f.model, kClasses, kChannels));
  KOLO_RETURN_IF_ERROR(kolo::torch::BroadcastParameters(*model, 0));
  kolo::OptimizerConfig adam;
  adam.type = kolo::OptimizerType::kAdam;
  adam.lr = f.lr;
  kolo::torch::ZeroOptions options;
  options.stage = f.zero_stage;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<kolo::torch::ZeroOptimizer> zero,
                        kolo::torch::ZeroOptimizer::Create(
                            model->named_parameters(),
                            kolo::torch::MakeOptimizer(adam), options));
  model->train();
  if (save) {
    ::torch::manual_seed(f.seed + static_cast<uint64_t>(rank));
    const ::torch::Tensor images =
        ::torch::randn({f.batch_size, kChannels, f.image_size, f.image_size});
    const ::torch::Tensor labels =
        ::torch::randint(kClasses, {f.batch_size}, ::torch::kInt64);
    zero->ScaleLoss(::torch::nn::functional::cross_entropy(
                        model->forward(images), labels))
        .backward();
    KOLO_ASSIGN_OR_RETURN(kolo::torch::StepOutcome outcome, zero->Step());
    if (!outcome.stepped) {
      return kolo::Internal("the step before the save did not step");
    }
  }
  KOLO_RETURN_IF_ERROR(kolo::Barrier());
  const auto start = std::chrono::steady_clock::now();
  KOLO_RETURN_IF_ERROR(save ? zero->Save(f.dir) : zero->Load(f.dir));
  KOLO_RETURN_IF_ERROR(kolo::Barrier());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  const double parameter_sum = ParameterSum(*model);
  KOLO_ASSIGN_OR_RETURN(double moment_sum, MomentSum(zero->optimizer()));
  const int64_t rss = PeakRssBytes();
  std::vector<int64_t> peak_rss(static_cast<size_t>(kolo::Size()));
  KOLO_RETURN_IF_ERROR(
      kolo::Allgather(&rss, peak_rss.data(), 1, kolo::DataType::kInt64));
  if (rank != 0) return kolo::Status::Ok();
  const auto [bytes, files] = DirectorySize(f.dir);
  fmt::print(
      "kolo-bench-checkpoint-worker: {} {} at np {} in {:.3f} s; {} holds "
      "{:.1f} MiB in {} files; parameter sum {:.6f}, moment sum {:.6f}\n",
      f.model, f.mode, kolo::Size(), seconds, f.dir,
      static_cast<double>(bytes) / (1 << 20), files, parameter_sum, moment_sum);
  std::fflush(stdout);
  if (f.json_path.empty()) return kolo::Status::Ok();
  json out = {{"tool", "kolo-bench-checkpoint-worker"},
              {"config",
               {{"framework", "kolo"},
                {"mode", f.mode},
                {"model", f.model},
                {"np", kolo::Size()},
                {"sharding", fmt::format("zero{}", f.zero_stage)},
                {"zero_stage", f.zero_stage},
                {"optimizer", "adam"},
                {"lr", f.lr},
                {"batch_size", f.batch_size},
                {"threads", f.threads},
                {"image_size", f.image_size},
                {"channels", kChannels},
                {"seed", f.seed},
                {"parameters", kolo::models::CountParameters(*model)},
                {"torch_version", kolo::BuildInfo().torch_version}}},
              {"result",
               {{"seconds", seconds},
                {"bytes", bytes},
                {"files", files},
                {"parameter_sum", parameter_sum},
                {"optimizer_state_sum", moment_sum},
                {"peak_rss_bytes", peak_rss}}}};
  return kolo::bench::WriteJsonFile(f.json_path, out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kolo-bench-checkpoint-worker: one timed ZeroOptimizer checkpoint save, "
      "or load at any number of ranks (kolo-bench checkpoint runs it under "
      "kolorun)"};
  app.set_version_flag("--version", [] {
    return kolo::VersionText("kolo-bench-checkpoint-worker");
  });
  Flags f;
  app.add_option("--mode", f.mode, "save or load")
      ->required()
      ->check(CLI::IsMember({"save", "load"}));
  app.add_option("--model", f.model, "model zoo network")
      ->capture_default_str();
  app.add_option("--dir", f.dir, "the checkpoint directory")->required();
  app.add_option("--zero-stage", f.zero_stage, "ZeRO stage 1 or 2")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  app.add_option("--batch-size", f.batch_size,
                 "images per rank in the step before the save")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--image-size", f.image_size,
                 "the synthetic 3-channel images' height and width")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", f.threads, "LibTorch threads per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", f.lr, "Adam's learning rate")->capture_default_str();
  app.add_option("--seed", f.seed, "the saved weights' seed")
      ->capture_default_str();
  app.add_option("--json", f.json_path, "rank 0 writes the figures here");
  CLI11_PARSE(app, argc, argv);

  kolo::Status status = kolo::Init();
  if (status.ok()) {
    try {
      status = Run(f);
    } catch (const std::exception& e) {
      // LibTorch reports its errors by throwing: the edge of the program.
      status = kolo::Internal(e.what());
    }
    const kolo::Status shutdown = kolo::Shutdown();
    if (status.ok()) status = shutdown;
  }
  if (!status.ok()) {
    fmt::print(stderr, "kolo-bench-checkpoint-worker: {} of {}: {}\n", f.mode,
               f.dir, status.ToString());
    return 1;
  }
  return 0;
}
