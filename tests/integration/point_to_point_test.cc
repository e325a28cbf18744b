// Point-to-point transfers and process groups in real processes: kolorun
// starts the ranks; shm maps their inboxes in /dev/shm, tcp and Gloo talk
// over loopback, MPI uses Open MPI's own transports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "testing/child_process.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using testing::BuiltEngines;
using testing::Describe;
using ::testing::HasSubstr;
using testing::RunProgram;
using testing::RunResult;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = POINT_TO_POINT_WORKER_PATH;

class PointToPointEngineTest : public ::testing::TestWithParam<const char*> {};

// Four ranks, so that the ring has distinct neighbours and both groups have
// two members.
TEST_P(PointToPointEngineTest, EveryTypeRingTagsMismatchAndGroups) {
  const std::string engine = GetParam();
  RunResult r = RunProgram({kKolorun, "-np", "4", "--backend", engine,
                            "--timeout", "30", kWorker, "exchange"},
                           {}, std::chrono::seconds(90));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.out, HasSubstr("[" + std::to_string(rank) +
                                 "]<stdout>: rank " + std::to_string(rank) +
                                 ": point-to-point correct on " + engine))
        << Describe(r);
  }
  EXPECT_THAT(r.out, HasSubstr("[0]<stdout>: rank 0: mismatch: send to rank 1 "
                               "(tag 900, float32 x 10): rank 1's receive "
                               "with that tag expects float64 x 10"))
      << Describe(r);
  EXPECT_THAT(r.out,
              HasSubstr("[1]<stdout>: rank 1: mismatch: receive from rank 0 "
                        "(tag 900, float64 x 10): rank 0 sent float32 x 10"))
      << Describe(r);
}

INSTANTIATE_TEST_SUITE_P(Engines, PointToPointEngineTest,
                         ::testing::ValuesIn(BuiltEngines({"shm", "tcp", "gloo",
                                                           "mpi"})));

class PointToPointFailureTest : public ::testing::TestWithParam<const char*> {};

// MPI ends the whole job when a rank dies (JobFailureTest in
// collectives_test.cc), so it has no survivors to ask.
TEST_P(PointToPointFailureTest, ADeadPeerIsNamedAndTheOthersCarryOn) {
  RunResult r = RunProgram({kKolorun, "-np", "3", "--backend", GetParam(),
                            "--timeout", "20", kWorker, "die"},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 15) << Describe(r);
  for (const char* rank : {"0", "2"}) {
    EXPECT_TRUE(std::regex_search(
        r.err, std::regex(std::string("\\[") + rank + "\\]<stderr>: rank " +
                          rank + ": peer failure: .*rank 1")))
        << Describe(r);
  }
  EXPECT_THAT(r.err, HasSubstr("[0]<stderr>: rank 0: still reaches rank 2"))
      << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("[2]<stderr>: rank 2: still reaches rank 0"))
      << Describe(r);
}

INSTANTIATE_TEST_SUITE_P(Engines, PointToPointFailureTest,
                         ::testing::ValuesIn(BuiltEngines({"shm", "tcp",
                                                           "gloo"})));

// The wait that times out is the protocol's, the same on every engine; shm
// and mpi stand for the engines whose links wait in-process (futexes) and
// inside a library.
class PointToPointFrozenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PointToPointFrozenTest, AFrozenPeerTimesOutNamingIt) {
  RunResult r = RunProgram({kKolorun, "-np", "2", "--backend", GetParam(),
                            "--timeout", "2", kWorker, "freeze"},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 20) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("[0]<stderr>: rank 0: timeout: receive from "
                               "rank 1 (tag 0, int32 x 1) timed out after 2 "
                               "s: rank 1 sent nothing with that tag"))
      << Describe(r);
}

INSTANTIATE_TEST_SUITE_P(Engines, PointToPointFrozenTest,
                         ::testing::ValuesIn(BuiltEngines({"shm", "mpi"})));

}  // namespace
}  // namespace kolo
