// The exporter over real HTTP on loopback (an OS-chosen port): /metrics in
// the text format with its content type, counters that only grow from one
// scrape to the next, the arenas of several "ranks" (files in a folder, as
// kolorun's ranks leave them) merged into one scrape, /api/job's JSON, and
// a 404 that names the paths it does serve.
#include "metrics/exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <regex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "metrics/system.h"
#include "net/socket.h"
#include "testing/http_get.h"
#include "testing/scratch_dir.h"

namespace kolo {
namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using Reply = kolo::testing::HttpReply;

Reply Get(int port, const std::string& path,
          const std::string& method = "GET") {
  Reply reply = kolo::testing::HttpRequest(port, method, path);
  EXPECT_TRUE(reply.sent) << method << " " << path << " reached no server";
  return reply;
}

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    for (int rank = 0; rank < 4; ++rank) {
      auto arena = Arena::CreateFile(
          dir_.path() + "/rank-" + std::to_string(rank) + ".arena", "job7",
          "h1", rank);
      ASSERT_TRUE(arena.ok()) << arena.status().message();
      arenas_.push_back(*std::move(arena));
    }
    ExporterOptions options;
    options.job = "job7";
    options.host = "h1";
    options.arena_directory = dir_.path();
    options.sample_period = std::chrono::milliseconds(50);
    auto exporter = MetricsExporter::Start(options);
    ASSERT_TRUE(exporter.ok()) << exporter.status().message();
    exporter_ = *std::move(exporter);
  }
  void TearDown() override {
    exporter_.reset();
    arenas_.clear();
  }

  std::atomic<uint64_t>* Series(int rank, MetricType type,
                                const std::string& name,
                                const std::vector<double>& bounds = {}) {
    auto slot = arenas_[rank]->Register(type, name, "Help of " + name + ".", "",
                                        bounds);
    EXPECT_TRUE(slot.ok());
    return *slot;
  }

  kolo::testing::ScratchDir dir_{"kolo_exporter_test"};
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::unique_ptr<MetricsExporter> exporter_;
};

TEST_F(ExporterTest, ScrapeServesEveryRankInTheTextFormat) {
  for (int rank = 0; rank < 4; ++rank) {
    Series(rank, MetricType::kCounter, "kolo_train_steps_total")
        ->store(DoubleToBits(10 * rank));
  }
  Reply reply = Get(exporter_->port(), "/metrics");
  EXPECT_THAT(reply.head, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(reply.head, HasSubstr("Content-Type: text/plain; version=0.0.4; "
                                    "charset=utf-8"));
  EXPECT_THAT(reply.body, HasSubstr("# TYPE kolo_train_steps_total counter\n"));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(reply.body,
                HasSubstr("kolo_train_steps_total{job=\"job7\",rank=\"" +
                          std::to_string(rank) + "\",host=\"h1\"} " +
                          std::to_string(10 * rank) + "\n"));
  }
  // Each family once, however many ranks.
  EXPECT_EQ(reply.body.find("# TYPE kolo_train_steps_total"),
            reply.body.rfind("# TYPE kolo_train_steps_total"));
  // This process stands for every rank's pid: its figures appear.
  EXPECT_THAT(reply.body,
              HasSubstr("# TYPE kolo_process_cpu_seconds_total counter"));
  EXPECT_THAT(reply.body,
              HasSubstr("kolo_host_network_receive_bytes_total{"
                        "job=\"job7\",host=\"h1\",interface=\"lo\"}"));
}

TEST_F(ExporterTest, CountersNeverGoBackBetweenScrapes) {
  std::atomic<uint64_t>* steps =
      Series(0, MetricType::kCounter, "kolo_train_steps_total");
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    double value = 0;
    while (!stop.load()) steps->store(DoubleToBits(++value));
  });
  std::regex line(
      "kolo_train_steps_total\\{job=\"job7\",rank=\"0\","
      "host=\"h1\"\\} ([0-9.e+]+)\n");
  double previous = -1;
  for (int scrape = 0; scrape < 20; ++scrape) {
    std::string body = Get(exporter_->port(), "/metrics").body;
    std::smatch match;
    ASSERT_TRUE(std::regex_search(body, match, line)) << body;
    double value = std::stod(match[1]);
    EXPECT_GE(value, previous);
    previous = value;
  }
  stop = true;
  writer.join();
  EXPECT_GT(previous, 0);
}

TEST_F(ExporterTest, JobJsonHasRanksHistoryAndTheSlowest) {
  std::atomic<uint64_t>* samples[2] = {
      Series(0, MetricType::kCounter, "kolo_train_samples_total"),
      Series(1, MetricType::kCounter, "kolo_train_samples_total")};
  std::atomic<uint64_t>* steps[2] = {
      Series(0, MetricType::kHistogram, "kolo_train_step_seconds", {1}),
      Series(1, MetricType::kHistogram, "kolo_train_step_seconds", {1})};
  Series(1, MetricType::kGauge, "kolo_train_loss")->store(DoubleToBits(0.5));
  arenas_[1]->SetPhase(RankPhase::kRunning);
  // Rank 1's steps take three times as long.
  for (int tick = 1; tick <= 6; ++tick) {
    for (int rank = 0; rank < 2; ++rank) {
      samples[rank]->store(DoubleToBits(100.0 * tick));
      steps[rank][0].store(static_cast<uint64_t>(tick));
      steps[rank][2].store(DoubleToBits(tick * (rank == 0 ? 0.1 : 0.3)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
  }
  Reply reply = Get(exporter_->port(), "/api/job");
  EXPECT_THAT(reply.head, HasSubstr("Content-Type: application/json"));
  nlohmann::json job = nlohmann::json::parse(reply.body);
  EXPECT_EQ(job["job"], "job7");
  ASSERT_EQ(job["ranks"].size(), 4u);
  EXPECT_EQ(job["ranks"][1]["state"], "running");
  EXPECT_EQ(job["ranks"][0]["state"], "starting");
  EXPECT_EQ(job["ranks"][1]["loss"], 0.5);
  EXPECT_TRUE(job["ranks"][0]["loss"].is_null());
  EXPECT_EQ(job["slowest_rank"], 1);
  EXPECT_NEAR(job["ranks"][1]["step_seconds"].get<double>(), 0.3, 1e-9);
  double fastest = 0;
  for (const auto& rate : job["history"]["ranks"]["0"]["samples_per_second"]) {
    if (!rate.is_null()) fastest = std::max(fastest, rate.get<double>());
  }
  EXPECT_GT(fastest, 0);
  const auto& times = job["history"]["time"];
  EXPECT_GE(times.size(), 3u);
  EXPECT_EQ(job["history"]["ranks"]["1"]["loss"].size(), times.size());

  // kolorun tells how a process ended (here every "rank" is this process).
  exporter_->RecordExit(getpid(), "exited with code 3", true);
  job = nlohmann::json::parse(Get(exporter_->port(), "/api/job").body);
  EXPECT_EQ(job["ranks"][2]["state"], "exited with code 3");
  EXPECT_EQ(job["ranks"][2]["failed"], true);
}

TEST_F(ExporterTest, UnknownPathIs404AndOtherMethods405) {
  Reply missing = Get(exporter_->port(), "/nothing");
  EXPECT_THAT(missing.head, StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(missing.body, HasSubstr("/metrics"));
  Reply post = Get(exporter_->port(), "/metrics", "POST");
  EXPECT_THAT(post.head, StartsWith("HTTP/1.1 405"));
  Reply head = Get(exporter_->port(), "/metrics", "HEAD");
  EXPECT_THAT(head.head, StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(head.body, "");
  Reply page = Get(exporter_->port(), "/");
  EXPECT_THAT(page.head, HasSubstr("text/html"));
  EXPECT_THAT(page.body, HasSubstr("<html"));
}

TEST(SystemTest, ParsesNetDevAndThisProcess) {
  std::vector<InterfaceBytes> parsed = ParseNetDev(
      "Inter-|   Receive                            |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes"
      "    packets errs drop fifo colls carrier compressed\n"
      "    lo:  123456     100    0    0    0     0          0         0   "
      "654321     100    0    0    0     0       0          0\n"
      "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].name, "lo");
  EXPECT_EQ(parsed[0].received, 123456);
  EXPECT_EQ(parsed[0].transmitted, 654321);
  EXPECT_EQ(parsed[1].name, "eth0");
  EXPECT_EQ(parsed[1].transmitted, 9);
  std::optional<ProcessFigures> self = ReadProcessFigures(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_GT(self->resident_bytes, 1 << 20);
  EXPECT_GE(self->threads, 1);
  EXPECT_FALSE(ReadProcessFigures(0x7ffffff0).has_value());
}

}  // namespace
}  // namespace metrics
}  // namespace kolo
