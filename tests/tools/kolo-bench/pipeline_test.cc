// kolo-bench pipeline's pure pieces: the job labels and command lines, the
// ideal bubble, reading and checking a job's JSON, the per-stage bubbles
// and their medians; and ps-vs-allreduce's plan and closing table.
#include "pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report.h"
#include "study.h"

namespace kolo::bench {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TrainTools Tools() {
  TrainTools tools;
  tools.kolorun = "/bin/kolorun";
  tools.kolo_train = "/bin/kolo-train";
  return tools;
}

bool Contains(const std::vector<std::string>& command,
              const std::vector<std::string>& run) {
  return std::search(command.begin(), command.end(), run.begin(), run.end()) !=
         command.end();
}

TEST(PipelineBench, LabelsNameTheModelStagesMicroBatchesAndSchedule) {
  EXPECT_EQ(PipelineJobLabel({"vgg16", 1, 1, ""}), "vgg16 unsplit");
  EXPECT_EQ(PipelineJobLabel({"vgg16", 4, 8, "1f1b"}), "vgg16 p 4 m 8 1f1b");
}

TEST(PipelineBench, CommandsRunKolorunWithThePipelineFlags) {
  PipelineFlags f;
  const std::vector<std::string> split =
      PipelineCommand(f, {"vgg16", 4, 8, "gpipe"}, Tools(), "/tmp/x.json");
  EXPECT_TRUE(Contains(split, {"/bin/kolorun", "-np", "4"}));
  EXPECT_TRUE(Contains(split, {"--pipeline-stages", "4", "--micro-batches", "8",
                               "--schedule", "gpipe"}));
  EXPECT_TRUE(Contains(split, {"--benchmark-steps", "3"}));
  // Unsplit: the whole model in one process, no pipeline flags.
  const std::vector<std::string> whole =
      PipelineCommand(f, {"vgg16", 1, 1, ""}, Tools(), "/tmp/x.json");
  EXPECT_TRUE(Contains(whole, {"/bin/kolorun", "-np", "1"}));
  EXPECT_EQ(std::count(whole.begin(), whole.end(), "--pipeline-stages"), 0);
}

TEST(PipelineBench, TheTorchPeersJobsAreLabelledApart) {
  PipelineJob torch{"vgg16", 2, 4, "1f1b", kTorchPipelining};
  EXPECT_EQ(PipelineJobLabel(torch), "vgg16 p 2 m 4 1f1b torch-pipelining");
}

TEST(PipelineBench, PeersAreTorchPipeliningOrNone) {
  StatusOr<std::vector<std::string>> peers =
      ParsePipelinePeers("torch-pipelining, torch-pipelining");
  ASSERT_TRUE(peers.ok()) << peers.status().ToString();
  EXPECT_THAT(*peers, ElementsAre("torch-pipelining"));
  EXPECT_TRUE(ParsePipelinePeers("")->empty());
  EXPECT_THAT(*ParsePipelinePeers(PipelineFlags{}.peers),
              ElementsAre("torch-pipelining"));
  StatusOr<std::vector<std::string>> bad = ParsePipelinePeers("deepspeed");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("--peer must be torch-pipelining (or empty for "
                        "none), got 'deepspeed'"));
}

TEST(PipelineBench, ThePeerRunsTheSameJobCutWhereKoloCut) {
  PipelineFlags f;
  f.batch_size = 16;
  f.image_size = 28;
  f.warmup = 2;
  f.iters = 5;
  const PipelineJob job{"vgg16", 4, 8, "gpipe", kTorchPipelining};
  const std::vector<std::string> c = PipelinePeerCommand(
      f, job, "/venv/bin/python", "/share/torch_pipeline.py", {26, 5, 7, 15},
      "/tmp/t.json");
  EXPECT_TRUE(Contains(c, {"/venv/bin/python", "/share/torch_pipeline.py"}));
  EXPECT_EQ(c[0], "/venv/bin/python");
  EXPECT_TRUE(Contains(c, {"--model", "vgg16"}));
  EXPECT_TRUE(Contains(c, {"--stages", "4"}));
  EXPECT_TRUE(Contains(c, {"--micro-batches", "8"}));
  EXPECT_TRUE(Contains(c, {"--schedule", "gpipe"}));
  EXPECT_TRUE(Contains(c, {"--batch-size", "16"}));
  EXPECT_TRUE(Contains(c, {"--image-size", "28"}));
  EXPECT_TRUE(Contains(c, {"--warmup", "2"}));
  EXPECT_TRUE(Contains(c, {"--iters", "5"}));
  EXPECT_TRUE(Contains(c, {"--split", "26,5,7,15"}));
  EXPECT_TRUE(Contains(c, {"--json", "/tmp/t.json"}));
  // No cut reported: the script balances by parameters, as kolo-train.
  const std::vector<std::string> balanced = PipelinePeerCommand(
      f, job, "python3", "torch_pipeline.py", {}, "/tmp/t.json");
  EXPECT_EQ(std::count(balanced.begin(), balanced.end(), "--split"), 0);
}

// What torch_pipeline.py writes for 2 stages.
TEST(PipelineBench, ReadsTheTorchPeersJob) {
  const json job = json::parse(R"({
    "tool": "torch-pipelining",
    "config": {"pipeline_stages": 2, "micro_batches": 4, "schedule": "1f1b",
               "split": [4, 8], "torch_version": "2.11.0+cu130"},
    "result": {"images_per_second": 360.0, "step_ms": 22.0,
               "peak_rss_bytes": [720642048, 713363456],
               "pipeline": {"busy_seconds": [0.03, 0.03],
                            "idle_seconds": [0.01, 0.03],
                            "parameter_bytes": [23120, 66240],
                            "optimizer_state_bytes": [23120, 66240]}}})");
  StatusOr<PipelineMeasurement> m = ReadPipelineMeasurement(
      job, "", {"lenet", 2, 4, "1f1b", kTorchPipelining});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_THAT(m->parameter_bytes, ElementsAre(23120, 66240));
  EXPECT_TRUE(m->peak_activations.empty());
  EXPECT_THAT(StageBubbles(*m), ElementsAre(0.25, 0.5));
  EXPECT_EQ(JobTorchVersion(job, "fallback"), "2.11.0+cu130");
  EXPECT_EQ(JobTorchVersion(json::object(), "fallback"), "fallback");
}

TEST(PipelineBench, IdealBubbleIsPMinusOneOverMPlusPMinusOne) {
  EXPECT_DOUBLE_EQ(IdealBubble(2, 1), 0.5);
  EXPECT_DOUBLE_EQ(IdealBubble(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(IdealBubble(1, 4), 0.0);
}

json Job(int32_t stages, int32_t micro, const std::string& schedule) {
  json pipeline = {{"busy_seconds", json::array()},
                   {"idle_seconds", json::array()},
                   {"parameter_bytes", json::array()},
                   {"peak_activations", json::array()}};
  std::vector<int64_t> rss;
  for (int32_t s = 0; s < stages; ++s) {
    pipeline["busy_seconds"].push_back(3.0);
    pipeline["idle_seconds"].push_back(1.0 * s);  // stage s: s / (3 + s)
    pipeline["parameter_bytes"].push_back(1000 * (s + 1));
    pipeline["peak_activations"].push_back(stages - s);
    rss.push_back(int64_t{100} << 20);
  }
  return {{"config",
           {{"pipeline_stages", stages},
            {"micro_batches", micro},
            {"schedule", schedule}}},
          {"result",
           {{"images_per_second", 40.0},
            {"step_ms", 800.0},
            {"peak_rss_bytes", rss},
            {"memory",
             {{"optimizer_state_bytes", std::vector<int64_t>(stages, 4000)}}},
            {"pipeline", pipeline}}}};
}

TEST(PipelineBench, ReadsEveryPerStageFigure) {
  const PipelineJob job{"vgg16", 2, 4, "1f1b"};
  StatusOr<PipelineMeasurement> m =
      ReadPipelineMeasurement(Job(2, 4, "1f1b"), "", job);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->images_per_second, 40.0);
  EXPECT_THAT(m->parameter_bytes, ElementsAre(1000, 2000));
  EXPECT_THAT(m->optimizer_state_bytes, ElementsAre(4000, 4000));
  EXPECT_THAT(m->peak_activations, ElementsAre(2, 1));
  EXPECT_TRUE(m->peak_activation_bytes.empty());
  EXPECT_THAT(StageBubbles(*m), ElementsAre(0.0, 0.25));
}

TEST(PipelineBench, ReadsRankZerosStatisticsWhereOnlyThoseAreReported) {
  // kolo-train's form: result.pipeline holds its first stage's totals.
  json job = Job(2, 4, "gpipe");
  job["result"]["pipeline"] = {{"bubble_fraction", 0.2},
                               {"max_peak_activations", 4},
                               {"busy_seconds", 4.0},
                               {"idle_seconds", 1.0}};
  StatusOr<PipelineMeasurement> m =
      ReadPipelineMeasurement(job, "", {"vgg16", 2, 4, "gpipe"});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_THAT(m->peak_activations, ElementsAre(4));
  EXPECT_THAT(StageBubbles(*m), ElementsAre(0.2));
  EXPECT_TRUE(m->parameter_bytes.empty());
  // The unsplit model's parameters, in float32, from its parameter count.
  json whole = Job(1, 1, "");
  whole["config"] = {{"parameters", 1000}};
  whole["result"].erase("pipeline");
  m = ReadPipelineMeasurement(whole, "", {"vgg16", 1, 1, ""});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_THAT(m->parameter_bytes, ElementsAre(4000));
}

TEST(PipelineBench, RejectsAnotherPipelineThanAskedFor) {
  StatusOr<PipelineMeasurement> m = ReadPipelineMeasurement(
      Job(2, 4, "gpipe"), "last line", {"vgg16", 2, 4, "1f1b"});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("it ran 2 stages, 4 "
                                              "micro-batches, gpipe; not "
                                              "vgg16 p 2 m 4 1f1b"));
  EXPECT_THAT(m.status().message(), HasSubstr("last line"));
}

TEST(PipelineBench, RejectsAJobWithoutStageTimes) {
  json job = Job(2, 4, "1f1b");
  job["result"]["pipeline"].erase("idle_seconds");
  StatusOr<PipelineMeasurement> m =
      ReadPipelineMeasurement(job, "", {"vgg16", 2, 4, "1f1b"});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("idle_seconds"));
}

TEST(PipelineBench, RejectsAPerRankFigureOfTheWrongLength) {
  json job = Job(2, 4, "1f1b");
  job["result"]["peak_rss_bytes"] = {1};
  StatusOr<PipelineMeasurement> m =
      ReadPipelineMeasurement(job, "", {"vgg16", 2, 4, "1f1b"});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("result.peak_rss_bytes is [1], not 2 per-rank"));
}

TEST(PipelineBench, SummaryTakesMediansOfTheMeanStageBubble) {
  const PipelineJob job{"vgg16", 4, 2, "gpipe"};
  std::vector<PipelineMeasurement> repeats;
  for (double rate : {10.0, 30.0, 20.0}) {
    StatusOr<PipelineMeasurement> m =
        ReadPipelineMeasurement(Job(4, 2, "gpipe"), "", job);
    ASSERT_TRUE(m.ok());
    m->images_per_second = rate;
    repeats.push_back(*m);
  }
  const PipelineThroughputRow row = SummarizePipelineThroughput(job, repeats);
  EXPECT_DOUBLE_EQ(row.images_per_second, 20.0);
  // Stages idle 0/3, 1/4, 2/5, 3/6 of their time.
  EXPECT_DOUBLE_EQ(row.bubble, (0.0 + 0.25 + 0.4 + 0.5) / 4);
  EXPECT_DOUBLE_EQ(row.bubble_max, 0.5);
  EXPECT_DOUBLE_EQ(row.ideal_bubble, 3.0 / 5.0);
  EXPECT_EQ(row.peak_activations, 4);
}

TEST(PipelineBench, ReportDrawsTheBubbleBesideTheIdeal) {
  const json record = {{"benchmark", "pipeline"},
                       {"config",
                        {{"model", "vgg16"},
                         {"dataset", "synthetic"},
                         {"image_size", 32},
                         {"batch_size", 32}}},
                       {"memory_rows",
                        {{{"model", "vgg16"},
                          {"stages", 2},
                          {"rank", 1},
                          {"peak_rss_bytes", 300.0 * (1 << 20)},
                          {"peak_rss_ratio_to_unsplit", 0.75}}}},
                       {"throughput_rows",
                        {{{"stages", 2},
                          {"micro_batches", 4},
                          {"schedule", "1f1b"},
                          {"images_per_second_median", 45.3},
                          {"bubble", 0.125},
                          {"ideal_bubble", 0.2},
                          {"peak_activations", 2},
                          {"peak_rss_bytes", 400.0 * (1 << 20)}}}}};
  Results results;
  ASSERT_TRUE(AddResults(record, "pipeline.json", &results).ok());
  ASSERT_EQ(results.pipeline.size(), 1u);
  const std::string page = RenderReport(results);
  EXPECT_THAT(page, HasSubstr("<h2>Pipeline parallelism</h2>"));
  EXPECT_THAT(page, HasSubstr("p 2 1f1b"));
  EXPECT_THAT(page, HasSubstr("p 2 ideal"));
  EXPECT_THAT(page, HasSubstr("45.3"));   // images/s
  EXPECT_THAT(page, HasSubstr("0.125"));  // the bubble
  EXPECT_THAT(page, HasSubstr("300.0"));  // rank 1's peak RSS in MiB
  EXPECT_THAT(page, HasSubstr("0.75"));
}

TEST(PipelineBench, ReportNamesTheTorchPeersSeriesAndSkipsAMissingOne) {
  json row = {{"stages", 2},          {"micro_batches", 4},
              {"schedule", "1f1b"},   {"framework", "kolo"},
              {"bubble", 0.125},      {"ideal_bubble", 0.2},
              {"peak_rss_bytes", 1.0}};
  json torch = row;
  torch["framework"] = "torch-pipelining";
  torch["bubble"] = 0.375;
  const json record = {
      {"benchmark", "pipeline"},
      {"config", {{"model", "lenet"}}},
      {"throughput_rows",
       {row,
        torch,
        {{"framework", "torch-pipelining"}, {"missing", "not installed"}}}}};
  Results results;
  ASSERT_TRUE(AddResults(record, "pipeline.json", &results).ok());
  const std::string page = RenderReport(results);
  EXPECT_THAT(page, HasSubstr("p 2 1f1b"));
  EXPECT_THAT(page, HasSubstr("p 2 torch-pipelining 1f1b"));
  EXPECT_THAT(page, HasSubstr("0.375"));
  // The missing peer's row draws no stage count of 0.
  EXPECT_THAT(page, ::testing::Not(HasSubstr("p 0")));
}

TEST(PsStudy, PlansAllreduceAndEveryModeAtEachWorkerCount) {
  StudyFlags flags;
  flags.name = "ps-vs-allreduce";
  StatusOr<std::vector<StudyStep>> steps = PlanStudy(flags);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  // Per model: allreduce, sync, async and stale on 1 server, sync and
  // async on 2.
  ASSERT_EQ(steps->size(), 12u);
  const TrainFlags& allreduce = (*steps)[0].flags;
  EXPECT_EQ(allreduce.model, "lenet");
  EXPECT_EQ(allreduce.np, "2,4");
  EXPECT_TRUE(allreduce.kolo_name.empty());
  const TrainFlags& stale1 = (*steps)[3].flags;
  EXPECT_EQ(stale1.kolo_name, "kolo-ps-stale-1");
  EXPECT_THAT(stale1.kolo_train_args,
              ElementsAre("--parameter-servers", "1", "--ps-mode", "stale",
                          "--staleness", "2"));
  const TrainFlags& async2 = (*steps)[5].flags;
  EXPECT_EQ(async2.kolo_name, "kolo-ps-async-2");
  EXPECT_EQ(async2.np, "4");
  EXPECT_THAT(async2.kolorun_args, ElementsAre("--servers", "2"));
  EXPECT_THAT(async2.kolo_train_args,
              ElementsAre("--parameter-servers", "2", "--ps-mode", "async"));
  EXPECT_EQ((*steps)[6].flags.model, "resnet18");
  EXPECT_GT((*steps)[6].flags.iters, 0);
  // The train command carries the kolorun flags after -np.
  const std::vector<std::string> command =
      TrainCommand(async2, "kolo", 4, 128, Tools(), "/tmp/x.json");
  EXPECT_TRUE(
      Contains(command, {"/bin/kolorun", "-np", "4", "--servers", "2", "--"}));

  flags.quick = true;
  steps = PlanStudy(flags);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 4u);  // lenet, 1 server, 2 workers only
  for (const StudyStep& step : *steps) EXPECT_EQ(step.flags.np, "2");
}

TEST(PsStudy, SummaryComparesEveryVariantWithAllreduce) {
  const std::vector<json> records = {{{"config", {{"model", "lenet"}}},
                                      {"rows",
                                       {{{"framework", "kolo"},
                                         {"np", 2},
                                         {"images_per_second_mean", 1000.0},
                                         {"test_accuracy", 85.5},
                                         {"wall_seconds", 12.0}}}}},
                                     {{"config",
                                       {{"model", "lenet"},
                                        {"kolorun_args", {"--servers", "1"}},
                                        {"kolo_name", "kolo-ps-sync-1"}}},
                                      {"rows",
                                       {{{"framework", "kolo-ps-sync-1"},
                                         {"np", 2},
                                         {"images_per_second_mean", 250.0},
                                         {"test_accuracy", 84.0},
                                         {"wall_seconds", 40.0}}}}},
                                     {{"config",
                                       {{"model", "lenet"},
                                        {"kolorun_args", {"--servers", "1"}},
                                        {"kolo_name", "kolo-ps-stale-1"}}},
                                      {"rows",
                                       {{{"framework", "kolo-ps-stale-1"},
                                         {"np", 2},
                                         {"images_per_second_mean", 500.0},
                                         {"test_accuracy", 83.25},
                                         {"wall_seconds", 30.0}}}}}};
  const std::vector<std::string> lines = PsSummaryLines(records);
  ASSERT_EQ(lines.size(), 5u);  // titles, units, three rows
  EXPECT_THAT(lines[2], HasSubstr("allreduce"));
  EXPECT_THAT(lines[2], HasSubstr("1.00"));
  EXPECT_THAT(lines[3], HasSubstr("kolo-ps-sync-1"));
  EXPECT_THAT(lines[3], HasSubstr("0.25"));
  EXPECT_THAT(lines[3], HasSubstr("84.00"));
  // The bounded-staleness server against the synchronous one.
  EXPECT_THAT(lines[4], HasSubstr("kolo-ps-stale-1"));
  EXPECT_THAT(lines[4], HasSubstr("0.50"));
  EXPECT_THAT(lines[4], HasSubstr("-0.75"));
}

TEST(PsStudy, ReportPutsEveryVariantBesideAllreduce) {
  // Two records of one study configuration, as two of its steps write them.
  auto record = [](const std::string& framework, double rate) {
    json config = {{"model", "resnet18"}, {"dataset", "synthetic"},
                   {"batch_size", 32},    {"scaling", "weak"},
                   {"threads", 1},        {"np", {2}},
                   {"mode", "throughput"}};
    if (framework != "kolo") config["kolo_name"] = framework;
    return json{{"tool", "kolo-bench train"},
                {"study", "ps-vs-allreduce"},
                {"config", config},
                {"rows",
                 {{{"framework", framework},
                   {"np", 2},
                   {"images_per_second_mean", rate},
                   {"images_per_second_ci95", 0.0}}}}};
  };
  Results results;
  ASSERT_TRUE(AddResults(json::array({record("kolo", 100.0),
                                      record("kolo-ps-sync-1", 40.0)}),
                         "ps.json", &results)
                  .ok());
  const std::vector<TrainConfigView> views = GroupTrain(results);
  ASSERT_EQ(views.size(), 1u);
  ASSERT_EQ(views[0].frameworks.size(), 2u);
  EXPECT_EQ(views[0].frameworks[0].first, "kolo");
  EXPECT_EQ(views[0].frameworks[1].first, "kolo-ps-sync-1");
  const std::string page = RenderReport(results);
  EXPECT_THAT(page, HasSubstr("kolo-ps-MODE-K is the same kolo-train"));
  // allreduce over the parameter server: 100 / 40.
  EXPECT_THAT(page, HasSubstr("2.50"));
}

}  // namespace
}  // namespace kolo::bench
