// kolo-bench link end to end under the real kolorun: on loopback with the
// ranks given host identities of their own (so one machine plays two
// hosts), refused where every rank shares one host, and on a cluster of
// network namespaces whose link is shaped to 100 Mbit/s, where the stream
// must find that rate. Checks the exit status, which ranks measured, and
// the JSON record.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/netns_cluster.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::NetnsCluster;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using kolo::testing::WhyNetnsUnavailable;
using ::testing::HasSubstr;

nlohmann::json ReadRecord(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json records = nlohmann::json::parse(in, nullptr, false);
  if (!records.is_array() || records.size() != 1) return nullptr;
  return records[0];
}

void ExpectRightRecord(const nlohmann::json& record) {
  ASSERT_TRUE(record.is_object()) << record.dump();
  EXPECT_EQ(record["kind"], "link");
  EXPECT_EQ(record["wrong"], 0);
  EXPECT_EQ(record["round_trip"]["wrong"], 0);
  EXPECT_EQ(record["round_trip"]["bytes"], 4096);
  EXPECT_GT(record["round_trip"]["median_us"].get<double>(), 0.0);
  EXPECT_LE(record["round_trip"]["min_us"].get<double>(),
            record["round_trip"]["median_us"].get<double>());
  EXPECT_GE(record["round_trip"]["p90_us"].get<double>(),
            record["round_trip"]["median_us"].get<double>());
  EXPECT_GT(record["stream"]["bytes_sent"].get<int64_t>(), 0);
  EXPECT_EQ(record["stream"]["bytes_received"], record["stream"]["bytes_sent"]);
  EXPECT_EQ(record["stream"]["wrong"], 0);
  EXPECT_TRUE(record.contains("environment"));
}

// Ranks 0 and 1 on host "a", rank 2 on host "b": rank 2 is the partner.
TEST(LinkRunTest, LoopbackAsTwoHosts) {
  const std::string json_path =
      ::testing::TempDir() + "kolo_bench_link_loopback.json";
  std::remove(json_path.c_str());
  const std::string program =
      std::string(
          "if [ \"$KOLO_RANK\" = 2 ]; then export KOLO_HOST_ID=b; "
          "else export KOLO_HOST_ID=a; fi; exec ") +
      KOLO_BENCH_PATH + " link --pings 200 --warmup 20 --seconds 0.3 --json " +
      json_path;
  RunResult r = RunProgram(
      {KOLORUN_PATH, "-np", "3", "--backend", "gloo", "/bin/sh", "-c", program},
      {}, std::chrono::seconds(90));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("between rank 0 (host a, 127.0.0.1) and rank 2 "
                               "(host b, 127.0.0.1)"));
  EXPECT_THAT(r.out, HasSubstr("Out of bounds values : 0 OK"));
  const nlohmann::json record = ReadRecord(json_path);
  ExpectRightRecord(record);
  EXPECT_EQ(record["np"], 3);
  EXPECT_EQ(record["round_trip"]["iters"], 200);
  EXPECT_EQ(record["endpoints"][0]["rank"], 0);
  EXPECT_EQ(record["endpoints"][1]["rank"], 2);
  EXPECT_EQ(record["endpoints"][1]["host"], "b");
  std::remove(json_path.c_str());
}

TEST(LinkRunTest, OneHostIsRefused) {
  RunResult r = RunProgram({KOLORUN_PATH, "-np", "2", KOLO_BENCH_PATH, "link"},
                           {}, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("measures TCP between two hosts"));
}

// Two namespaces with tbf at 100 Mbit/s: the stream's rate is the shaped
// one (within what TCP's headers and tbf's burst allow) and the endpoints
// are the hosts' cluster addresses.
TEST(LinkNetnsTest, FindsTheShapedRate) {
  const std::string why = WhyNetnsUnavailable();
  KOLO_REQUIRE_OR_SKIP(why.empty(), "network namespaces: " << why);
  NetnsCluster::Options options;
  options.rate = "100mbit";
  auto cluster = NetnsCluster::Create(2, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const auto& hosts = (*cluster)->hosts();
  const std::string json_path =
      ::testing::TempDir() + "kolo_bench_link_netns.json";
  std::remove(json_path.c_str());
  const std::string command =
      std::string(KOLORUN_PATH) + " -H " + hosts[0].name + ":2," +
      hosts[1].name + ":1 --remote-shell 'ip netns exec {host}' " +
      KOLO_BENCH_PATH + " link --pings 200 --seconds 1 --json " + json_path;
  RunResult r = (*cluster)->RunIn(hosts[0], command, std::chrono::seconds(90));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const nlohmann::json record = ReadRecord(json_path);
  ExpectRightRecord(record);
  EXPECT_EQ(record["endpoints"][0]["address"], hosts[0].address);
  EXPECT_EQ(record["endpoints"][1]["address"], hosts[1].address);
  EXPECT_EQ(record["endpoints"][1]["rank"], 2);
  EXPECT_EQ(record["endpoints"][1]["host"], hosts[1].name);
  const double mbit = record["stream"]["gbit_per_s"].get<double>() * 1000;
  EXPECT_GT(mbit, 70.0);
  EXPECT_LT(mbit, 110.0);
  EXPECT_TRUE((*cluster)->Down().ok());
  std::remove(json_path.c_str());
}

}  // namespace
