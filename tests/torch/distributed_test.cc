// kolo_torch in real processes under kolorun: tensor collectives, the
// equivalence of N workers with batch b and one worker with batch N*b, the
// overlap of communication with the backward pass, and unused branches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "kolo/torch.h"
#include "testing/child_process.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using testing::RunProgram;
using testing::RunResult;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = DISTRIBUTED_WORKER_PATH;

RunResult RunWorker(int np, const std::string& backend,
                    const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kKolorun,    "-np",   std::to_string(np),
                                   "--backend", backend, kWorker};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, {}, std::chrono::seconds(240));
}

TEST(TorchTypesTest, EveryKoloTypeMapsAndOthersAreRefused) {
  EXPECT_EQ(*torch::ToDataType(::torch::kFloat16), DataType::kFloat16);
  EXPECT_EQ(*torch::ToDataType(::torch::kBFloat16), DataType::kBFloat16);
  EXPECT_EQ(*torch::ToDataType(::torch::kUInt8), DataType::kUInt8);
  EXPECT_THAT(torch::ToDataType(::torch::kBool).status().message(),
              HasSubstr("Bool"));
}

TEST(TorchCollectivesTest, EveryCollectiveAndTypeOnEveryBackend) {
  for (const char* backend :
       testing::BuiltEngines({"gloo", "mpi", "shm", "tcp"})) {
    RunResult r = RunWorker(3, backend, {"tensors"});
    ASSERT_EQ(r.exit_code, 0) << backend << "\n" << Describe(r);
    EXPECT_THAT(r.out,
                HasSubstr("[2]<stdout>: rank 2: tensor collectives correct"));
  }
}

struct EquivalenceCase {
  int np;
  const char* optimizer;
  const char* compression;
  int passes;
};

void PrintTo(const EquivalenceCase& c, std::ostream* os) {
  *os << c.optimizer << " np " << c.np << " " << c.compression << " passes "
      << c.passes;
}

class EquivalenceTest : public ::testing::TestWithParam<EquivalenceCase> {};

// N ranks of batch b reach the parameters of one process with batch N*b:
// float32 within 1e-5; compressed gradients within a stated 2e-2.
TEST_P(EquivalenceTest, DistributedTrainingMatchesTheWholeBatch) {
  const EquivalenceCase& c = GetParam();
  RunResult r = RunWorker(c.np, "shm",
                          {"equivalence", c.optimizer, c.compression,
                           std::to_string(c.passes), "5"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::regex line("max parameter difference ([0-9.e+-]+)");
  int ranks = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end;
       it != end; ++it)
    ++ranks;
  EXPECT_EQ(ranks, c.np) << Describe(r);
  // Compressed gradients must show their rounding: a difference as small
  // as float32's (about 3e-8 here) means the option was ignored.
  if (std::string(c.compression) != "none") {
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end;
         it != end; ++it) {
      EXPECT_GT(std::stod((*it)[1].str()), 1e-6) << c.compression << "\n"
                                                 << Describe(r);
    }
  }
}

// gradient_predivide_factor exists for this: float16 gradients whose sum
// overflows (2 x 40000 > 65504) average correctly when divided by the
// factor before the sum, and come out infinite when not.
TEST(DistributedOptimizerTest, PredivideFactorKeepsFloat16SumsInRange) {
  RunResult divided = RunWorker(2, "shm", {"predivide", "2"});
  EXPECT_EQ(divided.exit_code, 0) << Describe(divided);
  EXPECT_THAT(divided.out,
              HasSubstr("rank 1: predivide 2: averaged gradient 400"));
  RunResult undivided = RunWorker(2, "shm", {"predivide", "1"});
  EXPECT_NE(undivided.exit_code, 0) << Describe(undivided);
  EXPECT_THAT(undivided.out, HasSubstr("averaged gradient inf"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EquivalenceTest,
    ::testing::Values(EquivalenceCase{2, "sgd", "none", 1},
                      EquivalenceCase{4, "sgd", "none", 1},
                      EquivalenceCase{2, "adam", "none", 1},
                      EquivalenceCase{4, "adam", "none", 1},
                      EquivalenceCase{2, "sgd", "fp16", 1},
                      EquivalenceCase{2, "sgd", "bf16", 1},
                      EquivalenceCase{2, "sgd", "none", 2}),
    [](const ::testing::TestParamInfo<EquivalenceCase>& info) {
      return std::string(info.param.optimizer) + "_np" +
             std::to_string(info.param.np) + "_" + info.param.compression +
             "_passes" + std::to_string(info.param.passes);
    });

class OptimizerStateTest : public ::testing::TestWithParam<std::string> {};

// Ranks with three, one and no steps of state: after the broadcast, one
// identical step leaves identical parameters on every rank.
TEST_P(OptimizerStateTest, BroadcastMakesEveryRankStepAlike) {
  RunResult r = RunWorker(3, "shm", {"optimizer-state", GetParam()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  int equal = 0;
  const std::string line = "parameters after a step equal on all ranks";
  for (size_t at = r.out.find(line); at != std::string::npos;
       at = r.out.find(line, at + 1)) {
    ++equal;
  }
  EXPECT_EQ(equal, 3) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimizerStateTest,
                         ::testing::Values("sgd", "adam", "adamw"));

TEST(DistributedOptimizerTest, GradientsAreEnqueuedWhileBackwardRuns) {
  RunResult r = RunWorker(2, testing::NetworkEngineName(), {"overlap"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("first gradient enqueued at")) << Describe(r);
}

TEST(DistributedOptimizerTest, UnusedBranchesDoNotHangTheStep) {
  RunResult r = RunWorker(2, testing::NetworkEngineName(), {"unused"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rank 1: unused branches reduced as zeros"));
}

}  // namespace
}  // namespace kolo

namespace kolo {
namespace {

// A world of one (here: no kolo::Init at all) communicates nothing: the
// wrapped optimizer sees exactly the gradients it would alone, and k
// accumulated passes are averaged as the reduction would average them.
TEST(DistributedOptimizerAloneTest, StepsLikeTheBareOptimizer) {
  ASSERT_FALSE(IsInitialized());
  ::torch::manual_seed(3);
  ::torch::nn::Linear reference(4, 3), wrapped(4, 3);
  {
    ::torch::NoGradGuard no_grad;
    for (size_t i = 0; i < reference->parameters().size(); ++i) {
      wrapped->parameters()[i].copy_(reference->parameters()[i]);
    }
  }
  const ::torch::Tensor x = ::torch::randn({8, 4});
  const ::torch::Tensor y = ::torch::randn({8, 3});
  ::torch::optim::SGD bare(reference->parameters(),
                           ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ::torch::optim::SGD inner(wrapped->parameters(),
                            ::torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::DistributedOptimizerOptions options;
  options.backward_passes_per_step = 2;
  options.compression =
      torch::Compression::kFloat16;  // nothing travels: no rounding
  torch::DistributedOptimizer distributed(inner, wrapped->named_parameters(),
                                          options);
  for (int step = 0; step < 3; ++step) {
    // Reference: one pass over all 8 rows. Wrapped: two passes of 4 rows.
    bare.zero_grad();
    ::torch::mse_loss(reference->forward(x), y).backward();
    bare.step();
    distributed.ZeroGrad();
    for (int half = 0; half < 2; ++half) {
      ::torch::mse_loss(wrapped->forward(x.narrow(0, 4 * half, 4)),
                        y.narrow(0, 4 * half, 4))
          .backward();
      ASSERT_TRUE(distributed.Step().ok());
    }
  }
  for (size_t i = 0; i < reference->parameters().size(); ++i) {
    EXPECT_TRUE(::torch::allclose(reference->parameters()[i],
                                  wrapped->parameters()[i], 1e-6, 1e-6))
        << i;
  }
  // The hooks enqueued nothing.
  EXPECT_EQ(distributed.last_enqueue_window().first,
            std::chrono::steady_clock::time_point());
}

TEST(DistributedOptimizerAloneTest, ALaterOptimizerOnTheSameModelStepsAlone) {
  // An elastic job builds one DistributedOptimizer per round over the same
  // parameters: the first one's hooks must leave with it. Left behind, they
  // call into freed memory; that crashed kolo-train --elastic at its first
  // reset, and may go unseen here (no sanitizer in the LibTorch build).
  ASSERT_FALSE(IsInitialized());
  ::torch::manual_seed(5);
  ::torch::nn::Linear model(4, 3);
  ::torch::optim::SGD inner(model->parameters(),
                            ::torch::optim::SGDOptions(0.1));
  const ::torch::Tensor x = ::torch::randn({8, 4});
  const ::torch::Tensor y = ::torch::randn({8, 3});
  for (int round = 0; round < 3; ++round) {
    torch::DistributedOptimizerOptions options;
    options.backward_passes_per_step = 2;
    torch::DistributedOptimizer distributed(inner, model->named_parameters(),
                                            options);
    const ::torch::Tensor before = model->weight.detach().clone();
    distributed.ZeroGrad();
    for (int half = 0; half < 2; ++half) {
      ::torch::mse_loss(model->forward(x.narrow(0, 4 * half, 4)),
                        y.narrow(0, 4 * half, 4))
          .backward();
      ASSERT_TRUE(distributed.Step().ok()) << round;
    }
    EXPECT_FALSE(::torch::equal(before, model->weight.detach())) << round;
  }
}

TEST(DistributedOptimizerAloneTest, AGroupNamingNoParameterIsAnError) {
  ::torch::nn::Linear model(4, 3);
  ::torch::optim::SGD inner(model->parameters(),
                            ::torch::optim::SGDOptions(0.1));
  for (const auto& groups : std::vector<std::vector<std::vector<std::string>>>{
           {{"weight", "head.bias"}}, {{"weight"}, {"bias", "weight"}}}) {
    torch::DistributedOptimizerOptions options;
    options.groups = groups;
    torch::DistributedOptimizer distributed(inner, model->named_parameters(),
                                            options);
    ::torch::mse_loss(model->forward(::torch::randn({2, 4})),
                      ::torch::randn({2, 3}))
        .backward();
    const Status status = distributed.Step();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(),
                HasSubstr(groups.size() == 1 ? "'head.bias' is not a parameter"
                                             : "'weight' is in two groups"));
  }
}

}  // namespace
}  // namespace kolo
