// kolo-bench zero end to end: kolo-ddp, kolo-zero2 and torch-zero on lenet at
// np 2, each a real job (kolorun and kolo-train --zero-stage, torch_ddp.py
// --zero), two timed steps, one repeat. Checks the exit status, the table,
// and what the appended record holds: one row per variant and worker count,
// each with memory figures per rank, ratios to kolo-ddp, and every job's JSON.
// Skipped, saying why, without python3-torch or without a kolo-train that
// has --zero-stage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;

bool HasTorch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

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
  KOLO_REQUIRE_OR_SKIP(HasTorch(),
                       "python3-torch (/usr/bin/python3 cannot "
                       "import torch)");
  const std::string kolo_train_missing = KoloTrainMissing();
  KOLO_REQUIRE_OR_SKIP(kolo_train_missing.empty(), kolo_train_missing);
  const std::string json_path = ::testing::TempDir() + "kolo_bench_zero_" +
                                std::to_string(getpid()) + ".json";
  std::remove(json_path.c_str());
  RunResult r = RunProgram({KOLO_BENCH_PATH, "zero",
                            "--models",      "lenet",
                            "--np",          "2",
                            "--variants",    "kolo-ddp,kolo-zero2,torch-zero",
                            "--batch-size",  "16",
                            "--warmup",      "1",
                            "--iters",       "2",
                            "--repeat",      "1",
                            "--kolorun",     KOLORUN_PATH,
                            "--kolo-train",  KOLO_TRAIN_PATH,
                            "--json",        json_path},
                           {}, std::chrono::seconds(400));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("state+grad"));
  EXPECT_THAT(r.out, HasSubstr("lenet np 2 kolo-zero2"));
  std::ifstream file(json_path);
  nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.out;
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 1u);
  const nlohmann::json& record = json[0];
  EXPECT_EQ(record["benchmark"], "zero");
  EXPECT_EQ(record["config"]["optimizer"], "adam");
  const nlohmann::json& rows = record["rows"];
  ASSERT_EQ(rows.size(), 3u) << rows.dump(2);
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
  std::remove(json_path.c_str());
}

TEST(ZeroRun, ABadVariantIsNamed) {
  RunResult r = RunProgram({KOLO_BENCH_PATH, "zero", "--variants", "zero3"}, {},
                           std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--variants: unknown variant 'zero3'"));
}

}  // namespace
