// kolo::torch::ElasticTrainer under kolorun --elastic, real processes over
// the default engine (elastic_trainer_worker.cc): without failures, N
// workers of batch b reach the parameters one process reaches with batch
// N·b; with a worker killed mid-run, the survivors go back to the last
// commit, redo exactly the steps since it, and still reach those
// parameters. Every worker's pid is checked gone afterwards, with no shm
// segment of its own left.
#include "kolo/elastic_trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "testing/child_process.h"
#include "torch/training/training_testing.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;
using testing::kTrainingBatch;
using testing::kTrainingRows;

// What one finishing worker printed last.
struct Final {
  double difference = 0;
  int64_t global_batch = 0;
  int64_t steps = 0;
  int resets = 0;
  int64_t lost = 0;
};

std::vector<Final> Finals(const std::string& out) {
  static const std::regex kLine(
      R"(final: max parameter difference ([0-9.e+-]+); global batch (\d+); )"
      R"(ran (\d+) steps; resets (\d+); lost (\d+))");
  std::vector<Final> finals;
  for (std::sregex_iterator it(out.begin(), out.end(), kLine), end; it != end;
       ++it) {
    finals.push_back({std::stod((*it)[1]), std::stoll((*it)[2]),
                      std::stoll((*it)[3]), std::stoi((*it)[4]),
                      std::stoll((*it)[5])});
  }
  return finals;
}

// The workers' pids that are still alive or left a segment in /dev/shm
// (transport/shm_segments.h names them /kolo-<pid>-...).
std::vector<std::string> LeftBehind(const std::string& out) {
  static const std::regex kPid(R"(pid (\d+))");
  std::vector<std::string> left;
  for (std::sregex_iterator it(out.begin(), out.end(), kPid), end; it != end;
       ++it) {
    const std::string pid = (*it)[1];
    if (kill(std::stoi(pid), 0) == 0 || errno != ESRCH)
      left.push_back("process " + pid);
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("kolo-" + pid + "-", 0) == 0) left.push_back(name);
    }
  }
  return left;
}

testing::RunResult RunElasticJob(int np, std::vector<std::string> args) {
  std::vector<std::string> argv = {KOLORUN_PATH,
                                   "--elastic",
                                   "-np",
                                   std::to_string(np),
                                   "--min-np",
                                   "2",
                                   ELASTIC_TRAINER_WORKER_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunProgram(argv, {}, std::chrono::seconds(120));
}

TEST(ElasticTrainerTest, NWorkersMatchOneProcessWithTheWholeBatch) {
  for (int np : {2, 3}) {
    testing::RunResult r =
        RunElasticJob(np, {"2", std::to_string(kTrainingBatch), "4"});
    ASSERT_EQ(r.exit_code, 0) << "np " << np << "\n" << testing::Describe(r);
    const std::vector<Final> finals = Finals(r.out);
    ASSERT_EQ(finals.size(), static_cast<size_t>(np)) << testing::Describe(r);
    for (const Final& f : finals) {
      EXPECT_LE(f.difference, 1e-5);
      EXPECT_EQ(f.global_batch, np * kTrainingBatch);
      EXPECT_EQ(f.steps, 2 * kTrainingRows / (np * kTrainingBatch));
      EXPECT_EQ(f.resets, 0);
    }
    EXPECT_THAT(LeftBehind(r.out), ::testing::IsEmpty());
  }
}

TEST(ElasticTrainerTest, AKilledWorkerCostsTheStepsSinceTheLastCommitOnly) {
  // G = 3 x 4 = 12: 8 steps an epoch, 24 in all. Commits come every 3
  // steps and at each epoch's end: after global steps 3, 6, 8, 11, 14...
  // Rank 1 dies before step 13, so the survivors, having done 13 steps,
  // resume at the commit after step 11 and redo two.
  testing::RunResult r = RunElasticJob(3, {"3", "4", "3", "1", "13"});
  ASSERT_EQ(r.exit_code, 0) << testing::Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rank 1 kills itself at step 13"));
  EXPECT_THAT(r.err, HasSubstr("was killed by signal 9"));
  EXPECT_THAT(r.out,
              HasSubstr("resumed at global step 11 (reached 13, lost 2)"))
      << testing::Describe(r);
  const std::vector<Final> finals = Finals(r.out);
  ASSERT_GE(finals.size(), 2u) << testing::Describe(r);
  int survivors = 0;
  for (const Final& f : finals) {
    EXPECT_LE(f.difference, 1e-5) << testing::Describe(r);
    EXPECT_EQ(f.global_batch, 12);
    if (f.resets == 0) continue;  // a replacement, which joined later
    ++survivors;
    EXPECT_EQ(f.lost, 2);
    EXPECT_EQ(f.steps, 24 + f.lost);
  }
  EXPECT_EQ(survivors, 2) << testing::Describe(r);
  EXPECT_THAT(LeftBehind(r.out), ::testing::IsEmpty());
}

TEST(ElasticTrainerTest, AReplacementThatJoinsAfterTheLastEpochEndsAlike) {
  // Rank 1 dies before step 23 of 24; the survivors go back to the commit
  // after step 22 and pause there 3 s, so the replacement registers before
  // the commit that ends the last epoch and joins a round with no epoch
  // left. Every worker must still end through the same collectives (the
  // last epoch's evaluation is committed state, not each process's own
  // record), or they wait on each other until the job's limit.
  testing::RunResult r = RunElasticJob(3, {"3", "4", "3", "1", "23", "23"});
  ASSERT_EQ(r.exit_code, 0) << testing::Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rank 1 kills itself at step 23"));
  EXPECT_THAT(r.out, HasSubstr("reset 2: 3 workers, resumed at global step 24"))
      << testing::Describe(r);
  const std::vector<Final> finals = Finals(r.out);
  ASSERT_EQ(finals.size(), 3u) << testing::Describe(r);
  for (const Final& f : finals) {
    EXPECT_LE(f.difference, 1e-5) << testing::Describe(r);
  }
  EXPECT_THAT(LeftBehind(r.out), ::testing::IsEmpty());
}

}  // namespace
}  // namespace kolo
