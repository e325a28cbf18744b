// Jobs that MPI starts or runs: mpirun as the launcher without kolorun,
// and kolorun's mpi engine when a rank dies. Built only with KOLO_WITH_MPI
// (tests/integration/collectives.cmake), into collectives_integration_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "net/socket.h"
#include "testing/child_process.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using testing::CountMatches;
using testing::Describe;
using ::testing::HasSubstr;
using testing::NetworkEngineName;
using testing::RunProgram;
using testing::RunResult;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = COLLECTIVES_WORKER_PATH;

TEST(JobFailureTest, MpiJobEndsWhenARankDies) {
  RunResult r =
      RunProgram({kKolorun, "-np", "2", "--backend", "mpi", kWorker, "die"}, {},
                 std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 20) << Describe(r);
  // mpirun's own notice, in kolorun's words.
  EXPECT_THAT(r.err, HasSubstr("kolorun: rank 1 on "));
  EXPECT_THAT(r.err, HasSubstr(" was killed by signal 9")) << Describe(r);
}

// A free port for the tests that must name one up front (KOLO_STORE_ADDR
// without kolorun); the OS picks it.
int FreePort() {
  StatusOr<Socket> probe = Socket::Listen("127.0.0.1", 0);
  return probe.ok() ? probe->LocalPort() : 0;
}

// Gloo, or kolo's tcp engine in a build without Gloo.
TEST(CollectivesLauncherTest, MpirunWithGlooHasRankZeroHostTheStore) {
  const std::string engine = NetworkEngineName();
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  RunResult r = RunProgram(
      {MPIEXEC_PATH, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
       "KOLO_BACKEND=" + engine, "-x", "KOLO_STORE_ADDR=" + address, "-x",
       "KOLO_STORE_SECRET=a-test-secret-of-32-bytes-or-so", kWorker, "matrix",
       "0", "7", "1000"},
      {}, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(
      CountMatches(r.out, "\\(" + engine + "\\): all collectives correct"), 2)
      << Describe(r);
}

// Without KOLO_STORE_ADDR, rank 0 hosts the store where it likes and tells
// the others over MPI (collectives/mpi/mpi_bootstrap.h).
TEST(CollectivesLauncherTest, MpirunWithoutAStoreAddressSharesItOverMpi) {
  for (const char* backend : {NetworkEngineName(), "shm"}) {
    RunResult r =
        RunProgram({MPIEXEC_PATH, "--allow-run-as-root", "--oversubscribe",
                    "-np", "3", "-x", std::string("KOLO_BACKEND=") + backend,
                    kWorker, "matrix", "0", "7", "1000"},
                   {}, std::chrono::seconds(120));
    ASSERT_EQ(r.exit_code, 0) << backend << ": " << Describe(r);
    EXPECT_EQ(CountMatches(r.out, std::string("\\(") + backend +
                                      "\\): all collectives correct"),
              3)
        << Describe(r);
  }
}

TEST(CollectivesLauncherTest, PlainMpirunUsesTheMpiBackend) {
  RunResult r =
      RunProgram({MPIEXEC_PATH, "--allow-run-as-root", "--oversubscribe", "-np",
                  "2", kWorker, "matrix", "0", "7", "1000"},
                 {}, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(CountMatches(r.out, "\\(mpi\\): all collectives correct"), 2)
      << Describe(r);
}

}  // namespace
}  // namespace kolo
