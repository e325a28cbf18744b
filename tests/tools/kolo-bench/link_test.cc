// kolo-bench link's pure pieces: its flags, the round-trip statistics, the
// bandwidths and checks derived from a result, its table rows and JSON.
#include "link.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kolo::bench {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after "kolo-bench link") into `config`; the CLI11 error's
// text, or "" when the command line parses.
std::string ParseLink(std::vector<std::string> args, LinkConfig* config) {
  CLI::App app;
  AddLinkCommand(app, config);
  args.insert(args.begin(), {"kolo-bench", "link"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(LinkFlagsTest, DefaultsAreValid) {
  LinkConfig config;
  ASSERT_EQ(ParseLink({}, &config), "");
  ASSERT_TRUE(ValidateLinkConfig(config).ok());
  EXPECT_EQ(config.pings, 1000);
  EXPECT_EQ(config.warmup, 100);
  EXPECT_EQ(config.ping_bytes, 4096);
  EXPECT_DOUBLE_EQ(config.seconds, 1.5);
  EXPECT_EQ(config.write_bytes, 1 << 20);
  EXPECT_TRUE(config.json_path.empty());
}

TEST(LinkFlagsTest, SizesTakeSuffixes) {
  LinkConfig config;
  ASSERT_EQ(ParseLink({"--ping-bytes", "64", "--write-bytes", "2M"}, &config),
            "");
  EXPECT_EQ(config.ping_bytes, 64);
  EXPECT_EQ(config.write_bytes, 2 << 20);
  EXPECT_THAT(ParseLink({"--ping-bytes", "lots"}, &config),
              HasSubstr("--ping-bytes"));
}

TEST(LinkFlagsTest, ErrorsNameTheFlag) {
  struct Case {
    LinkConfig config;
    std::string flag;
  };
  std::vector<Case> cases(5);
  cases[0].config.pings = 0;
  cases[0].flag = "--pings 0";
  cases[1].config.warmup = -1;
  cases[1].flag = "--warmup -1";
  cases[2].config.ping_bytes = 0;
  cases[2].flag = "--ping-bytes 0";
  cases[3].config.seconds = 0;
  cases[3].flag = "--seconds 0";
  cases[4].config.write_bytes = int64_t{2} << 30;
  cases[4].flag = "--write-bytes 2147483648";
  for (const Case& c : cases) {
    const Status status = ValidateLinkConfig(c.config);
    ASSERT_FALSE(status.ok()) << c.flag;
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(status.message(), HasSubstr(c.flag));
  }
}

TEST(RoundTripStatsTest, OddCount) {
  // 1..9 microseconds, shuffled: median 5, p90 the 9th of 9 (ceil(8.1)).
  const RoundTripStats stats = SummarizeRoundTrips(
      {7e-6, 1e-6, 9e-6, 3e-6, 5e-6, 2e-6, 8e-6, 4e-6, 6e-6});
  EXPECT_NEAR(stats.median_us, 5, 1e-9);
  EXPECT_NEAR(stats.min_us, 1, 1e-9);
  EXPECT_NEAR(stats.p90_us, 9, 1e-9);
  EXPECT_NEAR(stats.mean_us, 5, 1e-9);
}

TEST(RoundTripStatsTest, EvenCountAveragesTheMiddleTwo) {
  // 1..10 microseconds: median (5 + 6) / 2, p90 the 9th of 10.
  std::vector<double> seconds;
  for (int i = 10; i >= 1; --i) seconds.push_back(i * 1e-6);
  const RoundTripStats stats = SummarizeRoundTrips(seconds);
  EXPECT_NEAR(stats.median_us, 5.5, 1e-9);
  EXPECT_NEAR(stats.min_us, 1, 1e-9);
  EXPECT_NEAR(stats.p90_us, 9, 1e-9);
  EXPECT_NEAR(stats.mean_us, 5.5, 1e-9);
}

TEST(RoundTripStatsTest, OneAndNone) {
  const RoundTripStats one = SummarizeRoundTrips({2e-6});
  EXPECT_NEAR(one.median_us, 2, 1e-9);
  EXPECT_NEAR(one.p90_us, 2, 1e-9);
  const RoundTripStats none = SummarizeRoundTrips({});
  EXPECT_EQ(none.median_us, 0);
  EXPECT_EQ(none.p90_us, 0);
}

LinkResult SampleResult() {
  LinkResult result;
  result.local = {0, "h1", "10.1.0.1"};
  result.peer = {2, "h2", "10.1.0.2"};
  result.ping_bytes = 4096;
  result.pings = 1000;
  result.round_trip = {40, 30, 60, 45};
  result.stream_bytes_sent = 250'000'000;
  result.stream_bytes_received = 250'000'000;
  result.stream_writes = 239;
  result.stream_seconds = 2;
  return result;
}

TEST(LinkResultTest, BandwidthsAndChecks) {
  LinkResult result = SampleResult();
  // 2 * 4096 B in 40 us; 250 MB in 2 s.
  EXPECT_NEAR(RoundTripGbps(result), 8192 / 40e-6 / 1e9, 1e-12);
  EXPECT_NEAR(StreamGbps(result), 0.125, 1e-12);
  EXPECT_EQ(StreamWrong(result), 0);
  EXPECT_EQ(LinkWrong(result), 0);
  result.stream_bytes_received -= 1000;
  result.ping_wrong = 2;
  EXPECT_EQ(StreamWrong(result), 1000);
  EXPECT_EQ(LinkWrong(result), 1002);
  result.stream_seconds = 0;
  result.round_trip.median_us = 0;
  EXPECT_EQ(StreamGbps(result), 0);
  EXPECT_EQ(RoundTripGbps(result), 0);
}

TEST(LinkResultTest, TableRows) {
  const std::vector<std::vector<std::string>> rows = LinkRows(SampleResult());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"roundtrip", "4096", "1000",
                                               "40.00", "30.00", "60.00",
                                               "0.205", "1.638", "0"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"stream", "250000000", "239",
                                               "2000000.00", "n/a", "n/a",
                                               "0.125", "1.000", "0"}));
  // Every cell has a column.
  EXPECT_EQ(LinkTable().columns().size(), rows[0].size());
}

TEST(LinkResultTest, Json) {
  LinkConfig config;
  config.pings = 1000;
  config.warmup = 100;
  config.ping_bytes = 4096;
  config.seconds = 2;
  config.write_bytes = 1 << 20;
  const nlohmann::json json = LinkToJson(config, 4, SampleResult());
  EXPECT_EQ(json["benchmark"], "link");
  EXPECT_EQ(json["kind"], "link");
  EXPECT_EQ(json["np"], 4);
  EXPECT_EQ(json["config"]["write_bytes"], 1 << 20);
  EXPECT_EQ(json["endpoints"][0]["address"], "10.1.0.1");
  EXPECT_EQ(json["endpoints"][1]["rank"], 2);
  EXPECT_EQ(json["endpoints"][1]["host"], "h2");
  EXPECT_DOUBLE_EQ(json["round_trip"]["median_us"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(json["round_trip"]["p90_us"].get<double>(), 60);
  EXPECT_EQ(json["stream"]["bytes_received"], 250'000'000);
  EXPECT_DOUBLE_EQ(json["stream"]["gbit_per_s"].get<double>(), 1.0);
  EXPECT_EQ(json["wrong"], 0);
  EXPECT_FALSE(json.contains("environment"));
}

}  // namespace
}  // namespace kolo::bench
