// Collectives in real processes over real transports: kolorun starts the
// ranks, kolo's tcp engine and Gloo talk TCP over loopback, MPI uses
// OpenMPI's own transports, shm maps the ranks' segments in /dev/shm.
// Cases run only on the engines this build has (testing/engines.h); jobs
// that mpirun starts are in mpirun_test.cc, built only with MPI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "testing/child_process.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using testing::BuiltEngines;
using testing::CountMatches;
using testing::Describe;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::OnBuiltEngines;
using testing::RunProgram;
using testing::RunResult;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = COLLECTIVES_WORKER_PATH;

struct MatrixCase {
  const char* backend;
  int np;
};

void PrintTo(const MatrixCase& c, std::ostream* os) {
  *os << c.backend << " np " << c.np;
}

class CollectivesMatrixTest : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(CollectivesMatrixTest, EveryCollectiveTypeAndCountIsCorrect) {
  const MatrixCase& c = GetParam();
  // Counts 0, 1, 7 and 2^18 + 3 of every type. 64 KiB shm areas keep the
  // large count at many rounds per collective on shm, as 2^20 + 3 does
  // with the default 1 MiB, for a quarter of the data.
  RunResult r = RunProgram(
      {kKolorun, "-np", std::to_string(c.np), "--backend", c.backend,
       "--timeout", "60", "--env", "KOLO_SHM_AREA_BYTES=65536", kWorker,
       "matrix", "0", "1", "7", std::to_string((1 << 18) + 3)},
      {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(
      CountMatches(r.out, "all collectives correct in 32 type/count cases"),
      c.np)
      << Describe(r);
  for (int rank = 0; rank < c.np; ++rank) {
    EXPECT_THAT(r.out,
                HasSubstr("[" + std::to_string(rank) + "]<stdout>: rank " +
                          std::to_string(rank) + " of " + std::to_string(c.np) +
                          " (" + c.backend + ")"));
  }
}

// An odd world in real processes only for MPI, which cannot run ranks as
// threads: backend_conformance_test runs shm, Gloo and tcp with 1 to 4
// ranks as threads, every collective and type, under both sanitizers too.
INSTANTIATE_TEST_SUITE_P(
    Worlds, CollectivesMatrixTest,
    ::testing::ValuesIn(OnBuiltEngines(
        {MatrixCase{"gloo", 1}, MatrixCase{"gloo", 2}, MatrixCase{"gloo", 4},
         MatrixCase{"mpi", 1}, MatrixCase{"mpi", 2}, MatrixCase{"mpi", 3},
         MatrixCase{"mpi", 4}, MatrixCase{"shm", 1}, MatrixCase{"shm", 2},
         MatrixCase{"shm", 4}, MatrixCase{"tcp", 1}, MatrixCase{"tcp", 2},
         MatrixCase{"tcp", 4}},
        &MatrixCase::backend)),
    [](const ::testing::TestParamInfo<MatrixCase>& info) {
      return std::string(info.param.backend) + "_np" +
             std::to_string(info.param.np);
    });

// Four processes on this machine play two hosts of two ranks each: the
// host identity of rank r is "host<r % 2>", so hosts interleave ranks and
// the topology cannot come from rank blocks.
struct HierarchicalCase {
  const char* backend;
  const char*
      hierarchical;  // KOLO_HIERARCHICAL_ALLREDUCE, or "" for the default
};

void PrintTo(const HierarchicalCase& c, std::ostream* os) {
  *os << c.backend << " hierarchical=" << c.hierarchical;
}

class HierarchicalTest : public ::testing::TestWithParam<HierarchicalCase> {};

TEST_P(HierarchicalTest, TwoHostsOfTwoRanksGetEveryCollectiveRight) {
  const HierarchicalCase& c = GetParam();
  std::map<std::string, std::string> env;
  if (*c.hierarchical) env["KOLO_HIERARCHICAL_ALLREDUCE"] = c.hierarchical;
  RunResult r =
      RunProgram({kKolorun, "-np", "4", "--backend", c.backend, "--timeout",
                  "60", "/bin/sh", "-c",
                  "KOLO_HOST_ID=host$(( ${KOLO_RANK:-$OMPI_COMM_WORLD_RANK} % "
                  "2 )) exec \"$0\" matrix 0 1 7 "
                  "300003",
                  kWorker},
                 env, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(
      CountMatches(r.out, "all collectives correct in 32 type/count cases"), 4)
      << Describe(r);
  const bool on = std::string(c.hierarchical) != "0";
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(
        r.out,
        HasSubstr("rank " + std::to_string(rank) + ": host " +
                  std::to_string(rank % 2) + " of 2, local rank " +
                  std::to_string(rank / 2) + " of 2, hierarchical allreduce " +
                  (on ? "on" : "off")))
        << Describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    TwoHosts, HierarchicalTest,
    ::testing::ValuesIn(OnBuiltEngines(
        {HierarchicalCase{"shm", ""}, HierarchicalCase{"gloo", ""},
         HierarchicalCase{"mpi", ""}, HierarchicalCase{"tcp", ""},
         HierarchicalCase{"shm", "0"}},
        &HierarchicalCase::backend)),
    [](const ::testing::TestParamInfo<HierarchicalCase>& info) {
      return std::string(info.param.backend) +
             (*info.param.hierarchical
                  ? std::string("_hierarchical") + info.param.hierarchical
                  : std::string("_default"));
    });

class CollectivesErrorTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CollectivesErrorTest, MismatchedCountsGiveTheNamedErrorOnEveryRank) {
  RunResult r = RunProgram(
      {kKolorun, "-np", "3", "--backend", GetParam(), kWorker, "mismatch"}, {},
      std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* rank : {"0", "1", "2"}) {
    EXPECT_THAT(r.out,
                HasSubstr(std::string("[") + rank + "]<stdout>: rank " + rank +
                          ": mismatch: synchronous call #1: tensor "
                          "'kolo.sync': ranks disagree on the "
                          "element count: ranks 0,2 have 10; rank 1 has 12"))
        << Describe(r);
  }
  EXPECT_EQ(CountMatches(r.out, "recovered after the mismatch"), 3);
}

TEST_P(CollectivesErrorTest, InitAfterShutdownStartsAFreshJob) {
  RunResult r = RunProgram(
      {kKolorun, "-np", "2", "--backend", GetParam(), kWorker, "reinit"}, {},
      std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(CountMatches(r.out, "three rounds of init and shutdown"), 2)
      << Describe(r);
}

INSTANTIATE_TEST_SUITE_P(Backends, CollectivesErrorTest,
                         ::testing::ValuesIn(BuiltEngines({"gloo", "mpi", "shm",
                                                           "tcp"})));

// The /dev/shm entries named like kolo's segments (/kolo-<creator pid>-...)
// whose creator no longer exists: what a job that died would leak.
std::vector<std::string> OrphanedSegments() {
  std::vector<std::string> orphans;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (std::sscanf(name.c_str(), "kolo-%d-", &pid) != 1) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) orphans.push_back(name);
  }
  return orphans;
}

class CollectivesFailureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CollectivesFailureTest, SurvivorsNameTheRankThatDied) {
  RunResult r = RunProgram({kKolorun, "-np", "3", "--backend", GetParam(),
                            "--timeout", "20", kWorker, "die"},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 15) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("rank 1")) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("signal 9")) << Describe(r);
  // Ranks 0 and 2 report the failure themselves, naming rank 1, well before
  // the 20 s timeout.
  for (const char* rank : {"0", "2"}) {
    EXPECT_TRUE(std::regex_search(
        r.err,
        std::regex(std::string("\\[") + rank + "\\]<stderr>: rank " + rank +
                   ": step \\d+: (peer failure|timeout): "
                   "synchronous call #\\d+: rank " +
                   rank + ": rank 1 is gone")))
        << Describe(r);
  }
  EXPECT_THAT(OrphanedSegments(), ::testing::IsEmpty());
}

TEST(JobFailureTest, HierarchicalSurvivorsNameTheRankThatDied) {
  // Two hosts of two ranks; rank 1 leads the second host.
  RunResult r = RunProgram(
      {kKolorun, "-np", "4", "--timeout", "20", "/bin/sh", "-c",
       "KOLO_HOST_ID=host$((KOLO_RANK % 2)) exec \"$0\" die", kWorker},
      {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 15) << Describe(r);
  for (const char* rank : {"0", "2", "3"}) {
    EXPECT_TRUE(std::regex_search(
        r.err,
        std::regex(std::string("\\[") + rank + "\\]<stderr>: rank " + rank +
                   ": step \\d+: (peer failure|timeout): synchronous call "
                   "#\\d+: rank " +
                   rank + ": rank 1 is gone")))
        << Describe(r);
  }
  EXPECT_THAT(OrphanedSegments(), ::testing::IsEmpty());
}

// On shm the ranks lease after the first call. Rank 0's runtime, idle in
// the lease, notices rank 1's death itself; the next call reports it.
TEST(JobFailureTest, ARankThatDiesBetweenCallsIsNamedAtTheNextCall) {
  RunResult r = RunProgram({kKolorun, "-np", "2", "--backend", "shm",
                            "--timeout", "20", kWorker, "die-between-calls"},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 15) << Describe(r);
  EXPECT_THAT(
      r.err,
      HasSubstr(
          "[0]<stderr>: rank 0: peer failure: synchronous call #2: rank 0: "
          "rank 1 is gone"))
      << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("shm lease: rank 1 (pid ")) << Describe(r);
  EXPECT_THAT(OrphanedSegments(), ::testing::IsEmpty());
}

// Rank 1 never makes the call rank 0 waits in: it sleeps or is stopped.
// In the "-after-a-call" scenarios both ranks first make one call, so on
// shm rank 0 then waits in a direct-path lease instead of the runtime;
// either way the job ends the same, with the same errors.
struct StuckPeerCase {
  const char* backend;
  const char* scenario;
  const char* call;  // rank 0's call that waits
  bool in_lease;
};

void PrintTo(const StuckPeerCase& c, std::ostream* os) {
  *os << c.backend << " " << c.scenario;
}

std::string StuckPeerName(const ::testing::TestParamInfo<StuckPeerCase>& info) {
  std::string name =
      std::string(info.param.backend) + "_" + info.param.scenario;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

class StalledPeerTest : public ::testing::TestWithParam<StuckPeerCase> {};

TEST_P(StalledPeerTest, RankThatNeverCallsIsReportedAsAStall) {
  const StuckPeerCase& c = GetParam();
  RunResult r = RunProgram({kKolorun, "-np", "2", "--backend", c.backend,
                            "--env", "KOLO_STALL_WARNING_S=1", "--env",
                            "KOLO_STALL_SHUTDOWN_S=3", kWorker, c.scenario},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 20) << Describe(r);
  EXPECT_THAT(
      r.err,
      HasSubstr("[0]<stderr>: kolo rank 0 warning: stall: tensor 'kolo.sync' "
                "has waited 1 s for rank 1"))
      << Describe(r);
  EXPECT_THAT(
      r.err,
      HasSubstr(std::string("[0]<stderr>: rank 0: aborted: synchronous call ") +
                c.call +
                ": stall: tensor 'kolo.sync' has waited 3 s for rank 1 "
                "(KOLO_STALL_SHUTDOWN_S=3)"))
      << Describe(r);
  // In a lease rank 1's runtime has nothing announced to wait for.
  if (c.in_lease) {
    EXPECT_THAT(r.err, Not(HasSubstr("kolo rank 1 warning"))) << Describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StalledPeerTest,
    ::testing::ValuesIn(
        OnBuiltEngines({StuckPeerCase{"gloo", "hang", "#1", false},
                        StuckPeerCase{"tcp", "hang", "#1", false},
                        StuckPeerCase{"shm", "hang-after-a-call", "#2", true}},
                       &StuckPeerCase::backend)),
    StuckPeerName);

class FrozenPeerTest : public ::testing::TestWithParam<StuckPeerCase> {};

// A stopped rank's runtime stops ticking, or in a lease stops beating.
TEST_P(FrozenPeerTest, FrozenPeerTimesOutInsteadOfHanging) {
  const StuckPeerCase& c = GetParam();
  RunResult r = RunProgram({kKolorun, "-np", "2", "--backend", c.backend,
                            "--timeout", "2", kWorker, c.scenario},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 20) << Describe(r);
  EXPECT_THAT(
      r.err,
      HasSubstr(std::string("[0]<stderr>: rank 0: timeout: synchronous call ") +
                c.call + ": rank 0: "))
      << Describe(r);
  if (c.in_lease) {
    EXPECT_THAT(
        r.err,
        HasSubstr(
            "rank 1 neither arrived nor showed a sign of life within 2000 ms"))
        << Describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FrozenPeerTest,
                         ::testing::ValuesIn(OnBuiltEngines(
                             {StuckPeerCase{"gloo", "freeze", "#1", false},
                              StuckPeerCase{"tcp", "freeze", "#1", false},
                              StuckPeerCase{"shm", "freeze", "#1", false},
                              StuckPeerCase{"shm", "freeze-after-a-call", "#2",
                                            true}},
                             &StuckPeerCase::backend)),
                         StuckPeerName);

INSTANTIATE_TEST_SUITE_P(Backends, CollectivesFailureTest,
                         ::testing::ValuesIn(BuiltEngines({"gloo", "shm",
                                                           "tcp"})));

}  // namespace
}  // namespace kolo
