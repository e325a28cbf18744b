// kolo-bench zero end to end: kolo-ddp, kolo-zero2, torch-zero and
// torch-fsdp2 on lenet at np 2, each a real job (kolorun and kolo-train
// --zero-stage, torch_ddp.py --zero and --fsdp2 in the configured
// interpreter), two timed steps, one repeat. Checks the exit status, the
// table, and what the appended record holds: one row per variant and worker
// count, each with memory figures per rank, ratios to kolo-ddp, the torch
// its side ran, and every job's JSON. Skipped, saying why, without torch in
// the peers' interpreter or without a kolo-train that has --zero-stage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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

// Why kolo-train cannot run the ZeRO variants here; empty when it can.
std::string KoloTrainMissing() {
  const std::string path = KOLO_TRAIN_PATH;
  if (path.empty()) {
    return "kolo-train, which this build lacks (KOLO_WITH_TORCH=OFF)";
  }
  const RunResult r = RunProgram({path, "--help"});
  if (r.exit_code == 0 && r.out.find("--zero-stage") != std::string::npos) {
    return "";
  }
  return "a kolo-train with --zero-stage (" + path + " has none)";
}

TEST(ZeroRun, KoloAndTorchVariantsOfLenetAtTwoWorkers) {
  KOLO_REQUIRE_OR_SKIP(kolo::testing::PeerPythonHasTorch(),
                       kolo::testing::PeerTorchRequirement());
  const std::string kolo_train_missing = KoloTrainMissing();
  KOLO_REQUIRE_OR_SKIP(kolo_train_missing.empty(), kolo_train_missing);
  const std::string json_path = ::testing::TempDir() + "kolo_bench_zero_" +
                                std::to_string(getpid()) + ".json";
  std::remove(json_path.c_str());
  RunResult r =
      RunProgram({KOLO_BENCH_PATH, "zero",
                  "--models",      "lenet",
                  "--np",          "2",
                  "--variants",    "kolo-ddp,kolo-zero2,torch-zero,torch-fsdp2",
                  "--batch-size",  "16",
                  "--warmup",      "1",
                  "--iters",       "2",
                  "--repeat",      "1",
                  "--kolorun",     KOLORUN_PATH,
                  "--kolo-train",  KOLO_TRAIN_PATH,
                  "--python",      PeerPython(),
                  "--json",        json_path},
                 {}, std::chrono::seconds(400));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("state+grad"));
  EXPECT_THAT(r.out, HasSubstr("lenet np 2 kolo-zero2"));
  EXPECT_THAT(r.out, HasSubstr("lenet np 2 torch-fsdp2"));
  EXPECT_THAT(r.out, HasSubstr("# torch: kolo's side built with LibTorch "));
  EXPECT_THAT(r.out, HasSubstr("the PyTorch peers ran torch "));
  std::ifstream file(json_path);
  nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.out;
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 1u);
  const nlohmann::json& record = json[0];
  EXPECT_EQ(record["benchmark"], "zero");
  EXPECT_EQ(record["config"]["optimizer"], "adam");
  EXPECT_EQ(record["environment"]["peer_python"], PeerPython());
  const nlohmann::json& rows = record["rows"];
  ASSERT_EQ(rows.size(), 4u) << rows.dump(2);
  for (const nlohmann::json& row : rows) {
    const int np = row["np"].get<int>();
    SCOPED_TRACE(row["variant"].get<std::string>() + " np " +
                 std::to_string(np));
    EXPECT_GT(row["images_per_second_median"].get<double>(), 0);
    EXPECT_GT(row["gradient_bytes"].get<double>(), 0);
    EXPECT_GT(row["optimizer_state_bytes"].get<double>(), 0);
    for (const char* field : {"optimizer_state_bytes", "gradient_bytes",
                              "master_weight_bytes", "peak_rss_bytes"}) {
      EXPECT_EQ(row["per_rank"][field].size(), static_cast<size_t>(np))
          << field;
    }
    ASSERT_EQ(row["runs"].size(), 1u);
    EXPECT_EQ(row["runs"][0]["config"]["zero_stage"], row["zero_stage"]);
    // Each side names its torch: kolo its LibTorch, the peers what they
    // imported (the environment's peer_torch).
    ASSERT_TRUE(row["torch_version"].is_string()) << row.dump();
    if (row["framework"] == "kolo") {
      EXPECT_EQ(row["torch_version"], record["environment"]["libtorch"]);
    } else {
      EXPECT_EQ(row["torch_version"], record["environment"]["peer_torch"]);
    }
    // Every row is compared with kolo-ddp at its np, kolo-ddp with itself.
    EXPECT_GT(row["memory_fraction"].get<double>(), 0);
    if (row["variant"] == "kolo-ddp") {
      EXPECT_DOUBLE_EQ(row["memory_fraction"].get<double>(), 1.0);
      EXPECT_DOUBLE_EQ(row["images_per_second_ratio"].get<double>(), 1.0);
    }
  }
  // At np 2 ZeRO shards Adam's state: ZeRO-2 holds less of it on its
  // largest rank than DistributedOptimizer does. (The other variants and
  // world sizes take the same code path; one run of each kind keeps the
  // test short.)
  auto at = [&](const std::string& variant, int np) {
    for (const nlohmann::json& row : rows) {
      if (row["variant"] == variant && row["np"] == np) return row;
    }
    ADD_FAILURE() << "no row for " << variant << " np " << np;
    return nlohmann::json::object();
  };
  const double ddp_state =
      at("kolo-ddp", 2)["optimizer_state_bytes"].get<double>();
  EXPECT_LT(at("kolo-zero2", 2)["optimizer_state_bytes"].get<double>(),
            ddp_state);
  // FSDP2 shards the gradients too: its .grad shards hold about half of
  // the gradient bytes per rank that ZeroRedundancyOptimizer's whole .grad
  // tensors hold (FSDP2 pads each parameter to a multiple of the ranks).
  const double zero_gradients =
      at("torch-zero", 2)["gradient_bytes"].get<double>();
  EXPECT_EQ(at("torch-fsdp2", 2)["zero_stage"], 3);
  EXPECT_LT(at("torch-fsdp2", 2)["gradient_bytes"].get<double>(),
            0.6 * zero_gradients);
  std::remove(json_path.c_str());
}

TEST(ZeroRun, ABadVariantIsNamed) {
  RunResult r = RunProgram({KOLO_BENCH_PATH, "zero", "--variants", "zero3"}, {},
                           std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--variants: unknown variant 'zero3'"));
}

}  // namespace
