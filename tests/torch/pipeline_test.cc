// Pipeline plans (GPipe, 1F1B), their checker and stage balancing, without
// processes; and, under kolorun, pipelines of 2 and 4 stages whose losses,
// gradients and SGD steps equal the unsplit model's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kolo/torch_pipeline.h"
#include "testing/child_process.h"

namespace kolo::torch {
namespace {

using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Kind = PipelineActionKind;

PipelinePlan Build(PipelineSchedule schedule, int32_t stages, int32_t m) {
  StatusOr<PipelinePlan> plan = BuildPipelinePlan(schedule, stages, m);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return *plan;
}

TEST(PipelineScheduleTest, NamesParseBack) {
  for (PipelineSchedule s :
       {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB}) {
    EXPECT_EQ(*ParsePipelineSchedule(PipelineScheduleName(s)), s);
  }
  EXPECT_STREQ(PipelineScheduleName(PipelineSchedule::kOneFOneB), "1f1b");
  EXPECT_THAT(ParsePipelineSchedule("pipedream").status().message(),
              HasSubstr("'pipedream'"));
  EXPECT_EQ(*ParseBalance("time"), PipelineOptions::Balance::kTime);
  EXPECT_EQ(*ParseBalance(BalanceName(PipelineOptions::Balance::kParameters)),
            PipelineOptions::Balance::kParameters);
  EXPECT_FALSE(ParseBalance("flops").ok());
}

// Every (stages, micro-batches) pair, fewer micro-batches than stages
// included, gives plans that run to the end, that forward and backward each
// micro-batch once per stage, and that hold exactly m (GPipe) or
// min(stages - s, m) (1F1B) micro-batches at stage s.
TEST(PipelineScheduleTest, BothSchedulesCompleteAndHoldTheirActivations) {
  for (int32_t p : {2, 4}) {
    for (int32_t m : {1, 2, 3, 4, 8}) {
      for (PipelineSchedule schedule :
           {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB}) {
        SCOPED_TRACE(std::string(PipelineScheduleName(schedule)) +
                     " p=" + std::to_string(p) + " m=" + std::to_string(m));
        PipelinePlan plan = Build(schedule, p, m);
        Status check = CheckPipelinePlan(plan);
        EXPECT_TRUE(check.ok()) << check.ToString();
        std::vector<int32_t> expected;
        for (int32_t s = 0; s < p; ++s) {
          expected.push_back(
              schedule == PipelineSchedule::kGPipe ? m : std::min(p - s, m));
          // Interior stages: 6 actions per micro-batch; the ends: 4.
          const size_t per = (s == 0 || s == p - 1) ? 4 : 6;
          EXPECT_EQ(plan.actions[s].size(), per * m) << "stage " << s;
        }
        EXPECT_THAT(PeakActivations(plan), ElementsAreArray(expected));
      }
    }
  }
}

TEST(PipelineScheduleTest, OneFOneBListsAreTheTextbookOnes) {
  PipelinePlan plan = Build(PipelineSchedule::kOneFOneB, 2, 3);
  EXPECT_THAT(plan.actions[0],
              ElementsAre(PipelineAction{Kind::kForward, 0},
                          PipelineAction{Kind::kSendActivation, 0},
                          PipelineAction{Kind::kForward, 1},
                          PipelineAction{Kind::kSendActivation, 1},
                          PipelineAction{Kind::kRecvGradient, 0},
                          PipelineAction{Kind::kBackward, 0},
                          PipelineAction{Kind::kForward, 2},
                          PipelineAction{Kind::kSendActivation, 2},
                          PipelineAction{Kind::kRecvGradient, 1},
                          PipelineAction{Kind::kBackward, 1},
                          PipelineAction{Kind::kRecvGradient, 2},
                          PipelineAction{Kind::kBackward, 2}));
  EXPECT_EQ(PipelineActionName(plan.actions[1][0]), "RecvActivation(0)");
  EXPECT_EQ(PipelineActionName(plan.actions[1][3]), "SendGradient(0)");
}

TEST(PipelineScheduleTest, OneStageIsForwardThenBackward) {
  PipelinePlan plan = Build(PipelineSchedule::kOneFOneB, 1, 2);
  EXPECT_THAT(plan.actions[0], ElementsAre(PipelineAction{Kind::kForward, 0},
                                           PipelineAction{Kind::kBackward, 0},
                                           PipelineAction{Kind::kForward, 1},
                                           PipelineAction{Kind::kBackward, 1}));
  EXPECT_TRUE(CheckPipelinePlan(plan).ok());
  EXPECT_FALSE(BuildPipelinePlan(PipelineSchedule::kGPipe, 0, 2).ok());
  EXPECT_FALSE(BuildPipelinePlan(PipelineSchedule::kGPipe, 2, 0).ok());
}

size_t Find(const std::vector<PipelineAction>& list, PipelineAction a) {
  return std::find(list.begin(), list.end(), a) - list.begin();
}

TEST(PipelineCheckerTest, SwappedSendsAreRejectedNamingTheReceiver) {
  PipelinePlan plan = Build(PipelineSchedule::kGPipe, 2, 2);
  std::vector<PipelineAction>& s0 = plan.actions[0];
  std::swap(s0[Find(s0, {Kind::kSendActivation, 0})],
            s0[Find(s0, {Kind::kSendActivation, 1})]);
  // Stage 0 now sends micro-batch 0 before forwarding it.
  Status check = CheckPipelinePlan(plan);
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(check.message(),
              HasSubstr("stage 0 action 1 SendActivation(1): sends before "
                        "its Forward"));

  // The same sends in the other order, each after its forward: stage 1's
  // first receive meets micro-batch 1's activation.
  PipelinePlan reordered = Build(PipelineSchedule::kGPipe, 2, 2);
  reordered.actions[0] = {
      {Kind::kForward, 0},        {Kind::kForward, 1},
      {Kind::kSendActivation, 1}, {Kind::kSendActivation, 0},
      {Kind::kRecvGradient, 0},   {Kind::kBackward, 0},
      {Kind::kRecvGradient, 1},   {Kind::kBackward, 1}};
  check = CheckPipelinePlan(reordered);
  EXPECT_THAT(check.message(),
              HasSubstr("stage 1 action 0 RecvActivation(0): the oldest "
                        "activation from stage 0 is micro-batch 1's"));
}

TEST(PipelineCheckerTest, AMissingReceiveIsRejectedNamingTheStage) {
  PipelinePlan plan = Build(PipelineSchedule::kOneFOneB, 4, 4);
  std::vector<PipelineAction>& s2 = plan.actions[2];
  s2.erase(s2.begin() + Find(s2, {Kind::kRecvGradient, 3}));
  Status check = CheckPipelinePlan(plan);
  ASSERT_FALSE(check.ok());
  EXPECT_THAT(check.message(),
              HasSubstr("stage 2 action " +
                        std::to_string(Find(s2, {Kind::kBackward, 3})) +
                        " Backward(3): backward before its RecvGradient"));

  // A gradient that stage 0 never receives.
  PipelinePlan unmatched = Build(PipelineSchedule::kGPipe, 2, 1);
  unmatched.actions[0] = {{Kind::kForward, 0}, {Kind::kSendActivation, 0}};
  EXPECT_THAT(CheckPipelinePlan(unmatched).message(),
              HasSubstr("stage 1: SendGradient(0) is never received by "
                        "stage 0"));
}

TEST(PipelineCheckerTest, ADeadlockNamesEveryBlockedStage) {
  // Stage 1 waits for a gradient before it forwards anything; stage 0
  // waits for the gradient stage 1 would send back.
  PipelinePlan plan = Build(PipelineSchedule::kGPipe, 2, 1);
  plan.actions[0] = {{Kind::kRecvGradient, 0},
                     {Kind::kForward, 0},
                     {Kind::kSendActivation, 0},
                     {Kind::kBackward, 0}};
  Status check = CheckPipelinePlan(plan);
  EXPECT_THAT(check.message(),
              HasSubstr("deadlocks: blocked at stage 0 action 0 "
                        "RecvGradient(0), stage 1 action 0 "
                        "RecvActivation(0)"));
}

TEST(PipelineCheckerTest, BackwardBeforeForwardAndTwiceAndUndone) {
  PipelinePlan plan = Build(PipelineSchedule::kGPipe, 1, 2);
  plan.actions[0] = {{Kind::kBackward, 0}};
  EXPECT_THAT(CheckPipelinePlan(plan).message(),
              HasSubstr("stage 0 action 0 Backward(0): backward before its "
                        "Forward"));
  plan.actions[0] = {{Kind::kForward, 0}, {Kind::kForward, 0}};
  EXPECT_THAT(CheckPipelinePlan(plan).message(),
              HasSubstr("stage 0 action 1 Forward(0): forwarded twice"));
  plan.actions[0] = {{Kind::kForward, 0}, {Kind::kBackward, 0}};
  EXPECT_THAT(CheckPipelinePlan(plan).message(),
              HasSubstr("stage 0 never runs Forward(1)"));
  plan.actions[0] = {{Kind::kForward, 5}};
  EXPECT_THAT(CheckPipelinePlan(plan).message(),
              HasSubstr("Forward(5): micro-batch out of range [0, 2)"));
  plan.actions[0] = {{Kind::kRecvActivation, 0}};
  EXPECT_THAT(CheckPipelinePlan(plan).message(),
              HasSubstr("no stage -1 to receive from"));
}

TEST(PipelineBalanceTest, CutsMinimiseTheLargestStage) {
  // Closed forms: equal costs split evenly; one heavy layer sits alone.
  EXPECT_THAT(*BalanceStages({1, 1, 1, 1, 1, 1}, 3), ElementsAre(2, 2, 2));
  EXPECT_THAT(*BalanceStages({1, 1, 1, 1, 1}, 2), ElementsAre(2, 3));
  EXPECT_THAT(*BalanceStages({1, 1, 10, 1, 1}, 3), ElementsAre(2, 1, 2));
  EXPECT_THAT(*BalanceStages({5, 1, 1, 1, 1, 1}, 2), ElementsAre(1, 5));
  EXPECT_THAT(*BalanceStages({0, 0, 0}, 3), ElementsAre(1, 1, 1));
  EXPECT_THAT(BalanceStages({1, 1}, 3).status().message(),
              HasSubstr("cannot cut 2 layers into 3"));
}

// A world of one: a single stage, everything local, against the model run
// whole; needs no kolo::Init.
TEST(PipelineLocalTest, OneStageEqualsTheUnsplitModel) {
  auto make = [] {
    ::torch::manual_seed(7);
    return ::torch::nn::Sequential(::torch::nn::Linear(3, 4),
                                   ::torch::nn::Tanh(),
                                   ::torch::nn::Linear(4, 2));
  };
  ::torch::nn::Sequential whole = make();
  ::torch::nn::Sequential split = make();
  whole->to(::torch::kFloat64);
  split->to(::torch::kFloat64);
  PipelineOptions options;
  options.stages = 1;
  options.micro_batches = 3;
  StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create(split, options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  EXPECT_TRUE((*pipeline)->is_first_stage());
  EXPECT_TRUE((*pipeline)->is_last_stage());
  EXPECT_EQ((*pipeline)->layers(), (std::pair<int64_t, int64_t>(0, 3)));
  ::torch::Tensor x = ::torch::arange(21, ::torch::kFloat64).reshape({7, 3});
  ::torch::Tensor y =
      ::torch::cos(::torch::arange(14, ::torch::kFloat64)).reshape({7, 2});
  auto mse = [](const ::torch::Tensor& out, const ::torch::Tensor& t) {
    return ::torch::mse_loss(out, t);
  };
  StatusOr<double> loss = (*pipeline)->TrainStep(x, y, mse);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  ::torch::Tensor expected = mse(whole->forward(x), y);
  expected.backward();
  EXPECT_NEAR(*loss, expected.item<double>(), 1e-12);
  auto a = whole->parameters();
  auto b = (*pipeline)->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(::torch::allclose(a[i].grad(), b[i].grad(), 0, 1e-12)) << i;
  }
  EXPECT_EQ((*pipeline)->statistics().peak_activations, 1);
  EXPECT_EQ((*pipeline)->named_parameters().keys()[2], "2.weight");
  StatusOr<::torch::Tensor> out = (*pipeline)->Forward(x);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(::torch::allclose(*out, whole->forward(x), 0, 1e-12));
}

// Real processes under kolorun: every case of a world in one launch (see
// workers/pipeline_worker.cc). Each rank prints one line per case it
// passed; a difference exits non-zero naming the case and the tensor.
testing::RunResult RunWorker(int np) {
  return testing::RunProgram({KOLORUN_PATH, "-np", std::to_string(np),
                              "--backend", "shm", PIPELINE_WORKER_PATH},
                             {}, std::chrono::seconds(120));
}

TEST(PipelineProcessesTest, TwoStagesMatchTheUnsplitModel) {
  testing::RunResult r = RunWorker(2);
  ASSERT_EQ(r.exit_code, 0) << testing::Describe(r);
  // 2 schedules x 4 micro-batch counts, and one split balanced by time.
  EXPECT_THAT(r.out, HasSubstr("rank 0: 9 pipeline cases passed"));
  EXPECT_THAT(r.out, HasSubstr("rank 1: 9 pipeline cases passed"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: case stages 2 micro-batches 1 1f1b "
                               "layers [0, 3) peak 1"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: case stages 2 micro-batches 4 gpipe "
                               "layers [0, 3) peak 4"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: case stages 2 micro-batches 4 1f1b "
                               "layers [0, 3) peak 2"));
  EXPECT_THAT(r.out, HasSubstr("rank 1: case stages 2 micro-batches 4 1f1b "
                               "layers [3, 7) peak 1"));
}

TEST(PipelineProcessesTest, FourStagesAndTwoByTwoMatchTheUnsplitModel) {
  testing::RunResult r = RunWorker(4);
  ASSERT_EQ(r.exit_code, 0) << testing::Describe(r);
  // 2 schedules x (5 micro-batch counts at 4 stages + 2 at 2 x 2).
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.out, HasSubstr("rank " + std::to_string(rank) +
                                 ": 14 pipeline cases passed"));
  }
  // At 4 stages and 8 micro-batches stage s holds 4 - s (1F1B) or all 8
  // (GPipe).
  for (int rank = 0; rank < 4; ++rank) {
    const std::string at =
        "rank " + std::to_string(rank) + ": case stages 4 micro-batches 8 ";
    EXPECT_THAT(r.out, ContainsRegex(at +
                                     "1f1b layers \\[[0-9], [0-9]\\) "
                                     "peak " +
                                     std::to_string(4 - rank)));
    EXPECT_THAT(r.out, ContainsRegex(at + "gpipe layers \\[[0-9], [0-9]\\) "
                                          "peak 8"));
  }
  // 2 x 2: ranks 0 and 2 are stage 0 of replicas 0 and 1.
  EXPECT_THAT(r.out, HasSubstr("rank 2: case stages 2 micro-batches 3 1f1b "
                               "layers [0, 3) peak 2"));
  EXPECT_THAT(r.out, HasSubstr("rank 3: case stages 2 micro-batches 3 1f1b "
                               "layers [3, 7) peak 1"));
}

}  // namespace
}  // namespace kolo::torch
