// kolo-bench train: its statistics directly, and a whole run end to end:
// kolo at np 1 and 2 and the plain-LibTorch peer, each a real job started
// by the real kolorun and kolo-train, on tiny synthetic batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "metrics_scraper.h"
#include "peer_python_testing.h"
#include "statistics.h"
#include "testing/child_process.h"
#include "testing/requirements.h"
#include "train.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;

TEST(TrainSummary, MeanAndStudentInterval) {
  // {1, 2, 3}: mean 2, sample deviation 1, t(0.975, 2) = 4.303.
  const kolo::bench::MeanInterval m = kolo::bench::Summarize({1, 2, 3});
  EXPECT_DOUBLE_EQ(m.mean, 2.0);
  EXPECT_NEAR(m.half_width, 4.303 / std::sqrt(3.0), 1e-9);
  EXPECT_EQ(kolo::bench::Summarize({5}).half_width, 0.0);
  EXPECT_EQ(kolo::bench::Summarize({5}).mean, 5.0);
}

TEST(TrainScaling, WeakKeepsTheBatchStrongDividesIt) {
  EXPECT_EQ(*kolo::bench::PerWorkerBatch(128, 4, "weak"), 128);
  EXPECT_EQ(*kolo::bench::PerWorkerBatch(128, 4, "strong"), 32);
  kolo::StatusOr<int64_t> uneven =
      kolo::bench::PerWorkerBatch(128, 3, "strong");
  ASSERT_FALSE(uneven.ok());
  EXPECT_THAT(uneven.status().message(), HasSubstr("--batch-size 128 among 3"));
}

TEST(TrainMetrics, FindsThePortKolorunPrints) {
  EXPECT_EQ(kolo::bench::MetricsPortIn(
                "[0]<stdout>: x\nkolorun: metrics at http://127.0.0.1:41557/"
                "metrics, the job's page at http://127.0.0.1:41557/\n"),
            41557);
  EXPECT_EQ(kolo::bench::MetricsPortIn("kolorun: rank 1 exited\n"), 0);
}

TEST(TrainRun, KoloMetricsPeerIsScrapedBesideKolo) {
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "train", "--model", "lenet", "--dataset", "synthetic",
       "--batch-size", "16", "--np", "2", "--warmup", "1", "--iters", "200",
       "--repeat", "1", "--peer", "kolo-metrics"},
      {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("repeat 1: kolo np 2"));
  std::smatch scrapes;
  ASSERT_TRUE(std::regex_search(
      r.out, scrapes,
      std::regex("repeat 1: kolo-metrics np 2 +[0-9]+ images/s, ([0-9]+) "
                 "scrapes of [0-9]+ KB")))
      << r.out;
  // The first scrape comes as soon as kolorun says where it listens.
  EXPECT_GE(std::stoi(scrapes[1]), 1) << r.out;
}

TEST(TrainRun, KoloAndPlainLibTorchSideBySide) {
  const std::string json_path = ::testing::TempDir() + "kolo_bench_train_" +
                                std::to_string(getpid()) + ".json";
  // An earlier run's record: the new one is appended after it.
  std::ofstream(json_path) << R"([{"tool": "an earlier run"}])";
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "train",  "--model",  "lenet", "--dataset", "synthetic",
       "--batch-size",  "16",     "--np",     "1,2",   "--warmup",  "1",
       "--iters",       "2",      "--repeat", "2",     "--peer",    "libtorch",
       "--json",        json_path},
      {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("repeat 2: kolo np 2"));
  std::ifstream file(json_path);
  nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.out;
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["tool"], "an earlier run");
  EXPECT_EQ(json[1]["environment"]["cores"].get<unsigned>(),
            std::thread::hardware_concurrency());
  EXPECT_FALSE(json[1]["environment"]["cpu_model"].get<std::string>().empty());
  const nlohmann::json& rows = json[1]["rows"];
  ASSERT_EQ(rows.size(), 3u) << rows.dump(2);
  // kolo at np 2 communicated; its statistics say how long per step.
  EXPECT_GT(rows[2]["communication_ms_per_step"].get<double>(), 0);
  EXPECT_GT(rows[0]["peak_rss_mib"].get<double>(), 10);
  EXPECT_EQ(rows[0]["framework"], "kolo");
  EXPECT_EQ(rows[1]["framework"], "libtorch");
  EXPECT_EQ(rows[2]["framework"], "kolo");
  EXPECT_EQ(rows[2]["np"], 2);
  for (const auto& row : rows) {
    ASSERT_EQ(row["images_per_second"].size(), 2u) << row.dump();
    EXPECT_GT(row["images_per_second_mean"].get<double>(), 0);
  }
  // Each row's figures come from its own jobs: the ratio is kolo's mean
  // over the peer's, and the speedup kolo np 2 over kolo np 1.
  EXPECT_NEAR(rows[1]["kolo_ratio"].get<double>(),
              rows[0]["images_per_second_mean"].get<double>() /
                  rows[1]["images_per_second_mean"].get<double>(),
              1e-9);
  EXPECT_NEAR(rows[2]["speedup"].get<double>(),
              rows[2]["images_per_second_mean"].get<double>() /
                  rows[0]["images_per_second_mean"].get<double>(),
              1e-9);
  // And against plain LibTorch's np 1, so a slow kolo np 1 cannot flatter
  // kolo's scaling.
  EXPECT_NEAR(rows[2]["speedup_vs_libtorch_np1"].get<double>(),
              rows[2]["images_per_second_mean"].get<double>() /
                  rows[1]["images_per_second_mean"].get<double>(),
              1e-9);
  EXPECT_THAT(r.out, HasSubstr("vs plain"));
  EXPECT_EQ(rows[2]["runs"][0]["config"]["workers"], 2);
  std::remove(json_path.c_str());
}

// The PyTorch DDP peer runs beside kolo in the interpreter the build was
// configured with (scripts/setup.sh makes .venv with torch), and each row
// names the torch its side ran.
TEST(TrainRun, TorchDdpPeerBesideKolo) {
  KOLO_REQUIRE_OR_SKIP(kolo::testing::PeerPythonHasTorch(),
                       kolo::testing::PeerTorchRequirement());
  const std::string json_path = ::testing::TempDir() + "kolo_bench_train_ddp_" +
                                std::to_string(getpid()) + ".json";
  RunResult r = RunProgram({KOLO_BENCH_PATH, "train",
                            "--model",       "lenet",
                            "--dataset",     "synthetic",
                            "--batch-size",  "8",
                            "--np",          "2",
                            "--warmup",      "1",
                            "--iters",       "2",
                            "--repeat",      "1",
                            "--peer",        "torch-ddp",
                            "--python",      kolo::testing::PeerPython(),
                            "--json",        json_path},
                           {}, std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::ifstream file(json_path);
  nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.out;
  ASSERT_EQ(json.size(), 1u);
  const nlohmann::json& rows = json[0]["rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  EXPECT_EQ(rows[1]["framework"], "torch-ddp");
  const nlohmann::json& ddp = rows[1]["runs"][0];
  EXPECT_EQ(ddp["tool"], "torch-ddp");
  EXPECT_EQ(ddp["config"]["np"], 2);
  // The same network on both sides: kolo's LeNet on 3x32x32 synthetic images.
  EXPECT_EQ(ddp["config"]["parameters"],
            rows[0]["runs"][0]["config"]["parameters"]);
  EXPECT_GT(rows[1]["images_per_second_mean"].get<double>(), 0);
  EXPECT_GT(rows[1]["kolo_ratio"].get<double>(), 0);
  // Both torches, in the rows, the environment and under the table.
  const nlohmann::json& environment = json[0]["environment"];
  EXPECT_EQ(environment["peer_python"], kolo::testing::PeerPython());
  EXPECT_EQ(rows[0]["torch_version"], environment["libtorch"]);
  EXPECT_EQ(rows[1]["torch_version"], ddp["config"]["torch_version"]);
  EXPECT_EQ(rows[1]["torch_version"], environment["peer_torch"]);
  EXPECT_THAT(r.out, HasSubstr("the PyTorch peers ran torch " +
                               environment["peer_torch"].get<std::string>()));
  std::remove(json_path.c_str());
}

// torch 2.x autocasts to float16 on the CPU, so fp16 reaches the DDP peer
// (with a GradScaler); torch 1.13 could not, and kolo-bench refused it.
TEST(TrainRun, Fp16ReachesTheDdpPeer) {
  KOLO_REQUIRE_OR_SKIP(kolo::testing::PeerPythonHasTorch(),
                       kolo::testing::PeerTorchRequirement());
  const std::string json_path = ::testing::TempDir() +
                                "kolo_bench_train_fp16_" +
                                std::to_string(getpid()) + ".json";
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "train",  "--model",  "lenet",
       "--batch-size",  "8",      "--np",     "1",
       "--warmup",      "1",      "--iters",  "2",
       "--repeat",      "1",      "--peer",   "torch-ddp",
       "--precision",   "fp16",   "--python", kolo::testing::PeerPython(),
       "--json",        json_path},
      {}, std::chrono::seconds(120));
  if (r.exit_code != 0 &&
      r.err.find("has no CPU float16 autocast") != std::string::npos) {
    // A torch 1.x in the configured interpreter: refused, by name.
    KOLO_REQUIRE_OR_SKIP(
        false, "a torch 2.x in " + kolo::testing::PeerPython() + ": " + r.err);
  }
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::ifstream file(json_path);
  nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.out;
  const nlohmann::json& rows = json[0]["rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  EXPECT_EQ(rows[1]["framework"], "torch-ddp");
  EXPECT_EQ(rows[1]["runs"][0]["config"]["precision"], "fp16");
  EXPECT_EQ(rows[0]["runs"][0]["config"]["precision"], "fp16");
  std::remove(json_path.c_str());
}

TEST(TrainRun, BadPeerIsNamed) {
  RunResult r = RunProgram({KOLO_BENCH_PATH, "train", "--peer", "horovod"}, {},
                           std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(
      r.err,
      HasSubstr(
          "--peer must be torch-ddp, libtorch or kolo-metrics, got 'horovod'"));
}

}  // namespace
