// kolo-bench soak end to end, short: 30 s of faults every 4 s on average
// against the real kolorun and kolo-train on a namespace cluster (root
// only; skipped elsewhere, failed under CI=true). Its counts must add up:
// faults were injected, nothing hung, nothing was left, every failure
// named its cause, every success showed its parameters equal on every
// rank, and the elastic job succeeded at least once. Then the refusal
// without root, checked where the test runs as root by dropping to
// nobody.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/netns_cluster.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using kolo::testing::WhyNetnsUnavailable;
using ::testing::HasSubstr;

TEST(SoakNetnsTest, ShortSoakCountsAddUp) {
  const std::string why = WhyNetnsUnavailable();
  KOLO_REQUIRE_OR_SKIP(why.empty(), "network namespaces: " << why);
  const std::string json_path = ::testing::TempDir() + "kolo_bench_soak_" +
                                std::to_string(getpid()) + ".json";
  std::remove(json_path.c_str());
  // Synthetic data, so that the test needs no dataset; short jobs, so that
  // several end inside the 30 s.
  RunResult r =
      RunProgram({KOLO_BENCH_PATH,  "soak",      "--seconds",     "30",
                  "--mean-gap",     "4",         "--seed",        "5",
                  "--dataset",      "synthetic", "--epochs",      "3",
                  "--train-subset", "4096",      "--test-subset", "256",
                  "--job-timeout",  "120",       "--json",        json_path},
                 {}, std::chrono::seconds(300));
  ASSERT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("seed 5 (--seed 5 repeats the schedule)"));
  EXPECT_THAT(r.out, HasSubstr("leftovers: 0 processes, 0 namespaces, 0 shm "
                               "segments"));

  std::ifstream in(json_path);
  const nlohmann::json records = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(records.is_array() && records.size() == 1) << records.dump();
  const nlohmann::json& s = records[0];
  EXPECT_EQ(s["benchmark"], "soak");
  EXPECT_EQ(s["seed"], 5);
  EXPECT_GT(s["faults_injected"].get<int64_t>(), 0) << s.dump(2);
  int64_t injected = 0;
  for (const auto& [kind, counts] : s["faults"].items())
    injected += counts["injected"].get<int64_t>();
  EXPECT_EQ(injected, s["faults_injected"].get<int64_t>());
  EXPECT_EQ(s["hangs"], 0) << s.dump(2);
  EXPECT_EQ(s["unnamed_failures"], 0) << s.dump(2);
  EXPECT_EQ(s["leftovers"]["processes"], 0);
  EXPECT_EQ(s["leftovers"]["namespaces"], 0);
  EXPECT_EQ(s["leftovers"]["shm_segments"], 0);
  EXPECT_TRUE(s["problems"].empty()) << s.dump(2);

  // Every job is in the list once, and the totals are its sums.
  for (const char* job : {"elastic", "static"}) {
    const nlohmann::json& t = s["totals"][job];
    int64_t runs = 0, succeeded = 0, equal = 0, recoveries = 0;
    for (const nlohmann::json& e : s["jobs"]) {
      if (e["job"] != job) continue;
      ++runs;
      succeeded += e["outcome"] == "succeeded" ? 1 : 0;
      equal += e["parameters_equal"].get<bool>() ? 1 : 0;
      recoveries += e["recoveries"].get<int64_t>();
      if (e["outcome"] == "failed") {
        EXPECT_NE(e["cause"], "") << e.dump();
      }
    }
    EXPECT_EQ(t["runs"], runs) << job;
    EXPECT_EQ(t["succeeded"], succeeded) << job;
    EXPECT_EQ(t["parameters_equal"], equal) << job;
    EXPECT_EQ(t["recoveries"], recoveries) << job;
    EXPECT_EQ(t["runs"].get<int64_t>(), t["succeeded"].get<int64_t>() +
                                            t["failed"].get<int64_t>() +
                                            t["hangs"].get<int64_t>())
        << job;
    EXPECT_EQ(equal, succeeded) << job;
  }
  // The elastic job rides out its faults, and the one running when the
  // soak ends finishes without more: it succeeded at least once.
  EXPECT_GE(s["totals"]["elastic"]["succeeded"].get<int64_t>(), 1) << s.dump(2);
  std::remove(json_path.c_str());
}

TEST(SoakRunTest, RefusesWithoutRootSayingWhy) {
  std::vector<std::string> argv = {KOLO_BENCH_PATH, "soak", "--seconds", "1"};
  if (geteuid() == 0) {
    // As nobody (setpriv from util-linux drops every capability too).
    argv.insert(argv.begin(),
                {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                 "--clear-groups", "--inh-caps=-all"});
  }
  RunResult r = RunProgram(argv, {}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("needs root: run it with sudo")) << Describe(r);
}

}  // namespace
