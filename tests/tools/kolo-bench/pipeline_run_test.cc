// kolo-bench pipeline --quick and kolo-bench study ps-vs-allreduce --quick
// end to end: real kolorun jobs of kolo-train on lenet with tiny sizes.
// Checks the exit status, the tables, and the appended records: a memory
// row per rank, a throughput row per schedule and micro-batch count with a
// measured bubble in [0, 1] beside (p - 1) / (m + p - 1), and a training
// row for allreduce and for each parameter-server mode. The pipeline runs
// once with kolo alone and once with the torch-pipelining peer (PyTorch's
// torch.distributed.pipelining, in the configured interpreter) on the same
// cut. Skipped, saying why, without a kolo-train that has the flags, or
// without torch in the peers' interpreter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "peer_python_testing.h"
#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;

// Why kolo-train cannot run `flag`'s jobs here; empty when it can.
std::string KoloTrainMissing(const std::string& flag) {
  const RunResult r = RunProgram({KOLO_TRAIN_PATH, "--help"});
  if (r.exit_code == 0 && r.out.find(flag) != std::string::npos) return "";
  return std::string("a kolo-train with ") + flag + " (" + KOLO_TRAIN_PATH +
         " has none)";
}

std::string TempJson(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + name + "_" + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  return path;
}

nlohmann::json ReadRecords(const std::string& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
}

TEST(PipelineRun, QuickMeasuresMemoryAndBothSchedules) {
  const std::string missing = KoloTrainMissing("--pipeline-stages");
  KOLO_REQUIRE_OR_SKIP(missing.empty(), missing);
  const std::string json_path = TempJson("kolo_bench_pipeline");
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "pipeline", "--quick", "--peer", "", "--kolorun",
       KOLORUN_PATH, "--kolo-train", KOLO_TRAIN_PATH, "--json", json_path},
      {}, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("(p-1)/(m+p-1)"));
  const nlohmann::json records = ReadRecords(json_path);
  ASSERT_TRUE(records.is_array()) << r.out;
  ASSERT_EQ(records.size(), 1u);
  const nlohmann::json& record = records[0];
  EXPECT_EQ(record["benchmark"], "pipeline");
  // Unsplit (1 rank) and 2 stages (2 ranks).
  const nlohmann::json& memory = record["memory_rows"];
  ASSERT_EQ(memory.size(), 3u) << memory.dump(2);
  for (const nlohmann::json& row : memory) {
    EXPECT_GT(row["peak_rss_bytes"].get<double>(), 0) << row.dump();
  }
  EXPECT_DOUBLE_EQ(memory[0]["peak_rss_ratio_to_unsplit"].get<double>(), 1.0);
  // p 2, m 4, gpipe and 1f1b.
  const nlohmann::json& rows = record["throughput_rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  std::set<std::string> seen;
  for (const nlohmann::json& row : rows) {
    const int m = row["micro_batches"].get<int>();
    seen.insert(row["schedule"].get<std::string>() + " " + std::to_string(m));
    SCOPED_TRACE(row.dump());
    EXPECT_GT(row["images_per_second_median"].get<double>(), 0);
    EXPECT_GE(row["bubble"].get<double>(), 0);
    EXPECT_LE(row["bubble"].get<double>(), 1);
    // kolo-train reports its first stage's statistics; a stage's bubble
    // is a fraction of its time.
    ASSERT_GE(row["stage_bubbles"].size(), 1u);
    for (const nlohmann::json& b : row["stage_bubbles"]) {
      EXPECT_GE(b.get<double>(), 0);
      EXPECT_LE(b.get<double>(), 1);
    }
    // Stage 0 holds all m micro-batches under GPipe, p under 1F1B.
    EXPECT_EQ(row["peak_activations"].get<int>(),
              row["schedule"] == "gpipe" ? 4 : 2);
    EXPECT_DOUBLE_EQ(row["ideal_bubble"].get<double>(), 1.0 / (m + 1));
  }
  EXPECT_EQ(seen, (std::set<std::string>{"gpipe 4", "1f1b 4"}));
  std::remove(json_path.c_str());
}

// The torch-pipelining peer beside each throughput row: the same cut kolo
// reported (lenet's 12 layers as 4 + 8), both schedules, its bubble a
// fraction, kolo's images/s over its own, and the torch each side ran.
TEST(PipelineRun, QuickWithTheTorchPipeliningPeer) {
  const std::string missing = KoloTrainMissing("--pipeline-stages");
  KOLO_REQUIRE_OR_SKIP(missing.empty(), missing);
  KOLO_REQUIRE_OR_SKIP(kolo::testing::PeerPythonHasTorch(),
                       kolo::testing::PeerTorchRequirement());
  const std::string json_path = TempJson("kolo_bench_pipeline_torch");
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "pipeline", "--quick", "--peer", "torch-pipelining",
       "--python", kolo::testing::PeerPython(), "--kolorun", KOLORUN_PATH,
       "--kolo-train", KOLO_TRAIN_PATH, "--json", json_path},
      {}, std::chrono::seconds(150));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("torch-pipelining"));
  EXPECT_THAT(r.out, HasSubstr("the PyTorch peers ran torch "));
  const nlohmann::json records = ReadRecords(json_path);
  ASSERT_TRUE(records.is_array()) << r.out;
  ASSERT_EQ(records.size(), 1u);
  const nlohmann::json& record = records[0];
  const nlohmann::json& rows = record["throughput_rows"];
  ASSERT_EQ(rows.size(), 4u) << rows.dump(2);
  std::set<std::string> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    SCOPED_TRACE(row.dump());
    // kolo's row, then the peer's for the same schedule.
    EXPECT_EQ(row["framework"], i % 2 == 0 ? "kolo" : "torch-pipelining");
    seen.insert(row["framework"].get<std::string>() + " " +
                row["schedule"].get<std::string>());
    EXPECT_EQ(row["split"], nlohmann::json::array({4, 8}));
    EXPECT_GT(row["images_per_second_median"].get<double>(), 0);
    ASSERT_EQ(row["stage_bubbles"].size(), 2u);
    for (const nlohmann::json& b : row["stage_bubbles"]) {
      EXPECT_GE(b.get<double>(), 0);
      EXPECT_LE(b.get<double>(), 1);
    }
    if (row["framework"] == "kolo") {
      EXPECT_EQ(row["torch_version"], record["environment"]["libtorch"]);
    } else {
      EXPECT_EQ(row["torch_version"], record["environment"]["peer_torch"]);
      EXPECT_GT(row["kolo_ratio"].get<double>(), 0);
      EXPECT_FALSE(row.contains("peak_activations"));
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"kolo gpipe", "kolo 1f1b",
                                         "torch-pipelining gpipe",
                                         "torch-pipelining 1f1b"}));
  std::remove(json_path.c_str());
}

TEST(PipelineRun, QuickPsStudyHasAllreduceAndEveryMode) {
  const std::string missing = KoloTrainMissing("--parameter-servers");
  KOLO_REQUIRE_OR_SKIP(missing.empty(), missing);
  const std::string json_path = TempJson("kolo_bench_ps_study");
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "study", "ps-vs-allreduce", "--quick", "--kolorun",
       KOLORUN_PATH, "--kolo-train", KOLO_TRAIN_PATH, "--json", json_path},
      {}, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("against allreduce at the same workers"));
  const nlohmann::json records = ReadRecords(json_path);
  ASSERT_TRUE(records.is_array()) << r.out;
  std::set<std::string> seen;
  for (const nlohmann::json& record : records) {
    EXPECT_EQ(record["study"], "ps-vs-allreduce");
    for (const nlohmann::json& row : record["rows"]) {
      SCOPED_TRACE(row.dump());
      seen.insert(record["config"]["model"].get<std::string>() + " " +
                  row["framework"].get<std::string>());
      EXPECT_EQ(row["np"], 2);
      EXPECT_GT(row["images_per_second_mean"].get<double>(), 0);
      if (record["config"]["model"] == "lenet") {
        EXPECT_GE(row["test_accuracy"].get<double>(), 0);
        EXPECT_LE(row["test_accuracy"].get<double>(), 100);
      }
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"lenet kolo", "lenet kolo-ps-sync-1",
                                         "lenet kolo-ps-async-1",
                                         "lenet kolo-ps-stale-1"}));
  std::remove(json_path.c_str());
}

}  // namespace
