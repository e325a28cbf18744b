// The runtime in real processes under kolorun: negotiation across ranks
// that enqueue in different orders, on both backends, and the timeline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
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
constexpr const char* kWorker = RUNTIME_WORKER_PATH;

struct Case {
  const char* backend;
  int np;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << " np " << c.np;
}

class RandomOrderTest : public ::testing::TestWithParam<Case> {};

TEST_P(RandomOrderTest, TwoHundredTensorsInDifferentOrdersAllComplete) {
  const Case& c = GetParam();
  RunResult r = RunProgram({kKolorun, "-np", std::to_string(c.np), "--backend",
                            c.backend, kWorker, "random-order", "200"},
                           {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int rank = 0; rank < c.np; ++rank) {
    EXPECT_THAT(r.out,
                HasSubstr("[" + std::to_string(rank) + "]<stdout>: rank " +
                          std::to_string(rank) + ": 200 tensors correct"));
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, RandomOrderTest,
                         ::testing::ValuesIn(testing::OnBuiltEngines(
                             {Case{"gloo", 2}, Case{"gloo", 3}, Case{"gloo", 4},
                              Case{"mpi", 2}, Case{"mpi", 3}, Case{"mpi", 4},
                              Case{"shm", 2}, Case{"shm", 3}, Case{"shm", 4}},
                             &Case::backend)),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.backend) + "_np" +
                                  std::to_string(info.param.np);
                         });

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "kolo_" + name + "_" +
         std::to_string(getpid()) + ".json";
}

// Phases recorded on the timeline row of `tensor`, in order.
std::vector<std::string> PhasesOf(const nlohmann::json& trace,
                                  const std::string& tensor) {
  int tid = -1;
  for (const auto& e : trace) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" &&
        e["args"].value("name", "") == tensor) {
      tid = e["tid"].get<int>();
    }
  }
  std::vector<std::string> phases;
  for (const auto& e : trace) {
    if (e.value("ph", "") == "B" && e.value("tid", -2) == tid)
      phases.push_back(e["name"]);
  }
  return phases;
}

TEST(TimelineTest, RecordsEveryPhaseOfANamedTensor) {
  const std::string path = TempPath("timeline");
  RunResult r = RunProgram({kKolorun, "-np", "2", "--timeline-filename", path,
                            kWorker, "steps", "20"},
                           {}, std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::ifstream file(path);
  nlohmann::json trace =
      nlohmann::json::parse(file);  // throws if not valid JSON
  ASSERT_TRUE(trace.is_array());
  const std::vector<std::string> phases = PhasesOf(trace, "grad.fc");
  const std::set<std::string> kinds(phases.begin(), phases.end());
  for (const char* phase :
       {"NEGOTIATE", "WAIT_FOR_OTHERS", "COPY_IN", "COLLECTIVE", "COPY_OUT"}) {
    EXPECT_TRUE(kinds.count(phase))
        << "no " << phase << " for grad.fc in " << path;
  }
  int cycles = 0;
  for (const auto& e : trace) cycles += e.value("ph", "") == "i" ? 1 : 0;
  EXPECT_GE(cycles, 20);
  std::remove(path.c_str());
}

TEST(TimelineTest, StaysValidJsonWhenTheWritingRankIsKilled) {
  const std::string path = TempPath("timeline_killed");
  RunResult r = RunProgram({kKolorun, "-np", "2", "--timeline-filename", path,
                            kWorker, "die-in-steps", "200"},
                           {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("rank 0 was killed by signal 9")) << Describe(r);
  std::ifstream file(path);
  nlohmann::json trace = nlohmann::json::parse(file);
  ASSERT_TRUE(trace.is_array());
  EXPECT_FALSE(PhasesOf(trace, "grad.fc").empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo
