// kolo-bench checkpoint's pure pieces: the variants, both sides' command
// lines, reading a job's JSON (and naming what it lacks), the check that a
// load gave back what the save wrote, the medians, the ratios to torch-dcp
// with closed-form values, the table's cells, and the report's section.
#include "checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report.h"

namespace kolo::bench {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kMiB = 1 << 20;

CheckpointVariant Variant(const std::string& name) {
  StatusOr<std::vector<CheckpointVariant>> v = ParseCheckpointVariants(name);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? v->front() : CheckpointVariant{};
}

CheckpointTools Tools() {
  CheckpointTools tools;
  tools.kolorun = "/bin/kolorun";
  tools.worker = "/bin/kolo-bench-checkpoint-worker";
  tools.python = "/venv/bin/python";
  tools.script = "/share/torch_checkpoint.py";
  return tools;
}

bool Contains(const std::vector<std::string>& command,
              const std::vector<std::string>& run) {
  return std::search(command.begin(), command.end(), run.begin(), run.end()) !=
         command.end();
}

TEST(CheckpointVariants, InTheOrderGivenWithoutDuplicates) {
  StatusOr<std::vector<CheckpointVariant>> v =
      ParseCheckpointVariants("torch-dcp,kolo-zero2, torch-dcp,kolo-zero1");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].framework, "torch-dcp");
  EXPECT_EQ((*v)[1].framework, "kolo");
  EXPECT_EQ((*v)[1].zero_stage, 2);
  EXPECT_EQ((*v)[2].zero_stage, 1);
}

TEST(CheckpointVariants, AnUnknownOneOrNoneIsNamed) {
  StatusOr<std::vector<CheckpointVariant>> v =
      ParseCheckpointVariants("kolo-zero2,orbax");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(),
              HasSubstr("--variants: unknown variant 'orbax'"));
  EXPECT_THAT(ParseCheckpointVariants(" ,").status().message(),
              HasSubstr("--variants needs at least one variant"));
}

TEST(CheckpointCommand, KoloRunsTheWorkerUnderKolorunAtItsStage) {
  CheckpointFlags f;
  f.batch_size = 4;
  f.image_size = 28;
  const std::vector<std::string> save =
      CheckpointCommand(f, Variant("kolo-zero1"), "resnet50", true, 2,
                        "/tmp/ck", Tools(), "/tmp/s.json");
  EXPECT_TRUE(Contains(
      save, {"/bin/kolorun", "-np", "2", "--",
             "/bin/kolo-bench-checkpoint-worker", "--zero-stage", "1"}));
  EXPECT_TRUE(Contains(save, {"--mode", "save"}));
  EXPECT_TRUE(Contains(save, {"--model", "resnet50"}));
  EXPECT_TRUE(Contains(save, {"--dir", "/tmp/ck"}));
  EXPECT_TRUE(Contains(save, {"--batch-size", "4"}));
  EXPECT_TRUE(Contains(save, {"--image-size", "28"}));
  EXPECT_TRUE(Contains(save, {"--json", "/tmp/s.json"}));
  const std::vector<std::string> load =
      CheckpointCommand(f, Variant("kolo-zero2"), "resnet50", false, 4,
                        "/tmp/ck", Tools(), "/tmp/l.json");
  EXPECT_TRUE(Contains(load, {"/bin/kolorun", "-np", "4"}));
  EXPECT_TRUE(Contains(load, {"--zero-stage", "2"}));
  EXPECT_TRUE(Contains(load, {"--mode", "load"}));
}

TEST(CheckpointCommand, TorchDcpRunsTheScriptInThePeersPython) {
  const std::vector<std::string> c =
      CheckpointCommand(CheckpointFlags{}, Variant("torch-dcp"), "resnet18",
                        false, 3, "/tmp/ck", Tools(), "/tmp/l.json");
  EXPECT_TRUE(Contains(
      c, {"/venv/bin/python", "/share/torch_checkpoint.py", "--np", "3",
          "--mode", "load", "--model", "resnet18", "--dir", "/tmp/ck"}));
  EXPECT_EQ(std::count(c.begin(), c.end(), "/bin/kolorun"), 0);
  EXPECT_EQ(std::count(c.begin(), c.end(), "--zero-stage"), 0);
}

// What both programs write, at np 2.
json JobJson() {
  return json::parse(R"({
    "tool": "torch-dcp",
    "config": {"mode": "load", "np": 2, "torch_version": "2.11.0+cu130"},
    "result": {"seconds": 0.5, "bytes": 3145728, "files": 3,
               "parameter_sum": -1.25, "optimizer_state_sum": 2.5,
               "peak_rss_bytes": [1048576, 2097152]}})");
}

TEST(CheckpointRead, AJobsFigures) {
  StatusOr<CheckpointMeasurement> m =
      ReadCheckpointMeasurement(JobJson(), "", 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->seconds, 0.5);
  EXPECT_EQ(m->bytes, 3145728);
  EXPECT_EQ(m->files, 3);
  EXPECT_EQ(m->parameter_sum, -1.25);
  EXPECT_EQ(m->optimizer_state_sum, 2.5);
  EXPECT_THAT(m->peak_rss_bytes, ElementsAre(1048576, 2097152));
  EXPECT_EQ(m->torch_version, "2.11.0+cu130");
}

TEST(CheckpointRead, EachBadFieldIsNamedAndTheJobQuoted) {
  struct Case {
    const char* field;
    json value;
    const char* message;
  };
  for (const Case& c :
       {Case{"seconds", 0.0, "result.seconds is 0.0, not a positive number"},
        Case{"bytes", nullptr, "result.bytes is missing"},
        Case{"parameter_sum", "x", "result.parameter_sum is \"x\""},
        Case{"peak_rss_bytes", json::array({1}),
             "result.peak_rss_bytes is [1], not 2 per-rank figures"},
        Case{"peak_rss_bytes", json::array({1, -1}),
             "not all non-negative integers"}}) {
    SCOPED_TRACE(c.field);
    json job = JobJson();
    if (c.value.is_null()) {
      job["result"].erase(c.field);
    } else {
      job["result"][c.field] = c.value;
    }
    StatusOr<CheckpointMeasurement> m =
        ReadCheckpointMeasurement(job, "a line\nthe last line\n", 2);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInternal);
    EXPECT_THAT(m.status().message(), HasSubstr(c.message));
    EXPECT_THAT(m.status().message(), HasSubstr("the last line"));
  }
}

CheckpointMeasurement Measured(double seconds, double parameters,
                               double moments) {
  CheckpointMeasurement m;
  m.seconds = seconds;
  m.bytes = 4 * (1 << 20);
  m.files = 3;
  m.parameter_sum = parameters;
  m.optimizer_state_sum = moments;
  m.peak_rss_bytes = {100 << 20, 300 << 20};
  return m;
}

TEST(CheckpointCheck, ALoadMustGiveBackTheSavedSums) {
  const CheckpointMeasurement save = Measured(1, 1000.0, 50.0);
  // Summed in another order over other shards: off by far less than 1e-6.
  EXPECT_TRUE(
      CheckRestored(save, Measured(1, 1000.0 + 1e-7, 50.0 - 1e-8), "x").ok());
  // The seed's weights, not the saved ones.
  const Status weights = CheckRestored(save, Measured(1, 999.0, 50.0),
                                       "resnet18 kolo-zero2 np 2 -> np 4");
  ASSERT_FALSE(weights.ok());
  EXPECT_EQ(weights.code(), StatusCode::kInternal);
  EXPECT_THAT(weights.message(),
              HasSubstr("resnet18 kolo-zero2 np 2 -> np 4: the load did not "
                        "restore what the save wrote: its parameter sum is "
                        "999, the save's 1000"));
  // Weights restored, moments left at zero.
  EXPECT_THAT(CheckRestored(save, Measured(1, 1000.0, 0.0), "x").message(),
              HasSubstr("its optimizer-state sum is 0, the save's 50"));
}

TEST(CheckpointTable, MediansAndRatiosToDcp) {
  const std::vector<CheckpointMeasurement> kolo_saves = {
      Measured(3, 1, 1), Measured(1, 1, 1), Measured(2, 1, 1)};
  const std::vector<CheckpointMeasurement> kolo_loads = {
      Measured(0.5, 1, 1), Measured(0.25, 1, 1), Measured(1, 1, 1)};
  const std::vector<CheckpointMeasurement> dcp_saves = {Measured(4, 1, 1)};
  const std::vector<CheckpointMeasurement> dcp_loads = {Measured(2, 1, 1)};
  std::vector<CheckpointRow> rows = {
      SummarizeCheckpoint("resnet18", Variant("kolo-zero2"), 2, 4, kolo_saves,
                          kolo_loads),
      SummarizeCheckpoint("resnet18", Variant("torch-dcp"), 2, 4, dcp_saves,
                          dcp_loads),
      // No torch-dcp row at np 2 -> np 1: no ratio.
      SummarizeCheckpoint("resnet18", Variant("kolo-zero2"), 2, 1, kolo_saves,
                          kolo_loads)};
  CompareWithDcp(&rows);
  EXPECT_DOUBLE_EQ(rows[0].save_seconds, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].load_seconds, 0.5);
  EXPECT_DOUBLE_EQ(rows[0].bytes, 4 * kMiB);
  EXPECT_DOUBLE_EQ(rows[0].load_peak_rss_bytes, 300 * kMiB);
  ASSERT_TRUE(rows[0].save_ratio && rows[0].load_ratio);
  EXPECT_DOUBLE_EQ(*rows[0].save_ratio, 2.0 / 4.0);
  EXPECT_DOUBLE_EQ(*rows[0].load_ratio, 0.5 / 2.0);
  EXPECT_FALSE(rows[1].save_ratio);  // torch-dcp's own row
  EXPECT_FALSE(rows[2].load_ratio);
  EXPECT_THAT(CheckpointCells(rows[0]),
              ElementsAre("resnet18", "kolo-zero2", "2", "4", "2.000", "0.500",
                          "4.0", "3", "300", "0.50", "0.25"));
  EXPECT_EQ(CheckpointCells(rows[2]).back(), "");
  EXPECT_EQ(CheckpointTable().columns().size(),
            CheckpointCells(rows[0]).size());
}

TEST(CheckpointReport, TheRecordsRowsAndItsMissingVariant) {
  const json record = {
      {"benchmark", "checkpoint"},
      {"rows",
       {{{"model", "resnet18"},
         {"variant", "kolo-zero2"},
         {"save_np", 2},
         {"load_np", 4},
         {"save_seconds_median", 0.498},
         {"load_seconds_median", 0.768},
         {"bytes", 3.0 * kMiB},
         {"torch_version", "2.11.0"},
         {"load_seconds_ratio_to_dcp", 0.34}},
        {{"variant", "torch-dcp"}, {"missing", "not installed (python)"}}}}};
  Results results;
  ASSERT_TRUE(AddResults(record, "checkpoint.json", &results).ok());
  ASSERT_EQ(results.checkpoint.size(), 1u);
  const std::string page = RenderReport(results);
  EXPECT_THAT(page, HasSubstr("<h2>Checkpoints</h2>"));
  EXPECT_THAT(page, HasSubstr("1 checkpoint record"));
  for (const char* cell :
       {"0.498", "0.768", "3.0", "2.11.0", "0.34", "not installed (python)"}) {
    EXPECT_THAT(page, HasSubstr(cell));
  }
}

}  // namespace
}  // namespace kolo::bench
