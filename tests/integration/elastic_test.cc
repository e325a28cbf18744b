// Elastic jobs under kolorun --elastic with faults injected into real
// processes (tests/integration/workers/elastic_worker.cc): workers killed
// mid-step, during a commit, rank 0, two at once, one frozen, one added,
// a host removed, too few left, and twenty resets in one process. Each
// training case must end with the parameters of an uninterrupted run of
// the same global batch, cover every sample of every step once, and lose
// no more steps than the commit interval.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testing/child_process.h"

namespace kolo {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunProgram;
using testing::RunResult;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = ELASTIC_WORKER_PATH;
constexpr int kCommitEvery = 5;

struct Final {
  long steps = 0;
  std::string checksum;
  std::vector<double> w;
};

// Every "final" line of the run, one per worker that finished.
std::vector<Final> Finals(const std::string& out) {
  std::vector<Final> finals;
  static const std::regex kLine(
      R"(worker \d+: final steps (\d+) checksum (\d+) w([ 0-9eE.+-]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), kLine), end; it != end;
       ++it) {
    Final final;
    final.steps = std::stol((*it)[1]);
    final.checksum = (*it)[2];
    std::istringstream values((*it)[3]);
    for (double v; values >> v;) final.w.push_back(v);
    finals.push_back(final);
  }
  return finals;
}

// The steps each reset lost, as the workers printed them.
std::vector<long> LostSteps(const std::string& out) {
  std::vector<long> lost;
  static const std::regex kLine(R"(reset \d+: .* lost (\d+)\))");
  for (std::sregex_iterator it(out.begin(), out.end(), kLine), end; it != end;
       ++it) {
    lost.push_back(std::stol((*it)[1]));
  }
  return lost;
}

std::vector<std::string> ElasticJob(int np, std::vector<std::string> flags,
                                    std::vector<std::string> worker_flags) {
  std::vector<std::string> argv = {kKolorun, "--elastic", "-np",
                                   std::to_string(np)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(kWorker);
  std::vector<std::string> base = {
      "--steps",        "40",
      "--global-batch", "24",
      "--commit-every", std::to_string(kCommitEvery),
      "--step-ms",      "10"};
  argv.insert(argv.end(), base.begin(), base.end());
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  return argv;
}

class ElasticTest : public ::testing::Test {
 protected:
  // The uninterrupted run every faulty one is compared with: the same
  // global batch on 4 workers.
  static void SetUpTestSuite() {
    RunResult r =
        RunProgram(ElasticJob(4, {}, {}), {}, std::chrono::seconds(120));
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    std::vector<Final> finals = Finals(r.out);
    ASSERT_EQ(finals.size(), 4u) << Describe(r);
    reference_ = new Final(finals[0]);
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }

  // The job finished, every finishing worker holds the reference's
  // parameters (to the rounding of sums in another order) and covered the
  // same samples, and no reset lost more than a commit interval.
  void ExpectSameTraining(const RunResult& r, size_t workers_at_end) {
    ASSERT_NE(reference_, nullptr);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    std::vector<Final> finals = Finals(r.out);
    ASSERT_EQ(finals.size(), workers_at_end) << Describe(r);
    for (const Final& final : finals) {
      EXPECT_EQ(final.steps, reference_->steps);
      // Sums of the sample indices, exact in double: each step's samples
      // were covered once, by exactly the workers of its round.
      EXPECT_EQ(final.checksum, reference_->checksum) << Describe(r);
      ASSERT_EQ(final.w.size(), reference_->w.size());
      for (size_t j = 0; j < final.w.size(); ++j) {
        EXPECT_NEAR(final.w[j], reference_->w[j],
                    1e-12 * (1 + std::fabs(reference_->w[j])))
            << "w[" << j << "]\n"
            << Describe(r);
      }
    }
    for (long lost : LostSteps(r.out)) EXPECT_LE(lost, kCommitEvery);
  }

  static Final* reference_;
};

Final* ElasticTest::reference_ = nullptr;

TEST_F(ElasticTest, AWorkerKilledMidStepIsReplacedAndTheResultIsTheSame) {
  RunResult r = RunProgram(ElasticJob(4, {}, {"--kill", "17:1"}), {},
                           std::chrono::seconds(120));
  EXPECT_THAT(r.err, HasSubstr("worker 1 (rank 1 of round 0 on localhost) was "
                               "killed by signal 9 (Killed)"));
  // The survivors name the dead rank from the round's failure news.
  EXPECT_THAT(r.err, HasSubstr("rank 1 is gone"));
  EXPECT_THAT(r.out, HasSubstr("lost 2)"));
  ExpectSameTraining(r, 4);
}

TEST_F(ElasticTest, KillingRankZeroLosesNoRendezvous) {
  RunResult r = RunProgram(ElasticJob(4, {}, {"--kill", "13:0"}), {},
                           std::chrono::seconds(120));
  EXPECT_THAT(r.err, HasSubstr("worker 0 (rank 0 of round 0"));
  // A survivor is rank 0 now, and syncs the others.
  EXPECT_THAT(r.out, HasSubstr("rank 0 of 4, resuming at step 10"));
  ExpectSameTraining(r, 4);
}

TEST_F(ElasticTest, AWorkerKilledDuringACommitLeavesEveryRankConsistent) {
  RunResult r = RunProgram(ElasticJob(4, {}, {"--kill-in-commit", "10:2"}), {},
                           std::chrono::seconds(120));
  EXPECT_THAT(r.err, HasSubstr("worker 2 (rank 2 of round 0"));
  ExpectSameTraining(r, 4);
}

TEST_F(ElasticTest, TwoWorkersKilledAtOnce) {
  RunResult r = RunProgram(
      ElasticJob(4, {"--min-np", "2"}, {"--kill", "12:1", "--kill", "12:3"}),
      {}, std::chrono::seconds(120));
  EXPECT_THAT(r.err, HasSubstr("worker 1 (rank 1 of round 0"));
  EXPECT_THAT(r.err, HasSubstr("worker 3 (rank 3 of round 0"));
  // Two failures on one host blacklist it: the job goes on with what it has.
  EXPECT_THAT(r.err, HasSubstr("host localhost failed 2 times"));
  std::vector<Final> finals = Finals(r.out);
  ASSERT_GE(finals.size(), 2u) << Describe(r);
  ExpectSameTraining(r, finals.size());
}

TEST_F(ElasticTest, AFrozenWorkerIsEvictedByHeartbeatNotByTimeout) {
  // The collectives' own timeout is 30 s; the heartbeat's is 2 s.
  RunResult r = RunProgram(
      ElasticJob(4, {"--heartbeat-timeout", "2"}, {"--freeze", "12:2"}), {},
      std::chrono::seconds(120));
  EXPECT_THAT(r.err, HasSubstr("worker 2 (rank 2 of round 0 on localhost) "
                               "sent no heartbeat for"));
  EXPECT_LT(r.seconds, 20) << Describe(r);
  ExpectSameTraining(r, 4);
}

TEST_F(ElasticTest, AnAddedWorkerJoinsAtACommitWithoutLosingAStep) {
  RunResult r = RunProgram(ElasticJob(3, {"--max-np", "4"}, {}), {},
                           std::chrono::seconds(120));
  EXPECT_THAT(r.err, HasSubstr("round 1: 4 workers (rank order: 0 1 2 3)"));
  EXPECT_THAT(r.err, Not(HasSubstr("killed")));
  std::vector<long> lost = LostSteps(r.out);
  ASSERT_FALSE(lost.empty()) << Describe(r);
  for (long steps : lost) EXPECT_EQ(steps, 0) << Describe(r);
  ExpectSameTraining(r, 4);
}

TEST_F(ElasticTest, AHostRemovedByTheDiscoveryScriptLeavesAtACommit) {
  // Two "hosts" of this machine; the script drops 127.0.0.1 from its
  // second run on.
  const std::string counter =
      ::testing::TempDir() + "kolo_discovery_" + std::to_string(getpid());
  std::remove(counter.c_str());
  const std::string script =
      "n=$(cat " + counter + " 2>/dev/null || echo 0); echo $((n+1)) > " +
      counter +
      "; echo localhost:3; if [ $n -lt 1 ]; then echo 127.0.0.1:1; "
      "fi";
  std::vector<std::string> argv =
      ElasticJob(4, {"--host-discovery-script", script, "--min-np", "3"}, {});
  // Long enough for the script to drop the host mid-training.
  argv.back() = "60";  // --step-ms
  RunResult r = RunProgram(argv, {}, std::chrono::seconds(120));
  std::remove(counter.c_str());
  EXPECT_THAT(r.err, HasSubstr("host 127.0.0.1 is gone"));
  EXPECT_THAT(r.err, HasSubstr("round 1: 3 workers"));
  EXPECT_THAT(r.err, HasSubstr("was removed from the job"));
  EXPECT_THAT(r.err, Not(HasSubstr("killed")));
  ExpectSameTraining(r, 3);
}

TEST_F(ElasticTest, TooFewWorkersWaitForTheElasticTimeoutThenFailSayingSo) {
  // The replacement crashes at start, twice, and blacklists the host.
  RunResult r =
      RunProgram(ElasticJob(2, {"--min-np", "2", "--elastic-timeout", "3"},
                            {"--kill", "12:1", "--crash-from-worker", "2"}),
                 {}, std::chrono::seconds(120));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("fewer than --min-np 2; waiting up to 3 s"));
  EXPECT_THAT(r.err, HasSubstr("after waiting 3 s (--elastic-timeout), fewer "
                               "than --min-np 2; stopping the job"));
  EXPECT_LT(r.seconds, 20) << Describe(r);
}

TEST_F(ElasticTest, AJobWhoseWorkersCannotStartFailsAtOnce) {
  RunResult r = RunProgram(ElasticJob(3, {}, {"--crash-from-worker", "0"}), {},
                           std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 7) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("before the first round formed"));
  EXPECT_THAT(r.err, HasSubstr("crashing at start as told"));
  EXPECT_LT(r.seconds, 20) << Describe(r);
}

TEST_F(ElasticTest, TooManyResetsEndTheJob) {
  RunResult r =
      RunProgram(ElasticJob(3, {"--min-np", "1", "--reset-limit", "1"},
                            {"--kill", "7:1", "--kill", "16:2"}),
                 {}, std::chrono::seconds(120));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("more than --reset-limit 1"));
}

TEST_F(ElasticTest, TwentyResetsInOneProcessLeakNothing) {
  // Workers from 2 on join (a reset) and die after one step (another),
  // so workers 0 and 1 go through resets until they have counted twenty;
  // they compare their threads, descriptors and shm mappings at the first
  // and the twentieth, and the job ends ten steps later. (Two deaths
  // blacklist the host for the one-second cooldown, so some rounds have two
  // workers.)
  RunResult r = RunProgram({kKolorun,
                            "--elastic",
                            "-np",
                            "2",
                            "--max-np",
                            "3",
                            "--min-np",
                            "2",
                            "--blacklist-cooldown",
                            "1",
                            kWorker,
                            "--global-batch",
                            "24",
                            "--commit-every",
                            "2",
                            "--step-ms",
                            "2",
                            "--exit-after-first-step-from",
                            "2",
                            "--exit-after-first-step-below",
                            "40",
                            "--count-resources-to",
                            "20"},
                           {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int worker : {0, 1}) {
    EXPECT_THAT(r.out, HasSubstr("worker " + std::to_string(worker) +
                                 ": 20 resets clean"))
        << Describe(r);
  }
  EXPECT_THAT(r.out, Not(HasSubstr("LEAKED")));
}

}  // namespace
}  // namespace kolo
