// The text format, byte for byte: HELP and TYPE once per family, the ranks'
// series merged under them, label escaping, histograms' cumulative buckets
// ending in +Inf with _sum and _count, and numbers written so they read
// back exactly.
#include "metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "metrics/arena.h"

namespace kolo {
namespace metrics {
namespace {

TEST(FormatNumberTest, ShortestTextThatReadsBack) {
  EXPECT_EQ(FormatNumber(0), "0");
  EXPECT_EQ(FormatNumber(12), "12");
  EXPECT_EQ(FormatNumber(0.1), "0.1");
  EXPECT_EQ(FormatNumber(2.5e-4), "0.00025");
  EXPECT_EQ(FormatNumber(384559523414), "384559523414");
  EXPECT_EQ(FormatNumber(1e21), "1e+21");
  EXPECT_EQ(FormatNumber(1e-5), "1e-05");
  EXPECT_EQ(FormatNumber(-3.75), "-3.75");
  EXPECT_EQ(FormatNumber(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatNumber(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatNumber(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatNumber(std::nan("")), "NaN");
}

TEST(EscapeTest, LabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeHelp("a\\b\"c\nd"), "a\\\\b\"c\\nd");
}

ArenaSnapshot Rank(int32_t rank, double ops, uint64_t fast, uint64_t slow,
                   uint64_t over) {
  ArenaSnapshot snapshot;
  snapshot.rank = rank;
  snapshot.job = "mnist \"run\"";
  snapshot.host = "h1";
  SeriesSnapshot counter;
  counter.type = MetricType::kCounter;
  counter.name = "kolo_operations_total";
  counter.help = "Operations.\nAll of them.";
  counter.labels = "op=\"allreduce\"";
  counter.value = ops;
  SeriesSnapshot histogram;
  histogram.type = MetricType::kHistogram;
  histogram.name = "kolo_wait_seconds";
  histogram.help = "Waits.";
  histogram.bounds = {0.001, 0.5};
  histogram.bucket_counts = {fast, slow, over};
  histogram.value = 1.25;
  // Ranks list their series in any order; the output does not.
  snapshot.series = {histogram, counter};
  return snapshot;
}

TEST(RenderTextTest, TwoRanksByteForByte) {
  std::vector<Family> families =
      FamiliesOf({Rank(1, 7, 1, 0, 2), Rank(0, 3, 2, 1, 0)});
  EXPECT_EQ(RenderText(families),
            "# HELP kolo_operations_total Operations.\\nAll of them.\n"
            "# TYPE kolo_operations_total counter\n"
            "kolo_operations_total{job=\"mnist \\\"run\\\"\",rank=\"0\","
            "host=\"h1\",op=\"allreduce\"} 3\n"
            "kolo_operations_total{job=\"mnist \\\"run\\\"\",rank=\"1\","
            "host=\"h1\",op=\"allreduce\"} 7\n"
            "# HELP kolo_wait_seconds Waits.\n"
            "# TYPE kolo_wait_seconds histogram\n"
            "kolo_wait_seconds_bucket{job=\"mnist \\\"run\\\"\",rank=\"0\","
            "host=\"h1\",le=\"0.001\"} 2\n"
            "kolo_wait_seconds_bucket{job=\"mnist \\\"run\\\"\",rank=\"0\","
            "host=\"h1\",le=\"0.5\"} 3\n"
            "kolo_wait_seconds_bucket{job=\"mnist \\\"run\\\"\",rank=\"0\","
            "host=\"h1\",le=\"+Inf\"} 3\n"
            "kolo_wait_seconds_sum{job=\"mnist \\\"run\\\"\",rank=\"0\","
            "host=\"h1\"} 1.25\n"
            "kolo_wait_seconds_count{job=\"mnist \\\"run\\\"\",rank=\"0\","
            "host=\"h1\"} 3\n"
            "kolo_wait_seconds_bucket{job=\"mnist \\\"run\\\"\",rank=\"1\","
            "host=\"h1\",le=\"0.001\"} 1\n"
            "kolo_wait_seconds_bucket{job=\"mnist \\\"run\\\"\",rank=\"1\","
            "host=\"h1\",le=\"0.5\"} 1\n"
            "kolo_wait_seconds_bucket{job=\"mnist \\\"run\\\"\",rank=\"1\","
            "host=\"h1\",le=\"+Inf\"} 3\n"
            "kolo_wait_seconds_sum{job=\"mnist \\\"run\\\"\",rank=\"1\","
            "host=\"h1\"} 1.25\n"
            "kolo_wait_seconds_count{job=\"mnist \\\"run\\\"\",rank=\"1\","
            "host=\"h1\"} 3\n");
}

TEST(RenderTextTest, ConflictingTypeIsDroppedNotRendered) {
  ArenaSnapshot other = Rank(1, 7, 0, 0, 0);
  other.series[1].type = MetricType::kGauge;  // kolo_operations_total
  std::string text = RenderText(FamiliesOf({Rank(0, 3, 0, 0, 0), other}));
  EXPECT_NE(text.find("rank=\"0\",host=\"h1\",op=\"allreduce\"} 3"),
            std::string::npos);
  EXPECT_EQ(text.find("op=\"allreduce\"} 7"), std::string::npos) << text;
}

TEST(RenderTextTest, MergeAddsHostSeriesAndSorts) {
  std::vector<Family> families = FamiliesOf({Rank(0, 1, 0, 0, 0)});
  Family host{"kolo_host_network_receive_bytes_total",
              "Bytes.",
              MetricType::kCounter,
              {},
              {}};
  host.series.push_back({"job=\"j\",host=\"h1\",interface=\"lo\"", 42, {}});
  MergeFamilies({host}, &families);
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].name, "kolo_host_network_receive_bytes_total");
  EXPECT_NE(RenderText(families).find(
                "kolo_host_network_receive_bytes_total{job=\"j\",host=\"h1\","
                "interface=\"lo\"} 42\n"),
            std::string::npos);
}

}  // namespace
}  // namespace metrics
}  // namespace kolo
