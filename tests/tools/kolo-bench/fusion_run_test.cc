// kolo-bench fusion end to end: two ranks started by the real kolorun run
// every mode (runtime and raw, averaging and summing) once (one warmup and two timed steps), on gloo and, where
// mpirun is installed, on MPI. Checks the exit status, the table and what
// the JSON says the runtime did: with fusion every step's gradients move in
// far fewer engine calls than tensors and every announcement is a cache
// hit; with KOLO_FUSION_THRESHOLD=0 and KOLO_CACHE_CAPACITY=0 every tensor
// is its own call and nothing hits.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::OnPath;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;

constexpr int kTensors = 161;

class FusionRunTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    KOLO_REQUIRE_OR_SKIP(GetParam() != "mpi" || OnPath("mpirun"),
                         "mpirun on PATH (openmpi-bin)");
  }
};

TEST_P(FusionRunTest, EveryModeRunsAndIsRight) {
  const std::string json_path =
      ::testing::TempDir() + "kolo_bench_fusion_" + GetParam() + ".json";
  std::remove(json_path.c_str());
  RunResult r =
      RunProgram({KOLORUN_PATH, "-np", "2", "--backend", GetParam(),
                  KOLO_BENCH_PATH, "fusion", "--steps", "2", "--warmup", "1",
                  "--repeat", "1", "--json", json_path},
                 {}, std::chrono::seconds(110));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("backend " + GetParam() + ", np 2"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("no-fusion-no-cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos)
      << r.out;

  std::ifstream file(json_path);
  ASSERT_TRUE(file) << json_path;
  const nlohmann::json json = nlohmann::json::parse(file);
  EXPECT_EQ(json["backend"], GetParam());
  EXPECT_EQ(json["model"]["tensors"], kTensors);
  EXPECT_EQ(json["out_of_bounds"], 0);
  ASSERT_EQ(json["modes"].size(), 5u);

  const nlohmann::json& runtime = json["modes"][0];
  EXPECT_EQ(runtime["mode"], "runtime");
  EXPECT_EQ(runtime["step_ms"][0].size(), 2u);
  // Gloo fuses everything; on MPI and shm the 52 tensors of at least 64 KiB
  // run alone (Backend::FusionCutoffBytes) and only the 109 smaller ones
  // fuse.
  const double calls = runtime["collectives_per_step"].get<double>();
  if (GetParam() != "gloo") {
    EXPECT_GE(calls, 53.0);
    EXPECT_LE(calls, 52.0 + 4);
  } else {
    EXPECT_GE(calls, 1.0);
    EXPECT_LT(calls, kTensors / 4);
  }
  EXPECT_EQ(runtime["cache_hits_per_step"].get<double>(), 2.0 * kTensors);

  const nlohmann::json& unfused = json["modes"][1];
  EXPECT_EQ(unfused["fusion_threshold_bytes"], 0);
  EXPECT_EQ(unfused["cache_capacity"], 0);
  EXPECT_EQ(unfused["collectives_per_step"].get<double>(), kTensors);
  EXPECT_EQ(unfused["cache_hits_per_step"].get<double>(), 0.0);

  const nlohmann::json& raw = json["modes"][2];
  EXPECT_EQ(raw["mode"], "raw");
  EXPECT_EQ(raw["collectives_per_step"].get<double>(), kTensors);
  EXPECT_TRUE(raw["cache_hits_per_step"].is_null());
  EXPECT_EQ(raw["redop"], "avg");
  // The runtime accounts for its steps: at least one tick each, time in
  // the engine, and a breakdown line per runtime mode.
  EXPECT_GE(runtime["ticks_per_step"].get<double>(), 1.0);
  EXPECT_GT(runtime["engine_ms_per_step"].get<double>(), 0.0);
  EXPECT_GT(runtime["enqueue_ms_per_step"].get<double>(), 0.0);
  EXPECT_EQ(json["modes"][3]["mode"], "runtime-sum");
  EXPECT_EQ(json["modes"][4]["redop"], "sum");
  EXPECT_NE(r.out.find("negotiate"), std::string::npos) << r.out;
  std::remove(json_path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, FusionRunTest,
                         ::testing::Values("gloo", "mpi", "shm"));

}  // namespace
