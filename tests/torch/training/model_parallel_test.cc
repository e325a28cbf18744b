// The Trainer's pipeline and parameter-server strategies
// (kolo/trainer_model_parallel.h) on real ranks under kolorun: a pipeline of
// 2 stages x R replicas with batch b per replica reaches the weights of the
// unsplit model trained in one process with batch R·b, and N synchronous
// parameter-server workers of batch b reach those of one process with batch
// N·b (model_parallel_worker.cc). A batch too small for the micro-batches
// is refused with the figures that explain why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "testing/child_process.h"
#include "torch/training/training_testing.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

// Every rank's line "max parameter difference D; S steps": the count of
// ranks that printed one, each with `steps` steps.
int RanksWithSteps(const std::string& out, int steps) {
  const std::regex line("max parameter difference [0-9.e+-]+; (\\d+) steps");
  int ranks = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end;
       ++it) {
    EXPECT_EQ(std::stoi((*it)[1].str()), steps) << it->str();
    ++ranks;
  }
  return ranks;
}

TEST(TrainerPipelineTest, StagesMatchTheUnsplitModelOnTheWholeBatch) {
  for (int np : {2, 4}) {
    const int replicas = np / 2;
    testing::RunResult r =
        testing::RunProgram({KOLORUN_PATH, "-np", std::to_string(np),
                             MODEL_PARALLEL_WORKER_PATH, "pipeline", "2"},
                            {}, std::chrono::seconds(240));
    ASSERT_EQ(r.exit_code, 0) << "np " << np << "\n" << testing::Describe(r);
    EXPECT_EQ(RanksWithSteps(r.out, 2 * testing::kTrainingRows /
                                        (replicas * testing::kTrainingBatch)),
              np)
        << testing::Describe(r);
  }
}

TEST(TrainerParameterServerTest, SyncWorkersMatchOneWorkerWithTheWholeBatch) {
  for (int workers : {2, 3}) {
    testing::RunResult r = testing::RunProgram(
        {KOLORUN_PATH, "-np", std::to_string(workers), "--servers", "1",
         MODEL_PARALLEL_WORKER_PATH, "servers", "2"},
        {}, std::chrono::seconds(240));
    ASSERT_EQ(r.exit_code, 0) << "workers " << workers << "\n"
                              << testing::Describe(r);
    EXPECT_EQ(RanksWithSteps(r.out, 2 * testing::kTrainingRows /
                                        (workers * testing::kTrainingBatch)),
              workers)
        << testing::Describe(r);
  }
}

TEST(TrainerPipelineTest, BatchesSmallerThanTheMicroBatchesAreRefused) {
  testing::RunResult r = testing::RunProgram(
      {KOLORUN_PATH, "-np", "2", MODEL_PARALLEL_WORKER_PATH, "small-batches"},
      {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << testing::Describe(r);
  EXPECT_THAT(r.out, HasSubstr("batch size 2: the strategy needs batches of "
                               "at least 4 rows (a pipeline's micro-batches)"))
      << testing::Describe(r);
  EXPECT_THAT(r.out,
              HasSubstr("batch size 8: each of 1 training shards holds 2 "
                        "images, too few for one batch of at least 4 rows"))
      << testing::Describe(r);
}

TEST(TrainerPipelineTest, StagesThatDoNotDivideTheWorldAreRefused) {
  testing::RunResult r = testing::RunProgram(
      {KOLORUN_PATH, "-np", "3", MODEL_PARALLEL_WORKER_PATH, "pipeline", "1"},
      {}, std::chrono::seconds(120));
  EXPECT_NE(r.exit_code, 0) << testing::Describe(r);
  EXPECT_THAT(r.out,
              HasSubstr("pipeline of 2 stages does not divide the world of 3 "
                        "ranks"))
      << testing::Describe(r);
}

}  // namespace
}  // namespace kolo
