// kolo-bench python end to end: the training script under kolo.torch
// (kolorun), DDP (torchrun) and plain PyTorch at np 1 and 2 on LeNet, and
// the two latency jobs, each a real job, in --quick mode; Horovod's
// interpreter given as one that does not exist, so its rows must say so.
// Checks the exit status, the table and the appended record. Skipped,
// saying why, when the peers' interpreter lacks torch or kolo's package.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "peer_python_testing.h"
#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::PeerPython;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;

bool PeerPythonHasKolo() {
  return RunProgram({PeerPython(), "-c", "import kolo.torch"}).exit_code == 0;
}

TEST(PythonRun, KoloDdpAndPlainTorchAtOneAndTwoRanksBesideTheLatency) {
  KOLO_REQUIRE_OR_SKIP(kolo::testing::PeerPythonHasTorch(),
                       kolo::testing::PeerTorchRequirement());
  KOLO_REQUIRE_OR_SKIP(PeerPythonHasKolo(),
                       "kolo's Python package in " + PeerPython() +
                           " (scripts/setup.sh installs it)");
  const std::string json_path = ::testing::TempDir() + "kolo_bench_python_" +
                                std::to_string(getpid()) + ".json";
  std::remove(json_path.c_str());
  const std::string no_horovod = ::testing::TempDir() + "no-horovod/python";
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "python", "--quick", "--models", "lenet", "--np", "1,2",
       "--kolorun", KOLORUN_PATH, "--python", PeerPython(), "--horovod-python",
       no_horovod, "--json", json_path},
      {}, std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("kolo.torch (hvd.allreduce)"));
  EXPECT_THAT(r.out, HasSubstr("C++ (kolo-bench collectives)"));
  std::ifstream file(json_path);
  nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  ASSERT_TRUE(json.is_array() && json.size() == 1u) << r.out;
  const nlohmann::json& record = json[0];
  EXPECT_EQ(record["benchmark"], "python");
  // kolo, ddp and horovod at np 1 and 2, none at np 1 only.
  const nlohmann::json& rows = record["rows"];
  ASSERT_EQ(rows.size(), 7u) << rows.dump(2);
  for (const nlohmann::json& row : rows) {
    const std::string framework = row["framework"];
    SCOPED_TRACE(framework + " np " + row["np"].dump());
    EXPECT_EQ(row["model"], "lenet");
    if (framework == "horovod") {
      EXPECT_THAT(row["missing"].get<std::string>(),
                  HasSubstr("setup_horovod.sh"));
      EXPECT_FALSE(row.contains("images_per_second_median"));
      continue;
    }
    EXPECT_GT(row["images_per_second_median"].get<double>(), 0);
    EXPECT_GE(row["threads_per_rank"].get<int>(), 1);
    EXPECT_THAT(row["torch_version"].get<std::string>(), HasSubstr("."));
    // Every other framework's row compares kolo with it.
    EXPECT_EQ(row.contains("kolo_over_this"), framework != "kolo");
  }
  const nlohmann::json& latency = record["latency"];
  ASSERT_EQ(latency.size(), 2u) << latency.dump(2);
  for (const nlohmann::json& side : latency) {
    EXPECT_EQ(side["bytes"], 4096);
    EXPECT_GT(side["out_of_place_us"].get<double>(), 0);
    EXPECT_GT(side["in_place_us"].get<double>(), 0);
  }
  std::remove(json_path.c_str());
}

TEST(PythonRun, AnUnknownFrameworkOrModelIsNamed) {
  RunResult r = RunProgram({KOLO_BENCH_PATH, "python", "--frameworks",
                            "kolo,mxnet", "--kolorun", KOLORUN_PATH});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--frameworks: unknown framework 'mxnet'"));
  r = RunProgram({KOLO_BENCH_PATH, "python", "--models", "vgg16", "--kolorun",
                  KOLORUN_PATH});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--models: unknown model 'vgg16'"));
}

}  // namespace
