// kolo-bench checkpoint end to end: lenet's Adam state saved at np 2 and
// loaded at np 1 and 3, every job real (kolorun running
// kolo-bench-checkpoint-worker; torch_checkpoint.py in the configured
// interpreter), one repeat. kolo-bench itself checks that every load gave
// back the saved weights and moments and exits 1 otherwise; these tests
// check the exit status, the table, and the record: one row per variant
// and load np with positive times and sizes, the ratios to torch-dcp, and
// the torch each side ran. Skipped, saying why, without the LibTorch worker
// (KOLO_WITH_TORCH=OFF) or, for torch-dcp, without torch in the peers'
// interpreter. Every checkpoint lives in kolo-bench's own temporary
// directory, removed when it exits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "peer_python_testing.h"
#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;

constexpr char kWorker[] = KOLO_CHECKPOINT_WORKER_PATH;

std::string TempJson(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + name + "_" + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  return path;
}

// Runs `kolo-bench checkpoint` on lenet, saving at np 2 and loading at np 1
// and 3, and returns its one record (null on failure, after saying why).
nlohmann::json RunCheckpoint(const std::string& variants,
                             const std::string& json_path, RunResult* r) {
  *r = RunProgram({KOLO_BENCH_PATH, "checkpoint", "--models",
                   "lenet",         "--save-np",  "2",
                   "--load-np",     "1,3",        "--variants",
                   variants,        "--repeat",   "1",
                   "--kolorun",     KOLORUN_PATH, "--worker",
                   kWorker,         "--python",   kolo::testing::PeerPython(),
                   "--json",        json_path},
                  {}, std::chrono::seconds(150));
  EXPECT_EQ(r->exit_code, 0) << Describe(*r);
  std::ifstream file(json_path);
  const nlohmann::json records = nlohmann::json::parse(file, nullptr, false);
  std::remove(json_path.c_str());
  if (records.is_discarded() || !records.is_array() || records.size() != 1) {
    ADD_FAILURE() << "not one record in " << json_path << ": " << r->out;
    return nullptr;
  }
  return records[0];
}

void ExpectMeasured(const nlohmann::json& row) {
  SCOPED_TRACE(row.dump());
  EXPECT_EQ(row["save_np"], 2);
  EXPECT_GT(row["save_seconds_median"].get<double>(), 0);
  EXPECT_GT(row["load_seconds_median"].get<double>(), 0);
  EXPECT_GT(row["bytes"].get<double>(), 0);
  EXPECT_GE(row["files"].get<double>(), 2);  // shards and their metadata
  ASSERT_EQ(row["runs"].size(), 1u);
  EXPECT_EQ(row["runs"][0]["load"]["config"]["np"], row["load_np"]);
}

TEST(CheckpointRun, KoloReshardsItsZeroCheckpoint) {
  KOLO_REQUIRE_OR_SKIP(std::string(kWorker).size() > 0,
                       "kolo-bench-checkpoint-worker, which this build lacks "
                       "(KOLO_WITH_TORCH=OFF)");
  RunResult r;
  const nlohmann::json record =
      RunCheckpoint("kolo-zero2", TempJson("kolo_bench_checkpoint"), &r);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["benchmark"], "checkpoint");
  EXPECT_THAT(r.out, HasSubstr("lenet kolo-zero2 np 2 -> np 3"));
  EXPECT_THAT(r.out, HasSubstr("weights and moments as saved"));
  const nlohmann::json& rows = record["rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  for (const nlohmann::json& row : rows) {
    ExpectMeasured(row);
    EXPECT_EQ(row["torch_version"], record["environment"]["libtorch"]);
    EXPECT_FALSE(row.contains("load_seconds_ratio_to_dcp"));
  }
  EXPECT_EQ(rows[0]["load_np"], 1);
  EXPECT_EQ(rows[1]["load_np"], 3);
}

TEST(CheckpointRun, KoloBesideDistributedCheckpoint) {
  KOLO_REQUIRE_OR_SKIP(std::string(kWorker).size() > 0,
                       "kolo-bench-checkpoint-worker, which this build lacks "
                       "(KOLO_WITH_TORCH=OFF)");
  KOLO_REQUIRE_OR_SKIP(kolo::testing::PeerPythonHasTorch(),
                       kolo::testing::PeerTorchRequirement());
  RunResult r;
  const nlohmann::json record = RunCheckpoint(
      "kolo-zero2,torch-dcp", TempJson("kolo_bench_checkpoint_dcp"), &r);
  ASSERT_TRUE(record.is_object());
  EXPECT_THAT(r.out, HasSubstr("lenet torch-dcp np 2 -> np 1"));
  EXPECT_THAT(r.out, HasSubstr("the PyTorch peers ran torch "));
  const nlohmann::json& rows = record["rows"];
  ASSERT_EQ(rows.size(), 4u) << rows.dump(2);
  for (const nlohmann::json& row : rows) {
    ExpectMeasured(row);
    if (row["framework"] == "kolo") {
      EXPECT_EQ(row["torch_version"], record["environment"]["libtorch"]);
      EXPECT_GT(row["save_seconds_ratio_to_dcp"].get<double>(), 0);
      EXPECT_GT(row["load_seconds_ratio_to_dcp"].get<double>(), 0);
    } else {
      EXPECT_EQ(row["framework"], "torch-dcp");
      EXPECT_EQ(row["torch_version"], record["environment"]["peer_torch"]);
      EXPECT_EQ(row["runs"][0]["save"]["config"]["sharding"], "fsdp2");
    }
  }
}

TEST(CheckpointRun, ABadVariantIsNamed) {
  RunResult r =
      RunProgram({KOLO_BENCH_PATH, "checkpoint", "--variants", "kolo-zero3"},
                 {}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--variants: unknown variant 'kolo-zero3'"));
}

}  // namespace
