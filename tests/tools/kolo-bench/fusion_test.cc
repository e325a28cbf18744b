// Tests of kolo-bench fusion's pure pieces: ResNet-50's parameter table,
// the modes, the closed-form inputs and expectations, the spread of step
// times and the table and JSON built from results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusion.h"
#include "table.h"

namespace kolo::bench {
namespace {

const ParameterShape& Find(const std::vector<ParameterShape>& params,
                           const std::string& name) {
  for (const ParameterShape& p : params) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no parameter " << name;
  return params.front();
}

TEST(ResNet50Test, HasTorchvisionsParameterCount) {
  const std::vector<ParameterShape> params = ResNet50Parameters();
  EXPECT_EQ(params.size(), 161u);
  int64_t elements = 0;
  for (const ParameterShape& p : params) elements += p.Elements();
  EXPECT_EQ(elements, 25'557'032);
}

TEST(ResNet50Test, NamesAndShapesFollowTorchvision) {
  const std::vector<ParameterShape> params = ResNet50Parameters();
  EXPECT_EQ(params.front().name, "conv1.weight");
  EXPECT_EQ(params.front().dims, (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(params.back().name, "fc.bias");
  EXPECT_EQ(params.back().dims, (std::vector<int64_t>{1000}));
  EXPECT_EQ(Find(params, "fc.weight").dims, (std::vector<int64_t>{1000, 2048}));
  EXPECT_EQ(Find(params, "layer1.0.downsample.0.weight").dims,
            (std::vector<int64_t>{256, 64, 1, 1}));
  EXPECT_EQ(Find(params, "layer3.5.conv2.weight").dims,
            (std::vector<int64_t>{256, 256, 3, 3}));
  EXPECT_EQ(Find(params, "layer4.0.conv1.weight").dims,
            (std::vector<int64_t>{512, 1024, 1, 1}));
  EXPECT_EQ(Find(params, "layer4.2.bn3.bias").dims,
            (std::vector<int64_t>{2048}));

  // Only the first block of a stage has a shortcut projection; names are
  // unique (the runtime identifies operations by them).
  int downsamples = 0;
  std::vector<std::string> names;
  for (const ParameterShape& p : params) {
    names.push_back(p.name);
    if (p.name.find("downsample.0.weight") != std::string::npos) {
      ++downsamples;
      EXPECT_EQ(p.name.find(".0.downsample"), 6u) << p.name;
    }
  }
  EXPECT_EQ(downsamples, 4);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

TEST(FusionModesTest, RuntimeIsTheBaselineAndTheOthersTurnThingsOff) {
  const std::vector<FusionMode>& modes = AllFusionModes();
  ASSERT_EQ(modes.size(), 5u);
  EXPECT_STREQ(modes[0].name, "runtime");
  EXPECT_EQ(modes[0].engine, FusionEngine::kRuntime);
  EXPECT_EQ(modes[0].fusion_threshold, nullptr);
  EXPECT_EQ(modes[0].cache_capacity, nullptr);
  EXPECT_EQ(modes[0].op, ReduceOp::kAverage);
  EXPECT_STREQ(modes[1].name, "no-fusion-no-cache");
  EXPECT_STREQ(modes[1].fusion_threshold, "0");
  EXPECT_STREQ(modes[1].cache_capacity, "0");
  EXPECT_STREQ(modes[2].name, "raw");
  EXPECT_EQ(modes[2].engine, FusionEngine::kRawBackend);
  // Like for like: raw averages as the runtime does, and the -sum modes
  // compare the two without the division.
  EXPECT_EQ(modes[2].op, ReduceOp::kAverage);
  EXPECT_STREQ(modes[3].name, "runtime-sum");
  EXPECT_EQ(modes[3].engine, FusionEngine::kRuntime);
  EXPECT_EQ(modes[3].op, ReduceOp::kSum);
  EXPECT_STREQ(modes[4].name, "raw-sum");
  EXPECT_EQ(modes[4].engine, FusionEngine::kRawBackend);
  EXPECT_EQ(modes[4].op, ReduceOp::kSum);
}

// The expectations agree with reducing the inputs directly, for a few
// world sizes, tensors and steps.
TEST(FusionValuesTest, ExpectationsAreTheReducedInputs) {
  for (int32_t n : {1, 2, 3, 8}) {
    for (int64_t tensor : {0, 5, 160}) {
      for (int64_t step : {0, 1, 7, 11}) {
        double sum = 0;
        for (int32_t r = 0; r < n; ++r) sum += FusionInput(tensor, step, r);
        EXPECT_EQ(FusionExpected(ReduceOp::kSum, tensor, step, n), sum);
        EXPECT_EQ(FusionExpected(ReduceOp::kAverage, tensor, step, n),
                  static_cast<float>(sum / n));
      }
    }
  }
  EXPECT_TRUE(std::isnan(FusionExpected(ReduceOp::kMax, 0, 0, 2)));
}

TEST(FusionValuesTest, ConsecutiveStepsExpectDifferentValues) {
  // So a step that writes nothing cannot pass on the last step's output.
  for (int64_t step = 0; step < 16; ++step) {
    EXPECT_NE(FusionExpected(ReduceOp::kAverage, 3, step, 2),
              FusionExpected(ReduceOp::kAverage, 3, step + 1, 2));
  }
}

TEST(GradientBufferTest, CountsEveryWrongElement) {
  GradientBuffer buffer({{"a", {2, 3}}, {"b", {4}}});
  EXPECT_EQ(buffer.size(), 2u);
  EXPECT_EQ(buffer.elements(), 10);
  EXPECT_EQ(buffer.count(1), 4);
  EXPECT_EQ(buffer.tensor(1) - buffer.tensor(0), 6);

  // Two ranks: reduce their inputs by hand into the buffer.
  const int32_t n = 2;
  const int64_t step = 5;
  GradientBuffer other({{"a", {2, 3}}, {"b", {4}}});
  buffer.Fill(step, 0);
  other.Fill(step, 1);
  EXPECT_EQ(buffer.tensor(1)[0], FusionInput(1, step, 0));
  EXPECT_EQ(other.tensor(0)[5], FusionInput(0, step, 1));
  // Unreduced inputs are wrong everywhere.
  EXPECT_EQ(buffer.CountWrong(ReduceOp::kSum, step, n), 10);
  for (size_t i = 0; i < buffer.size(); ++i) {
    for (int64_t k = 0; k < buffer.count(i); ++k) {
      buffer.tensor(i)[k] += other.tensor(i)[k];
    }
  }
  EXPECT_EQ(buffer.CountWrong(ReduceOp::kSum, step, n), 0);
  EXPECT_EQ(buffer.CountWrong(ReduceOp::kSum, step + 1, n), 10);
  buffer.tensor(1)[3] += 1;
  EXPECT_EQ(buffer.CountWrong(ReduceOp::kSum, step, n), 1);
}

TEST(SpreadTest, MedianMinAndMax) {
  Spread odd = SpreadOf({5, 1, 3});
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 5);
  Spread even = SpreadOf({4, 1, 2, 10});
  EXPECT_EQ(even.median, 3);
  EXPECT_EQ(even.max, 10);
  Spread empty = SpreadOf({});
  EXPECT_EQ(empty.median, 0);
}

TEST(FusionFlagsTest, NamesTheBadFlag) {
  EXPECT_TRUE(ParseFusionFlags(FusionFlags{}).ok());
  FusionFlags flags;
  flags.steps = 0;
  Status status = ParseFusionFlags(flags);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--steps 0"), std::string::npos);
  flags = FusionFlags{};
  flags.warmup = -1;
  EXPECT_NE(ParseFusionFlags(flags).message().find("--warmup"),
            std::string::npos);
  flags = FusionFlags{};
  flags.repeat = 0;
  EXPECT_NE(ParseFusionFlags(flags).message().find("--repeat"),
            std::string::npos);
}

ModeResult MakeResult(const FusionMode& mode, bool runtime) {
  ModeResult result;
  result.mode = &mode;
  result.step_seconds = {{0.010, 0.030}, {0.020, 0.040}};
  result.collectives = 8;
  if (runtime) {
    result.fusion_threshold = "134217728";
    result.cache_capacity = "1024";
    result.cache_hits = 1288;
  }
  return result;
}

TEST(FusionTableTest, RowsLineUpUnderTheColumns) {
  const ModeResult runtime = MakeResult(AllFusionModes()[0], true);
  ModeResult raw = MakeResult(AllFusionModes()[2], false);
  EXPECT_EQ(runtime.TimedSteps(), 4);
  EXPECT_DOUBLE_EQ(runtime.StepMilliseconds().median, 25.0);

  const Table table = FusionTable();
  const std::vector<std::string> header = table.HeaderLines();
  ASSERT_EQ(header.size(), 3u);  // groups, titles, units
  EXPECT_NE(header[0].find("step time"), std::string::npos);
  EXPECT_NE(header[1].find("median"), std::string::npos);

  const std::vector<std::string> cells = FusionRowCells(runtime, 12.5);
  EXPECT_EQ(cells, (std::vector<std::string>{"runtime", "134217728", "1024",
                                             "25.00", "10.00", "40.00", "2.0",
                                             "322.0", "2.00", "0"}));
  raw.wrong = 3;
  const std::vector<std::string> raw_cells = FusionRowCells(raw, 25.0);
  EXPECT_EQ(raw_cells[1], "-");
  EXPECT_EQ(raw_cells[7], "-");
  EXPECT_EQ(raw_cells[8], "1.00");
  EXPECT_EQ(raw_cells[9], "3");
  EXPECT_EQ(table.Row(cells).size(), header[1].size());
}

// Each runtime mode is set beside the raw mode that reduces as it does,
// and its breakdown leaves as rest what enqueue, negotiation and the
// engine do not explain.
TEST(FusionBreakdownTest, RestIsWhatTheCountersDoNotExplain) {
  std::vector<ModeResult> results;
  for (const FusionMode& mode : AllFusionModes()) {
    results.push_back(MakeResult(mode, mode.engine == FusionEngine::kRuntime));
  }
  EXPECT_EQ(RawPeerOf(results[0], results), &results[2]);
  EXPECT_EQ(RawPeerOf(results[3], results), &results[4]);
  ModeResult& runtime = results[0];
  runtime.cycles = 6;               // 4 steps
  runtime.enqueue_seconds = 0.004;  // 1 ms a step
  runtime.negotiation_seconds = 0.002;
  runtime.engine_seconds = 0.080;
  results[2].step_seconds = {{0.02, 0.0125}, {0.0125, 0.01}};
  const std::vector<std::string> cells =
      BreakdownRowCells(runtime, RawPeerOf(runtime, results));
  // Mean step 25 ms: 1 enqueue + 0.5 negotiate + 20 engine leaves 3.5.
  EXPECT_EQ(cells,
            (std::vector<std::string>{"runtime", "1.5", "1.00", "0.50", "20.00",
                                      "3.50", "25.00", "2.00"}));
  EXPECT_EQ(BreakdownTable().Row(cells).size(),
            BreakdownTable().HeaderLines()[1].size());
  EXPECT_EQ(BreakdownRowCells(runtime, nullptr).back(), "n/a");
}

TEST(FusionJsonTest, CarriesEveryModeAndItsSteps) {
  const std::vector<ModeResult> results = {
      MakeResult(AllFusionModes()[0], true),
      MakeResult(AllFusionModes()[2], false)};
  const GradientBuffer gradients({{"a", {3}}});
  const nlohmann::json json = FusionResultsToJson(
      FusionFlags{}, BackendKind::kGloo, 2, gradients, results);
  EXPECT_EQ(json["benchmark"], "fusion");
  EXPECT_EQ(json["np"], 2);
  EXPECT_EQ(json["config"]["repeat"], 3);
  EXPECT_EQ(json["model"]["elements"], 3);
  ASSERT_EQ(json["modes"].size(), 2u);
  const nlohmann::json& runtime = json["modes"][0];
  EXPECT_EQ(runtime["mode"], "runtime");
  EXPECT_EQ(runtime["redop"], "avg");
  EXPECT_EQ(runtime["fusion_threshold_bytes"], 134217728);
  EXPECT_EQ(runtime["step_ms"].size(), 2u);
  EXPECT_DOUBLE_EQ(runtime["step_ms"][1][0].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(runtime["cache_hits_per_step"].get<double>(), 322.0);
  EXPECT_DOUBLE_EQ(runtime["ratio"].get<double>(), 1.0);
  const nlohmann::json& raw = json["modes"][1];
  EXPECT_EQ(raw["redop"], "avg");
  EXPECT_TRUE(raw["cache_hits_per_step"].is_null());
  EXPECT_TRUE(raw["fusion_threshold_bytes"].is_null());
  EXPECT_DOUBLE_EQ(raw["collectives_per_step"].get<double>(), 2.0);
  EXPECT_EQ(json["out_of_bounds"], 0);
}

}  // namespace
}  // namespace kolo::bench
