// kolo-bench report's pure pieces: the chart helpers' ticks, scales and
// escaping, the geometry of a known chart, reading hand-written records
// into the expected series, and the errors for files it cannot use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report.h"
#include "svg_chart.h"

namespace kolo::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

TEST(ReportChart, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(EscapeHtml("<a href=\"x\">Tom & 'Jerry'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  EXPECT_EQ(EscapeHtml("plain, 100% ÷"), "plain, 100% ÷");
}

TEST(ReportChart, NiceTicksAreRoundAndCoverTheData) {
  // 97 / 5 = 19.4, rounded up to a step of 20.
  EXPECT_THAT(NiceTicks(0, 97, 5), ElementsAre(0, 20, 40, 60, 80, 100));
  // 0.9 / 4 = 0.225, rounded up to 0.5.
  EXPECT_THAT(NiceTicks(0, 0.9, 4), ElementsAre(0, 0.5, 1.0));
  // Exactly on a step: no extra tick past 100.
  EXPECT_THAT(NiceTicks(0, 100, 5), ElementsAre(0, 20, 40, 60, 80, 100));
  // Nothing to show but zero: 0 to 1 in steps of 0.2.
  const std::vector<double> zero = NiceTicks(0, 0, 5);
  ASSERT_EQ(zero.size(), 6u);
  EXPECT_DOUBLE_EQ(zero.back(), 1.0);
  // One value, 3: widened by 10% either side, steps of 0.2 around it.
  const std::vector<double> three = NiceTicks(3, 3, 5);
  ASSERT_EQ(three.size(), 5u);
  EXPECT_NEAR(three.front(), 2.6, 1e-9);
  EXPECT_NEAR(three.back(), 3.4, 1e-9);
}

TEST(ReportChart, Log2TicksThinToMultiplesOfK) {
  // 8 B to 256 MiB: exponents 3..28, 26 of them; every 2nd leaves 13, every
  // 4th leaves 7, and multiples of 4 put a label on 64K and 1M.
  EXPECT_THAT(Log2TickExponents(8, 256 << 20, 10),
              ElementsAre(4, 8, 12, 16, 20, 24, 28));
  EXPECT_THAT(Log2TickExponents(8, 64, 10), ElementsAre(3, 4, 5, 6));
  // Not powers of two: from 4 (below 5) to 128 (above 100).
  EXPECT_THAT(Log2TickExponents(5, 100, 10), ElementsAre(2, 3, 4, 5, 6, 7));
  // A single size gets a doubling either side.
  EXPECT_THAT(Log2TickExponents(1024, 1024, 10), ElementsAre(9, 10, 11));
}

TEST(ReportChart, ScalesMapKnownValuesToKnownPixels) {
  // 32 is five doublings of ten from 1 to 1024: half way.
  const Scale log2 = Scale::Log2(1, 1024, 0, 100);
  EXPECT_DOUBLE_EQ(log2.Map(1), 0);
  EXPECT_DOUBLE_EQ(log2.Map(32), 50);
  EXPECT_DOUBLE_EQ(log2.Map(1024), 100);
  // SVG's y runs downwards: 0 at pixel 100, 10 at pixel 0.
  const Scale linear = Scale::Linear(0, 10, 100, 0);
  EXPECT_DOUBLE_EQ(linear.Map(2.5), 75);
  EXPECT_DOUBLE_EQ(linear.Map(10), 0);
}

TEST(ReportChart, TickAndByteLabels) {
  EXPECT_EQ(FormatTick(0.5, 0.5), "0.5");
  EXPECT_EQ(FormatTick(20, 20), "20");
  EXPECT_EQ(FormatTick(1500, 500), "1500");
  EXPECT_EQ(FormatTick(-1e-17, 0.2), "0.0");  // never "-0.0"
  EXPECT_EQ(FormatBytes(8), "8");
  EXPECT_EQ(FormatBytes(1024), "1K");
  EXPECT_EQ(FormatBytes(1536), "1.5K");
  EXPECT_EQ(FormatBytes(64 << 20), "64M");
  EXPECT_EQ(FormatBytes(double{1 << 30}), "1G");
}

TEST(ReportChart, LineChartPlacesPointsOnTheAxes) {
  // x: log2 from 8 to 64 spans the plot's width, pixels 72 to 580.
  // y: 0 to 10 in ticks of 2 spans its height, pixels 316 (0) to 16 (10).
  LineChart chart;
  chart.title = "bandwidth <test>";
  chart.x = {"size", ChartAxis::Ticks::kLog2, true, false};
  chart.y = {"GB/s", ChartAxis::Ticks::kLinear, false, true};
  chart.series.push_back({"a<b", "", false, {{64, 10}, {8, 0}, {16, 5}}});
  chart.series.push_back({"ideal", "#888888", true, {{8, 10}, {64, 10}}});
  const std::string svg = RenderLineChart(chart);
  EXPECT_THAT(svg, HasSubstr("<polyline points=\"72.0,316.0 241.3,166.0 "
                             "580.0,16.0\" fill=\"none\" stroke=\"#0072B2\""));
  EXPECT_THAT(svg, HasSubstr("<polyline points=\"72.0,16.0 580.0,16.0\" "
                             "fill=\"none\" stroke=\"#888888\" "
                             "stroke-width=\"2\" stroke-dasharray=\"6 4\""));
  // Three markers for the solid series, none for the dashed one.
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos;
       at = svg.find("<circle", at + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 3u);
  // Tick labels in bytes, and every name escaped.
  EXPECT_THAT(svg, HasSubstr(">64</text>"));
  EXPECT_THAT(svg, HasSubstr(">10</text>"));
  EXPECT_THAT(svg, HasSubstr("a&lt;b"));
  EXPECT_THAT(svg, HasSubstr("bandwidth &lt;test&gt;"));
  EXPECT_THAT(svg, Not(HasSubstr("a<b")));
  EXPECT_THAT(svg, Not(HasSubstr("http")));
}

TEST(ReportChart, BarLengthIsProportionalToItsValue) {
  // The value axis runs from pixel 244 (0) to 700 (100): 50 is 228 long.
  // One legend row puts the plot's top at 40; the first bar starts half a
  // group gap (6) below it.
  BarChart chart;
  chart.title = "accuracy";
  chart.value_suffix = "%";
  chart.max_value = 100;
  chart.categories = {"config & one", "config two"};
  chart.series.push_back({"kolo np 1", "", {50.0, std::nullopt}});
  const std::string svg = RenderBarChart(chart);
  EXPECT_THAT(svg, HasSubstr("<rect x=\"244.0\" y=\"46.0\" width=\"228.0\""));
  EXPECT_THAT(svg, HasSubstr(">50%</text>"));
  EXPECT_THAT(svg, HasSubstr("config &amp; one"));
  // The second category has no value, so one bar in all (plus the
  // background and the legend's swatch).
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos;
       at = svg.find("<rect", at + 1)) {
    ++rects;
  }
  EXPECT_EQ(rects, 3u);
}

// Two training records of one configuration (the second re-measures kolo at
// np 2 and adds np 4) and one of another, as kolo-bench train writes them.
const char* kTrainRecords = R"([
  {"tool": "an earlier run"},
  {"tool": "kolo-bench train",
   "config": {"model": "lenet", "dataset": "synthetic", "batch_size": 32,
              "scaling": "weak", "threads": 1},
   "environment": {"cpu_model": "Test CPU", "cores": 2},
   "rows": [
     {"framework": "torch-ddp", "np": 1, "images_per_second_mean": 800},
     {"framework": "kolo", "np": 1, "images_per_second_mean": 1000},
     {"framework": "kolo", "np": 2, "images_per_second_mean": 1500},
     {"framework": "torch-ddp", "np": 2, "images_per_second_mean": 1200},
     {"framework": "libtorch", "missing": "not installed"}]},
  {"tool": "kolo-bench train",
   "config": {"model": "lenet", "dataset": "synthetic", "batch_size": 32,
              "scaling": "weak", "threads": 1},
   "environment": {"cpu_model": "Test CPU", "cores": 2},
   "rows": [
     {"framework": "kolo", "np": 2, "images_per_second_mean": 1800},
     {"framework": "kolo", "np": 4, "images_per_second_mean": 3200}]},
  {"tool": "kolo-bench train", "study": "small-cnn",
   "config": {"model": "lenet", "dataset": "fashion-mnist", "batch_size": 64,
              "scaling": "strong", "threads": 2},
   "rows": [
     {"framework": "kolo", "np": 1, "images_per_second_mean": 900,
      "test_accuracy": 89.5, "epochs": 2, "wall_seconds": 30}]}
])";

TEST(ReportRead, TrainRecordsBecomeOneSeriesPerFramework) {
  Results results;
  ASSERT_TRUE(
      AddResults(nlohmann::json::parse(kTrainRecords), "train.json", &results)
          .ok());
  ASSERT_EQ(results.train.size(), 3u);
  ASSERT_EQ(results.environments.size(), 1u);  // the same machine twice
  EXPECT_THAT(results.environments[0].sources, ElementsAre("train.json"));

  const std::vector<TrainConfigView> views = GroupTrain(results);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].config.Label(),
            "lenet on synthetic, batch 32, weak scaling, 1 thread");
  EXPECT_EQ(views[1].config.Label(),
            "small-cnn: lenet on fashion-mnist, batch 64, strong scaling, 2 "
            "threads");
  EXPECT_THAT(views[0].missing, ElementsAre(Pair("libtorch", "not installed")));

  // kolo first; its np 2 is the later record's 1800, not 1500.
  const std::vector<ChartSeries> throughput = ThroughputSeries(views[0]);
  ASSERT_EQ(throughput.size(), 2u);
  EXPECT_EQ(throughput[0].name, "kolo");
  EXPECT_THAT(throughput[0].points,
              ElementsAre(Pair(1, 1000), Pair(2, 1800), Pair(4, 3200)));
  EXPECT_EQ(throughput[1].name, "torch-ddp");
  EXPECT_THAT(throughput[1].points, ElementsAre(Pair(1, 800), Pair(2, 1200)));

  // Efficiency: 1800 / (2 * 1000) = 90%, 3200 / (4 * 1000) = 80%,
  // 1200 / (2 * 800) = 75%.
  const std::vector<ChartSeries> efficiency = EfficiencySeries(views[0]);
  ASSERT_EQ(efficiency.size(), 2u);
  EXPECT_THAT(efficiency[0].points,
              ElementsAre(Pair(1, 100), Pair(2, 90), Pair(4, 80)));
  EXPECT_THAT(efficiency[1].points, ElementsAre(Pair(1, 100), Pair(2, 75)));
  // One worker count only: no efficiency to draw.
  EXPECT_TRUE(EfficiencySeries(views[1]).empty());
  ASSERT_EQ(views[1].frameworks.size(), 1u);
  const TrainRow& row = views[1].frameworks[0].second.at(1);
  ASSERT_TRUE(row.test_accuracy && row.epochs && row.wall_seconds);
  EXPECT_EQ(*row.test_accuracy, 89.5);
  EXPECT_EQ(*row.epochs, 2);
  EXPECT_EQ(*row.wall_seconds, 30);
}

// A collectives record with the optional raw-engine peers and memcpy line,
// and an older single-object record with neither.
TEST(ReportRead, CollectivesRecordsBecomeOneChartPerCollective) {
  const char* kWithPeers = R"([{
    "benchmark": "collectives", "backend": "mpi", "np": 2,
    "rows": [
      {"collective": "allreduce", "size": 1024, "type": "float32",
       "out_of_place": {"busbw_gbps": 1.5, "wrong": 0},
       "in_place": {"busbw_gbps": 1.4, "wrong": null}},
      {"collective": "allreduce", "size": 2048, "type": "float32",
       "out_of_place": {"busbw_gbps": 3.0, "wrong": 1},
       "in_place": {"busbw_gbps": 2.9, "wrong": 2}}],
    "peers": [{"engine": "mpi", "rows": [
      {"collective": "allreduce", "size": 1024, "type": "float32",
       "out_of_place": {"busbw_gbps": 2.0}}]}],
    "memcpy_2thread": [{"size": 1024, "gbps": 9.5}]}])";
  const char* kOlder = R"({
    "benchmark": "collectives", "backend": "gloo", "np": 2,
    "rows": [{"collective": "allreduce", "size": 1024, "type": "float32",
              "out_of_place": {"busbw_gbps": 0.5}, "in_place": {}}]})";
  Results results;
  ASSERT_TRUE(
      AddResults(nlohmann::json::parse(kWithPeers), "a.json", &results).ok());
  ASSERT_TRUE(
      AddResults(nlohmann::json::parse(kOlder), "b.json", &results).ok());
  const std::vector<BandwidthView> views = GroupCollectives(results);
  ASSERT_EQ(views.size(), 1u);
  const BandwidthView& view = views[0];
  EXPECT_EQ(view.collective, "allreduce");
  EXPECT_EQ(view.np, 2);
  // kolo's series before the raw engine's, though read after it.
  ASSERT_EQ(view.series.size(), 3u);
  EXPECT_EQ(view.series[0].first, "kolo mpi");
  EXPECT_EQ(view.series[1].first, "kolo gloo");
  EXPECT_EQ(view.series[2].first, "raw mpi");
  EXPECT_THAT(view.kolo, ElementsAre(true, true, false));
  EXPECT_THAT(view.series[0].second,
              ElementsAre(Pair(1024, 1.5), Pair(2048, 3.0)));
  EXPECT_THAT(view.series[2].second, ElementsAre(Pair(1024, 2.0)));
  EXPECT_THAT(view.memcpy_gbps, ElementsAre(Pair(1024, 9.5)));
  EXPECT_EQ(view.wrong, 3);

  // The table: kolo mpi ÷ raw mpi at 1K is 1.5 / 2.0.
  const std::string html = RenderReport(results);
  EXPECT_THAT(html, HasSubstr("<th>kolo mpi ÷ raw mpi</th>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">0.75</td>"));
  EXPECT_THAT(html, HasSubstr("Warning: 3 values were wrong"));
  // No training data: those sections say so instead of drawing.
  EXPECT_THAT(html, HasSubstr("No training records in these files"));
  EXPECT_THAT(html, HasSubstr("No training row has a test accuracy"));
}

TEST(ReportRead, AFileWithoutRecordsIsNamed) {
  Results results;
  const Status status =
      AddResults(nlohmann::json::parse(R"([{"benchmark": "fusion"}, 3])"),
                 "fusion.json", &results);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("fusion.json: no kolo-bench train, collectives or "
                        "zero records (nor pipeline or checkpoint ones) among "
                        "its 2 JSON values"));
}

TEST(ReportRead, MissingAndGarbageFilesAreNamed) {
  const std::string dir =
      ::testing::TempDir() + "kolo_report_read_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string missing = dir + "/missing.json";
  StatusOr<Results> r = ReadResults({missing});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr(missing + ": no such file"));

  const std::string garbage = dir + "/garbage.json";
  std::ofstream(garbage) << "kolo-bench was here {";
  r = ReadResults({garbage});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(garbage + ": not JSON"));
  EXPECT_THAT(r.status().message(), HasSubstr("line 1, column 1"));

  r = ReadResults({dir});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(dir + ": not a regular file"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::bench
