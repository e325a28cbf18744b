// kolo::torch::Trainer: in this process (a world of one, before kolo::Init)
// the hooks and callbacks come in order with the loop's figures; under
// kolorun, N ranks of batch b reach the parameters one process reaches with
// batch N·b (trainer_worker.cc).
#include "kolo/trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "testing/child_process.h"
#include "testing/engines.h"
#include "torch/training/training_testing.h"

namespace kolo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kBatches = testing::kTrainingRows / testing::kTrainingBatch;

class TrainerHooksTest : public ::testing::Test {
 protected:
  TrainerHooksTest()
      : set_(testing::TrainingSet()),
        sgd_(model_.parameters(), ::torch::optim::SGDOptions(0.1)),
        strategy_(sgd_, model_) {
    options_.epochs = 3;
    options_.batch_size = testing::kTrainingBatch;
  }

  data::Dataset set_;
  testing::Mlp model_;
  ::torch::optim::SGD sgd_;
  torch::DataParallelStrategy strategy_;
  torch::TrainerOptions options_;
};

TEST_F(TrainerHooksTest, ResumesAndCallsEveryHookInOrder) {
  torch::Trainer trainer(model_, strategy_, options_);
  std::vector<std::string> calls;
  std::vector<int64_t> iterations;
  trainer.hooks().resume = [&]() -> StatusOr<int64_t> {
    calls.push_back("resume");
    return 1;
  };
  trainer.hooks().on_start = [&](int64_t start, int64_t batches) {
    calls.push_back("start " + std::to_string(start) + " " +
                    std::to_string(batches));
  };
  trainer.hooks().learning_rate = [&](const torch::StepPosition& p) {
    iterations.push_back(p.iteration);
    return 0.01 * static_cast<double>(p.epoch);
  };
  int64_t steps = 0;
  trainer.hooks().on_step = [&](const torch::StepReport& r) {
    EXPECT_EQ(r.batch, steps % kBatches);
    EXPECT_EQ(r.steps_taken, steps + 1);
    EXPECT_EQ(r.images_seen, (r.batch + 1) * testing::kTrainingBatch);
    EXPECT_DOUBLE_EQ(sgd_.param_groups()[0].options().get_lr(), r.lr);
    ++steps;
  };
  trainer.hooks().on_epoch = [&](const torch::EpochReport& e) {
    calls.push_back("epoch " + std::to_string(e.epoch));
    EXPECT_EQ(e.eval.total, testing::kTrainingRows);
    EXPECT_EQ(e.images, testing::kTrainingRows);
    EXPECT_GT(e.train_loss, 0);
  };
  trainer.hooks().checkpoint = [&](int64_t done) {
    calls.push_back("checkpoint " + std::to_string(done));
    return Status::Ok();
  };
  StatusOr<torch::FitResult> fit = trainer.Fit(set_, set_);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_THAT(calls, ElementsAre("resume", "start 1 12", "epoch 2",
                                 "checkpoint 2", "epoch 3", "checkpoint 3"));
  EXPECT_EQ(steps, 2 * kBatches);
  ASSERT_EQ(iterations.size(), static_cast<size_t>(2 * kBatches));
  EXPECT_EQ(iterations.front(), kBatches);  // the resumed epoch's first
  EXPECT_EQ(fit->start_epoch, 1);
  EXPECT_EQ(fit->epochs.size(), 2u);
  EXPECT_EQ(fit->images_trained, 2 * testing::kTrainingRows);
  EXPECT_EQ(fit->parameter_checksum, torch::ParameterChecksum(model_));
}

TEST_F(TrainerHooksTest, AFailedCheckpointStopsTheLoop) {
  torch::Trainer trainer(model_, strategy_, options_);
  int epochs = 0;
  trainer.hooks().on_epoch = [&](const torch::EpochReport&) { ++epochs; };
  trainer.hooks().checkpoint = [](int64_t) { return Internal("disk full"); };
  StatusOr<torch::FitResult> fit = trainer.Fit(set_, set_);
  EXPECT_THAT(fit.status().message(), HasSubstr("disk full"));
  EXPECT_EQ(epochs, 1);
}

TEST_F(TrainerHooksTest, ARunResumedAfterItsLastEpochOnlyEvaluates) {
  torch::Trainer trainer(model_, strategy_, options_);
  trainer.hooks().resume = []() -> StatusOr<int64_t> { return 3; };
  bool stepped = false;
  trainer.hooks().on_step = [&](const torch::StepReport&) { stepped = true; };
  StatusOr<torch::FitResult> fit = trainer.Fit(set_, set_);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_FALSE(stepped);
  EXPECT_EQ(fit->eval.total, testing::kTrainingRows);
}

// Moved here with EpochSeed from kolo-train.
TEST(EpochSeed, DiffersAcrossEpochsRanksAndSeeds) {
  std::set<uint64_t> seen;
  for (uint64_t seed : {0u, 1u, 42u}) {
    for (int64_t epoch = 0; epoch < 20; ++epoch) {
      for (int32_t rank = 0; rank < 20; ++rank) {
        const uint64_t s = torch::EpochSeed(seed, epoch, rank);
        EXPECT_EQ(s, torch::EpochSeed(seed, epoch, rank));
        EXPECT_LT(s, uint64_t{1} << 63);
        seen.insert(s);
      }
    }
  }
  EXPECT_EQ(seen.size(), 3u * 20u * 20u);
}

// N ranks of batch b against one process of batch N·b, on each engine.
TEST(TrainerDataParallelTest, NWorkersMatchOneWorkerWithTheWholeBatch) {
  for (const char* engine : testing::BuiltEngines({"shm", "tcp"})) {
    for (int np : {2, 3}) {
      testing::RunResult r =
          testing::RunProgram({KOLORUN_PATH, "-np", std::to_string(np),
                               "--backend", engine, TRAINER_WORKER_PATH, "2"},
                              {}, std::chrono::seconds(240));
      ASSERT_EQ(r.exit_code, 0) << engine << " np " << np << "\n"
                                << testing::Describe(r);
      const std::regex line(
          "max parameter difference [0-9.e+-]+; (\\d+) steps, 2 epochs");
      int ranks = 0;
      for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end;
           it != end; ++it) {
        EXPECT_EQ(std::stoi((*it)[1].str()),
                  2 * testing::kTrainingRows / (np * testing::kTrainingBatch));
        ++ranks;
      }
      EXPECT_EQ(ranks, np) << testing::Describe(r);
    }
  }
}

}  // namespace
}  // namespace kolo
