// kolo-bench soak's pure half: the fault schedule from a seed, the garbage
// bytes, the reading of a job's output (recoveries, the named cause, the
// parameters' check) and the tally's counts, problems and record.
#include "soak_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace kolo::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const std::vector<std::string> kHosts = {"kolosoak7-h1", "kolosoak7-h2",
                                         "kolosoak7-h3"};

TEST(PlanFaultsTest, TheSameSeedGivesTheSameSchedule) {
  const std::vector<PlannedFault> a = PlanFaults(31, 600, 20);
  const std::vector<PlannedFault> b = PlanFaults(31, 600, 20);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at_seconds, b[i].at_seconds);
    EXPECT_EQ(a[i].kind, b[i].kind);
    EXPECT_EQ(a[i].pick, b[i].pick);
    EXPECT_EQ(a[i].duration, b[i].duration);
    EXPECT_EQ(a[i].bytes_seed, b[i].bytes_seed);
  }
  const std::vector<PlannedFault> c = PlanFaults(32, 600, 20);
  EXPECT_TRUE(c.size() != a.size() || c[0].at_seconds != a[0].at_seconds);
}

TEST(PlanFaultsTest, FaultsAreOrderedInsideTheSoakWithBoundedDurations) {
  const std::vector<PlannedFault> faults = PlanFaults(7, 600, 20);
  ASSERT_FALSE(faults.empty());
  double last = 0;
  for (const PlannedFault& f : faults) {
    EXPECT_GE(f.at_seconds, last);
    EXPECT_LT(f.at_seconds, 600);
    EXPECT_GE(f.duration, 1.0);
    EXPECT_LE(f.duration, 8.0);
    last = f.at_seconds;
  }
}

TEST(PlanFaultsTest, ArrivalsHaveTheMeanGapAndEveryKindComes) {
  // 100,000 s at one fault per 10 s: 10,000 expected, a Poisson count
  // whose standard deviation is 100, so 5% either way is 5 deviations.
  const std::vector<PlannedFault> faults = PlanFaults(1, 100000, 10);
  EXPECT_GT(faults.size(), 9500u);
  EXPECT_LT(faults.size(), 10500u);
  std::vector<int> per_kind(kFaultKinds, 0);
  for (const PlannedFault& f : faults) ++per_kind[static_cast<int>(f.kind)];
  for (int kind = 0; kind < kFaultKinds; ++kind) {
    // A fifth each: 2,000, standard deviation 40.
    EXPECT_GT(per_kind[kind], 1800) << FaultName(static_cast<FaultKind>(kind));
    EXPECT_LT(per_kind[kind], 2200) << FaultName(static_cast<FaultKind>(kind));
  }
}

TEST(PlanFaultsTest, ASoakShorterThanTheFirstGapHasNoFaults) {
  EXPECT_THAT(PlanFaults(3, 1e-9, 20), IsEmpty());
}

TEST(GarbageBytesTest, DeterministicSizedAndSometimesAnAbsurdHeader) {
  EXPECT_EQ(GarbageBytes(9, 100), GarbageBytes(9, 100));
  EXPECT_NE(GarbageBytes(9, 100), GarbageBytes(10, 100));
  EXPECT_THAT(GarbageBytes(5, 0), IsEmpty());
  EXPECT_THAT(GarbageBytes(5, 33), SizeIs(33));
  // seed % 3 == 0: sixteen 0xff; == 1: the largest int64, little-endian.
  EXPECT_EQ(GarbageBytes(3, 40).substr(0, 16), std::string(16, '\xff'));
  EXPECT_EQ(GarbageBytes(4, 40).substr(0, 8),
            std::string(7, '\xff') + std::string(1, '\x7f'));
}

// What kolo-train --elastic under kolorun --elastic printed around two
// resets: one that lost 3 steps, one (a worker joining) that lost none.
constexpr const char* kElasticOutput =
    "kolorun: round 0: 2 workers (rank order: 0 1)\n"
    "kolorun: worker 1 on kolosoak7-h2 was killed by signal 9 (Killed)\n"
    "[w0]<stdout>: kolo-train: reset 1: 1 workers at epoch 2 step 175 "
    "(reached 432, lost 3); global batch 64 stays, up to 64 images per "
    "worker\n"
    "kolorun: round 2: 2 workers (rank order: 0 2)\n"
    "[w0]<stdout>: kolo-train: reset 2: 2 workers at epoch 2 step 255 "
    "(reached 511, lost 0); global batch 64 stays, up to 32 images per "
    "worker\n"
    "[w0]<stdout>: kolo-train: --elastic: done after 2 resets; test "
    "accuracy 83.20%\n";

TEST(ReadRecoveriesTest, CountsResetLinesAndSumsTheStepsLost) {
  const Recoveries r = ReadRecoveries(kElasticOutput);
  EXPECT_EQ(r.rounds, 2);
  EXPECT_EQ(r.steps_lost, 3);
  EXPECT_EQ(
      ReadRecoveries("kolo-train: --elastic: done after 0 resets\n").rounds, 0);
}

TEST(NamedCauseTest, KolorunsVerdictOnAKilledRankComesFirst) {
  const std::string output =
      "kolorun: network: kolosoak7-h2 eth1 10.1.0.2, kolosoak7-h3 eth1 "
      "10.1.0.3; store on eth1 10.1.0.1:4000\n"
      "[0]<stderr>: kolo-train: rank 0: rank 1 is gone (process exited or "
      "lost its connection)\n"
      "kolorun: rank 1 on kolosoak7-h3 was killed by signal 9 (Killed)\n";
  EXPECT_EQ(NamedCause(output, kHosts),
            "kolorun: rank 1 on kolosoak7-h3 was killed by signal 9 (Killed)");
}

TEST(NamedCauseTest, AWorkerNamingItsSilentPeerBeatsKolorunsExitLine) {
  const std::string output =
      "kolorun: network: kolosoak7-h2 eth1 10.1.0.2; store on eth1 "
      "10.1.0.1:4000\n"
      "[0]<stderr>: kolo-train: epoch 2 batch 90: rank 0: negotiation: rank "
      "1 (10.1.0.3:38178) sent nothing for 5000 ms during allgatherv\n"
      "kolorun: rank 0 on kolosoak7-h2 exited with code 1\n";
  EXPECT_THAT(NamedCause(output, kHosts), HasSubstr("rank 1 (10.1.0.3:38178)"));
}

TEST(NamedCauseTest, WarningsOfWhatTheJobSurvivedAreNoCause) {
  const std::string output =
      "[0]<stderr>: kolo rank 0 warning: rank 0 refused a connection from "
      "10.1.0.3:50788: not a kolo tcp hello\n"
      "kolo warning: store: refused a client from 10.1.0.3:50878: no valid "
      "hello\n"
      "[0]<stderr>: kolo-train: epoch 6 batch 145: rank 0: negotiation: rank "
      "1 (10.1.0.3:50796) sent nothing for 5000 ms during allgatherv\n";
  EXPECT_THAT(NamedCause(output, kHosts),
              HasSubstr("rank 1 (10.1.0.3:50796) sent nothing"));
}

TEST(NamedCauseTest, APreflightFailureNamesTheHostOnItsIndentedLine) {
  const std::string output =
      "kolorun: the preflight failed; nothing was started:\n"
      "    kolosoak7-h3: no interface up with an IPv4 address other than "
      "loopback\n";
  EXPECT_EQ(NamedCause(output, kHosts),
            "kolorun: the preflight failed; nothing was started: "
            "kolosoak7-h3: no interface up with an IPv4 address other than "
            "loopback");
}

TEST(NamedCauseTest, InformationAloneNamesNothing) {
  EXPECT_EQ(NamedCause("kolorun: network: kolosoak7-h2 eth1 10.1.0.2\n"
                       "[0]<stderr>: Segmentation fault\n",
                       kHosts),
            "");
}

TEST(ReadJobEndingTest, StaticSuccessNeedsTheEqualChecksumLine) {
  const std::string equal =
      "[0]<stdout>: # parameter checksum 0xaf6f5d24ebfeb383 (equal on all "
      "ranks)\n";
  JobEnding e = ReadJobEnding("static", 3, 12.5, 0, false, true, equal, kHosts);
  EXPECT_EQ(e.outcome, JobOutcome::kSucceeded);
  EXPECT_TRUE(e.parameters_equal);
  EXPECT_EQ(e.generation, 3);
  e = ReadJobEnding("static", 4, 12.5, 0, false, true, "no line\n", kHosts);
  EXPECT_EQ(e.outcome, JobOutcome::kSucceeded);
  EXPECT_FALSE(e.parameters_equal);
}

TEST(ReadJobEndingTest, ElasticSuccessNeedsItsReport) {
  JobEnding e =
      ReadJobEnding("elastic", 1, 30, 0, false, true, kElasticOutput, kHosts);
  EXPECT_TRUE(e.parameters_equal);
  EXPECT_EQ(e.recoveries.rounds, 2);
  EXPECT_EQ(e.recoveries.steps_lost, 3);
  e = ReadJobEnding("elastic", 2, 30, 0, false, false, kElasticOutput, kHosts);
  EXPECT_FALSE(e.parameters_equal);
}

TEST(ReadJobEndingTest, FailuresAndHangs) {
  JobEnding e = ReadJobEnding(
      "static", 1, 3, 137, false, false,
      "kolorun: rank 1 on kolosoak7-h2 was killed by signal 9 (Killed)\n",
      kHosts);
  EXPECT_EQ(e.outcome, JobOutcome::kFailed);
  EXPECT_THAT(e.cause, HasSubstr("rank 1 on kolosoak7-h2"));
  e = ReadJobEnding("static", 2, 300, 137, true, false, "", kHosts);
  EXPECT_EQ(e.outcome, JobOutcome::kHung);
  EXPECT_FALSE(e.parameters_equal);
}

TEST(SoakTallyTest, CountsFaultsAndJobsAndPassesWhenAllIsWell) {
  SoakTally tally;
  tally.RecordFault(FaultKind::kKill, true);
  tally.RecordFault(FaultKind::kKill, true);
  tally.RecordFault(FaultKind::kGarbageEngine, false);
  tally.RecordFault(FaultKind::kLinkDownUp, true);
  tally.RecordJob(
      ReadJobEnding("elastic", 1, 30, 0, false, true, kElasticOutput, kHosts));
  tally.RecordJob(ReadJobEnding(
      "static", 1, 3, 137, false, false,
      "kolorun: rank 1 on kolosoak7-h2 was killed by signal 9 (Killed)\n",
      kHosts));
  EXPECT_EQ(tally.injected(FaultKind::kKill), 2);
  EXPECT_EQ(tally.skipped(FaultKind::kGarbageEngine), 1);
  EXPECT_EQ(tally.injected_total(), 3);
  EXPECT_EQ(tally.hangs(), 0);
  EXPECT_EQ(tally.unnamed_failures(), 0);
  EXPECT_THAT(tally.Problems(), IsEmpty());

  const nlohmann::json j = tally.ToJson();
  EXPECT_EQ(j["faults_injected"], 3);
  EXPECT_EQ(j["faults"]["kill"]["injected"], 2);
  EXPECT_EQ(j["faults"]["garbage_engine"]["skipped"], 1);
  EXPECT_EQ(j["totals"]["elastic"]["recoveries"], 2);
  EXPECT_EQ(j["totals"]["elastic"]["steps_lost"], 3);
  EXPECT_EQ(j["totals"]["elastic"]["parameters_equal"], 1);
  EXPECT_EQ(j["totals"]["static"]["failed_named"], 1);
  EXPECT_EQ(j["leftovers"]["processes"], 0);
  EXPECT_THAT(j["jobs"], SizeIs(2));

  const std::vector<std::string> lines = tally.TableLines();
  EXPECT_THAT(lines[1], HasSubstr("kill -9"));
  bool elastic_row = false;
  for (const std::string& line : lines)
    elastic_row = elastic_row || line.rfind("elastic      1", 0) == 0;
  EXPECT_TRUE(elastic_row);
}

TEST(SoakTallyTest, HangsLeftoversAndUnnamedFailuresAreProblems) {
  SoakTally tally;
  tally.RecordJob(
      ReadJobEnding("static", 1, 300, 137, true, false, "", kHosts));
  tally.RecordJob(ReadJobEnding("static", 2, 4, 1, false, false,
                                "[0]<stderr>: Segmentation fault\n", kHosts));
  tally.RecordJob(
      ReadJobEnding("static", 3, 20, 0, false, true, "no checksum\n", kHosts));
  Leftovers left;
  left.shm_segments = 2;
  tally.SetLeftovers(left);
  EXPECT_EQ(tally.hangs(), 1);
  EXPECT_EQ(tally.unnamed_failures(), 1);
  const std::vector<std::string> problems = tally.Problems();
  ASSERT_THAT(problems, SizeIs(4));
  EXPECT_THAT(problems[0], HasSubstr("static job 1 hung"));
  EXPECT_THAT(problems[1], HasSubstr("without naming"));
  EXPECT_THAT(problems[2], HasSubstr("without showing its parameters equal"));
  EXPECT_THAT(problems[3], HasSubstr("2 shm segments"));
}

}  // namespace
}  // namespace kolo::bench
