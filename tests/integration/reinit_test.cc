// Init/Shutdown again and again in one process, under kolorun: every round
// works with its own options, and nothing leaks across 20 rounds (the
// worker counts threads, file descriptors and shm mappings).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "testing/child_process.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using testing::RunProgram;
using testing::RunResult;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = REINIT_WORKER_PATH;

class ReinitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReinitTest, TwentyCyclesWithChangingOptionsLeakNothing) {
  RunResult r =
      RunProgram({kKolorun, "-np", "2", "--backend", GetParam(), kWorker, "20"},
                 {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(r.out,
                HasSubstr("[" + std::to_string(rank) + "]<stdout>: rank " +
                          std::to_string(rank) + ": 20 cycles clean"))
        << Describe(r);
  }
}

// Launched on shm and on Gloo (kolo's tcp engine in a build without Gloo).
INSTANTIATE_TEST_SUITE_P(LaunchedOn, ReinitTest,
                         ::testing::Values("shm",
                                           testing::NetworkEngineName()));

TEST(ReinitTimelineTest, EachInitAppendsItsOwnSection) {
  const std::string path = ::testing::TempDir() + "kolo_reinit_timeline_" +
                           std::to_string(getpid()) + ".json";
  RunResult r = RunProgram({kKolorun, "-np", "2", kWorker, "4", path}, {},
                           std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  const nlohmann::json trace =
      nlohmann::json::parse(file);  // throws if not valid JSON
  std::set<int> sections;
  std::set<int> sections_with_tensors;
  for (const nlohmann::json& event : trace) {
    if (event.value("name", "") == "process_name")
      sections.insert(event["pid"].get<int>());
    if (event.value("ph", "") == "B")
      sections_with_tensors.insert(event["pid"].get<int>());
  }
  EXPECT_EQ(sections, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(sections_with_tensors, (std::set<int>{0, 1, 2, 3}));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo
