// A rank of the ZeroOptimizer tests, started by kolorun (or alone).
//   equivalence
//       ZeRO stages 1 and 2 with SGD (momentum, weight decay) and Adam,
//       plain, with 2 accumulation passes and with clipping active, on a
//       model whose parameter sizes do not divide by the world size and
//       with different data on every rank: each must reach the parameters
//       of one process that trains on the whole batch (and, without
//       clipping, DistributedOptimizer's), within 1e-5.
//   save DIR STEPS STAGE BUCKET     train STEPS steps, save to DIR
//   resume DIR STEPS STAGE BUCKET   load DIR, train to STEPS in all, and
//       compare with one process trained STEPS steps uninterrupted
//   scaling
//       float16 loss scaling, DeepSpeed's rule (initial scale 2^4, window
//       3, hysteresis 2), with the last rank's loss made infinite at steps
//       2, 3 and 7 of 10: prints the scale each step used, the skipped
//       steps and the learning rates of a linear warm-up that only taken
//       steps advance.
// The data of step s is a function of s alone (the global batch); rank r
// trains on rows [r*G/N, (r+1)*G/N), so any world size sees the same
// global batch.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/torch.h"
#include "kolo/torch_zero.h"

namespace {

namespace kt = kolo::torch;
constexpr int64_t kGlobalBatch = 12;  // divides by 1, 2, 3 and 4
constexpr double kTolerance = 1e-5;

int Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(), what.c_str());
  return 1;
}

// 7 -> 13 -> 5: 104 and 70 parameters, 174 in all, none a multiple of 4
// (or of 3) in its bucket.
struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(7, 13));
    fc2 = register_module("fc2", torch::nn::Linear(13, 5));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

void CopyParameters(Net& from, Net& to) {
  torch::NoGradGuard no_grad;
  auto a = from.parameters();
  auto b = to.parameters();
  for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
}

// The global batch of step `step`, pass `pass`.
std::pair<torch::Tensor, torch::Tensor> Batch(int step, int pass) {
  torch::manual_seed(1000 + 31 * step + pass);
  torch::Tensor x = torch::randn({kGlobalBatch, 7});
  torch::Tensor y = torch::randint(0, 5, {kGlobalBatch}, torch::kInt64);
  return {x, y};
}

torch::Tensor Mine(const torch::Tensor& t) {
  const int64_t per_rank = kGlobalBatch / kolo::Size();
  return t.narrow(0, kolo::Rank() * per_rank, per_rank);
}

kolo::OptimizerConfig Optimizer(const std::string& kind) {
  kolo::OptimizerConfig config;
  if (kind == "adam") {
    config.type = kolo::OptimizerType::kAdam;
    config.lr = 0.01;
    config.weight_decay = 1e-3;
  } else {
    config.type = kolo::OptimizerType::kSgd;
    config.lr = 0.1;
    config.momentum = 0.9;
    config.weight_decay = 1e-4;
  }
  return config;
}

// One process on the whole batch: the standard every layout must meet.
void TrainReference(Net& net, const kolo::OptimizerConfig& config, int passes,
                    double clip, int first_step, int steps,
                    torch::optim::Optimizer& optimizer) {
  for (int step = first_step; step < steps; ++step) {
    optimizer.zero_grad();
    for (int pass = 0; pass < passes; ++pass) {
      auto [x, y] = Batch(step, pass);
      torch::nn::functional::cross_entropy(net.forward(x), y).backward();
    }
    torch::NoGradGuard no_grad;
    for (auto& p : net.parameters()) p.mutable_grad().div_(passes);
    if (clip > 0) torch::nn::utils::clip_grad_norm_(net.parameters(), clip);
    optimizer.step();
  }
  (void)config;
}

double MaxDifference(Net& a, Net& b) {
  double worst = 0;
  auto x = a.parameters();
  auto y = b.parameters();
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, (x[i] - y[i]).abs().max().item<double>());
  return worst;
}

kt::ZeroOptions Options(int stage, int passes, double clip, int64_t bucket) {
  kt::ZeroOptions options;
  options.stage = stage;
  options.gradient_accumulation_steps = passes;
  options.gradient_clipping = clip;
  options.reduce_bucket_elements = bucket;
  options.allgather_bucket_elements = 100;  // groups of buckets, and single
  return options;
}

// Trains `net` with ZeroOptimizer for steps [first, last); returns the
// largest gradient norm seen.
kolo::StatusOr<double> TrainZero(Net& net, kt::ZeroOptimizer& zero, int passes,
                                 int first, int last) {
  double largest_norm = 0;
  for (int step = first; step < last; ++step) {
    zero.ZeroGrad();
    for (int pass = 0; pass < passes; ++pass) {
      auto [x, y] = Batch(step, pass);
      torch::nn::functional::cross_entropy(net.forward(Mine(x)), Mine(y))
          .backward();
      KOLO_ASSIGN_OR_RETURN(kt::StepOutcome outcome, zero.Step());
      if (outcome.stepped != (pass == passes - 1))
        return kolo::Internal("stepped at the wrong pass");
      largest_norm = std::max(largest_norm, outcome.gradient_norm);
    }
  }
  return largest_norm;
}

int Equivalence() {
  constexpr int kSteps = 4;
  int failures = 0;
  for (const char* kind : {"sgd", "adam"}) {
    for (int stage : {1, 2}) {
      for (const char* variant : {"plain", "accumulate", "clip"}) {
        const int passes = std::string(variant) == "accumulate" ? 2 : 1;
        const double clip = std::string(variant) == "clip" ? 0.05 : 0.0;
        const kolo::OptimizerConfig config = Optimizer(kind);
        torch::manual_seed(7 + kolo::Rank());  // the broadcast fixes it
        Net net;
        if (auto s = kt::BroadcastParameters(net, 0); !s.ok())
          return Fail(s.ToString());
        Net reference;
        CopyParameters(net, reference);
        Net ddp;
        CopyParameters(net, ddp);

        kt::ZeroOptimizer zero(net.named_parameters(),
                               kt::MakeOptimizer(config),
                               Options(stage, passes, clip, 50));
        auto norm = TrainZero(net, zero, passes, 0, kSteps);
        if (!norm.ok()) return Fail(norm.status().ToString());

        auto reference_optimizer =
            kt::MakeOptimizer(config)(reference.parameters());
        TrainReference(reference, config, passes, clip, 0, kSteps,
                       *reference_optimizer);
        double worst = MaxDifference(net, reference);
        std::string against_ddp;
        if (clip == 0) {
          // DistributedOptimizer on the same per-rank data.
          auto inner = kt::MakeOptimizer(config)(ddp.parameters());
          kt::DistributedOptimizerOptions ddp_options;
          ddp_options.backward_passes_per_step = passes;
          kt::DistributedOptimizer optimizer(*inner, ddp.named_parameters(),
                                             ddp_options);
          for (int step = 0; step < kSteps; ++step) {
            optimizer.ZeroGrad();
            for (int pass = 0; pass < passes; ++pass) {
              auto [x, y] = Batch(step, pass);
              torch::nn::functional::cross_entropy(ddp.forward(Mine(x)),
                                                   Mine(y))
                  .backward();
              if (auto s = optimizer.Step(); !s.ok()) return Fail(s.ToString());
            }
          }
          const double ddp_difference = MaxDifference(net, ddp);
          worst = std::max(worst, ddp_difference);
          char text[64];
          std::snprintf(text, sizeof(text), ", DistributedOptimizer %.3g",
                        ddp_difference);
          against_ddp = text;
        }
        const bool clipped = clip == 0 || *norm > clip;
        const bool ok = worst <= kTolerance && clipped;
        std::printf(
            "rank %d: %s stage %d %s: max parameter difference %.3g%s "
            "(largest gradient norm %.3g)%s\n",
            kolo::Rank(), kind, stage, variant, worst, against_ddp.c_str(),
            *norm, ok ? "" : "  FAILED");
        if (!ok) ++failures;
      }
    }
  }
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}

// save/resume: Adam, so that the checkpoint carries moments and a step
// count; the reference trains the whole way in one process.
int Checkpoint(bool resume, const std::string& dir, int steps, int stage,
               int64_t bucket) {
  const kolo::OptimizerConfig config = Optimizer("adam");
  torch::manual_seed(11);  // the same initial weights on every rank and run
  Net net;
  Net reference;
  CopyParameters(net, reference);
  auto zero = kt::ZeroOptimizer::Create(net.named_parameters(),
                                        kt::MakeOptimizer(config),
                                        Options(stage, 1, 0.5, bucket));
  if (!zero.ok()) return Fail(zero.status().ToString());
  int first = 0;
  if (resume) {
    if (auto s = (*zero)->Load(dir); !s.ok()) return Fail(s.ToString());
    first = static_cast<int>((*zero)->steps_taken());
  }
  auto trained = TrainZero(net, **zero, 1, first, steps);
  if (!trained.ok()) return Fail(trained.status().ToString());
  if (!resume) {
    if (auto s = (*zero)->Save(dir); !s.ok()) return Fail(s.ToString());
    std::printf("rank %d: saved after %d steps\n", kolo::Rank(), steps);
    return 0;
  }
  auto reference_optimizer = kt::MakeOptimizer(config)(reference.parameters());
  TrainReference(reference, config, 1, 0.5, 0, steps, *reference_optimizer);
  const double worst = MaxDifference(net, reference);
  std::printf(
      "rank %d: resumed at step %d of %d: max parameter difference %.3g\n",
      kolo::Rank(), first, steps, worst);
  return worst <= kTolerance ? 0 : 1;
}

int Scaling() {
  kolo::OptimizerConfig config = Optimizer("sgd");
  torch::manual_seed(3);
  Net net;
  kt::ZeroOptions options = Options(2, 1, 0, 50);
  options.precision = kolo::Precision::kFloat16;
  options.loss_scale.initial_scale_power = 4;
  options.loss_scale.loss_scale_window = 3;
  options.loss_scale.hysteresis = 2;
  kt::ZeroOptimizer zero(net.named_parameters(), kt::MakeOptimizer(config),
                         options);
  kolo::LrScheduleConfig schedule;
  schedule.type = kolo::LrScheduleType::kWarmupLR;
  schedule.warmup_type = "linear";
  schedule.warmup_min_lr = 0;
  schedule.warmup_max_lr = 0.1;
  schedule.warmup_num_steps = 10;
  int64_t taken = 0;
  std::string scales, skipped, rates;
  for (int step = 0; step < 10; ++step) {
    const double lr = kolo::LearningRateAt(schedule, config.lr, taken);
    zero.SetLearningRate(lr);
    zero.ZeroGrad();
    auto [x, y] = Batch(step, 0);
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(net.forward(Mine(x)), Mine(y));
    const bool inject = kolo::Rank() == kolo::Size() - 1 &&
                        (step == 2 || step == 3 || step == 7);
    if (inject) loss = loss * INFINITY;
    std::vector<torch::Tensor> before;
    for (auto& p : net.parameters()) before.push_back(p.detach().clone());
    zero.ScaleLoss(loss).backward();
    auto outcome = zero.Step();
    if (!outcome.ok()) return Fail(outcome.status().ToString());
    scales += " " + std::to_string(static_cast<int>(outcome->loss_scale));
    rates += " " + std::to_string(lr).substr(0, 5);
    if (outcome->overflow) {
      skipped += " " + std::to_string(step);
      auto after = net.parameters();
      for (size_t i = 0; i < after.size(); ++i) {
        if (!torch::equal(after[i], before[i]))
          return Fail("a skipped step changed the parameters");
      }
    } else {
      ++taken;
    }
  }
  std::printf("rank %d: scales%s; skipped%s; lr%s; final scale %d\n",
              kolo::Rank(), scales.c_str(), skipped.c_str(), rates.c_str(),
              static_cast<int>(zero.loss_scaler().scale()));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: zero_worker MODE ...");
  if (auto s = kolo::Init(); !s.ok()) return Fail(s.ToString());
  torch::set_num_threads(1);
  const std::string mode = argv[1];
  int code = 2;
  if (mode == "equivalence") {
    code = Equivalence();
  } else if ((mode == "save" || mode == "resume") && argc == 6) {
    code = Checkpoint(mode == "resume", argv[2], std::stoi(argv[3]),
                      std::stoi(argv[4]), std::stoll(argv[5]));
  } else if (mode == "scaling") {
    code = Scaling();
  } else {
    Fail("unknown mode " + mode);
  }
  (void)kolo::Shutdown();
  return code;
}
