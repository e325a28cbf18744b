// kolo-bench zero's pure pieces: the variants, the command line of each,
// reading a job's JSON (and the errors for one that lacks what the table
// needs), the medians and ratios with closed-form values, the table's
// cells, the report's ZeRO section, kolo-bench train's recipe flags and the
// deepspeed study preset's plan and ds_config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline.h"
#include "report.h"
#include "study.h"
#include "train.h"
#include "zero.h"

namespace kolo::bench {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMiB = 1 << 20;

TrainTools Tools() {
  TrainTools tools;
  tools.kolorun = "/bin/kolorun";
  tools.kolo_train = "/bin/kolo-train";
  tools.python = "/venv/bin/python";
  tools.ddp_script = "/share/torch_ddp.py";
  return tools;
}

ZeroVariant Variant(const std::string& name) {
  StatusOr<std::vector<ZeroVariant>> v = ParseZeroVariants(name);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() && !v->empty() ? v->front() : ZeroVariant{};
}

// Whether `flag` is followed by `value` somewhere in `command`.
bool HasFlag(const std::vector<std::string>& command, const std::string& flag,
             const std::string& value) {
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == flag && command[i + 1] == value) return true;
  }
  return false;
}

bool Has(const std::vector<std::string>& command, const std::string& word) {
  return std::find(command.begin(), command.end(), word) != command.end();
}

// ------------------------------------------------------------ variants

TEST(ZeroVariants, InTheOrderGivenWithoutDuplicates) {
  StatusOr<std::vector<ZeroVariant>> v =
      ParseZeroVariants("torch-zero, kolo-zero2,kolo-ddp,torch-zero");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].name, "torch-zero");
  EXPECT_EQ((*v)[0].framework, "torch-ddp");
  EXPECT_EQ((*v)[0].zero_stage, 1);
  EXPECT_EQ((*v)[1].name, "kolo-zero2");
  EXPECT_EQ((*v)[1].framework, "kolo");
  EXPECT_EQ((*v)[1].zero_stage, 2);
  EXPECT_EQ((*v)[2].zero_stage, 0);
  EXPECT_EQ(Variant("kolo-zero1").zero_stage, 1);
  EXPECT_EQ(Variant("torch-ddp").zero_stage, 0);
}

TEST(ZeroVariants, AnUnknownOneIsNamed) {
  StatusOr<std::vector<ZeroVariant>> v = ParseZeroVariants("kolo-ddp,zero3");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(),
              HasSubstr("--variants: unknown variant 'zero3'"));
}

// ------------------------------------------------------------ commands

TEST(TimedJobFlags, EachCommandKeepsItsOwnTimingWindow) {
  EXPECT_EQ(TrainFlags().warmup, 5);
  EXPECT_EQ(TrainFlags().iters, 50);
  EXPECT_EQ(ZeroFlags().warmup, 2);
  EXPECT_EQ(ZeroFlags().iters, 10);
  EXPECT_EQ(PipelineFlags().warmup, 1);
  EXPECT_EQ(PipelineFlags().iters, 3);
}

TEST(TimedJobFlags, RecordAndCheckTheSameFigures) {
  TimedJobFlags f{
      /*batch_size=*/16, /*image_size=*/28, /*threads=*/2,
      /*warmup=*/2,      /*iters=*/10,      /*repeat=*/4};
  EXPECT_EQ(TimedJobConfig(f), json({{"batch_size", 16},
                                     {"image_size", 28},
                                     {"threads", 2},
                                     {"warmup", 2},
                                     {"iters", 10},
                                     {"repeat", 4}}));
  EXPECT_TRUE(ValidateTimedJob(f, "synthetic").ok());
  // 28x28 images come from the synthetic dataset only.
  EXPECT_EQ(ValidateTimedJob(f, "cifar10").code(),
            StatusCode::kInvalidArgument);
  f.warmup = -1;
  EXPECT_EQ(ValidateTimedJob(f, "synthetic").code(),
            StatusCode::kInvalidArgument);
}

TEST(ZeroCommand, KoloVariantsRunKoloTrainAtTheirStage) {
  ZeroFlags f;
  f.batch_size = 16;
  f.iters = 7;
  f.warmup = 3;
  for (int stage = 0; stage <= 2; ++stage) {
    const std::string name =
        stage == 0 ? "kolo-ddp" : "kolo-zero" + std::to_string(stage);
    const std::vector<std::string> c =
        ZeroCommand(f, Variant(name), "resnet50", 4, Tools(), "/tmp/r.json");
    ASSERT_GE(c.size(), 5u);
    EXPECT_EQ(c[0], "/bin/kolorun") << name;
    EXPECT_TRUE(HasFlag(c, "-np", "4"));
    EXPECT_TRUE(Has(c, "/bin/kolo-train"));
    EXPECT_TRUE(HasFlag(c, "--zero-stage", std::to_string(stage))) << name;
    EXPECT_TRUE(HasFlag(c, "--model", "resnet50"));
    EXPECT_TRUE(HasFlag(c, "--optimizer", "adam"));
    EXPECT_TRUE(HasFlag(c, "--lr", "0.001"));
    EXPECT_TRUE(HasFlag(c, "--precision", "fp32"));
    EXPECT_TRUE(HasFlag(c, "--batch-size", "16"));
    EXPECT_TRUE(HasFlag(c, "--benchmark-steps", "7"));
    EXPECT_TRUE(HasFlag(c, "--benchmark-warmup", "3"));
    EXPECT_TRUE(HasFlag(c, "--json", "/tmp/r.json"));
    EXPECT_FALSE(Has(c, "--zero"));
  }
}

TEST(ZeroCommand, TorchVariantsRunTheDdpScriptWithZeroForTorchZero) {
  ZeroFlags f;
  f.optimizer = "adamw";
  f.precision = "bf16";
  f.image_size = 28;
  const std::vector<std::string> zero =
      ZeroCommand(f, Variant("torch-zero"), "lenet", 2, Tools(), "/tmp/t.json");
  ASSERT_GE(zero.size(), 2u);
  EXPECT_EQ(zero[0], "/venv/bin/python");
  EXPECT_EQ(zero[1], "/share/torch_ddp.py");
  EXPECT_TRUE(HasFlag(zero, "--np", "2"));
  EXPECT_TRUE(Has(zero, "--zero"));
  EXPECT_TRUE(HasFlag(zero, "--optimizer", "adamw"));
  EXPECT_TRUE(HasFlag(zero, "--precision", "bf16"));
  // kolo-train's synthetic images: 3 channels at --image-size.
  EXPECT_TRUE(HasFlag(zero, "--channels", "3"));
  EXPECT_TRUE(HasFlag(zero, "--image-size", "28"));
  EXPECT_FALSE(Has(zero, "--zero-stage"));
  const std::vector<std::string> ddp =
      ZeroCommand(f, Variant("torch-ddp"), "lenet", 2, Tools(), "/tmp/t.json");
  EXPECT_FALSE(Has(ddp, "--zero"));
  EXPECT_TRUE(HasFlag(ddp, "--optimizer", "adamw"));
}

TEST(ZeroVariants, TorchFsdp2IsTheDdpScriptAtStageThree) {
  const ZeroVariant fsdp2 = Variant("torch-fsdp2");
  EXPECT_EQ(fsdp2.framework, "torch-ddp");
  EXPECT_EQ(fsdp2.zero_stage, 3);
  // The default variants hold every peer, FSDP2 included.
  StatusOr<std::vector<ZeroVariant>> defaults =
      ParseZeroVariants(ZeroFlags{}.variants);
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(std::any_of(
      defaults->begin(), defaults->end(),
      [](const ZeroVariant& v) { return v.name == "torch-fsdp2"; }));
}

TEST(ZeroCommand, TorchFsdp2RunsTheDdpScriptWithFsdp2AndTheRecipe) {
  ZeroFlags f;
  f.precision = "fp16";  // the peer refuses it itself on a torch without it
  const std::vector<std::string> c = ZeroCommand(
      f, Variant("torch-fsdp2"), "resnet18", 4, Tools(), "/tmp/f.json");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "/venv/bin/python");
  EXPECT_EQ(c[1], "/share/torch_ddp.py");
  EXPECT_TRUE(HasFlag(c, "--np", "4"));
  EXPECT_EQ(c.back(), "--fsdp2");
  EXPECT_FALSE(Has(c, "--zero"));
  EXPECT_TRUE(HasFlag(c, "--optimizer", "adam"));
  EXPECT_TRUE(HasFlag(c, "--precision", "fp16"));
}

TEST(TrainCommand, RecipeReachesBothProgramsAndConfigOnlyKoloTrain) {
  TrainFlags f;
  f.optimizer = "adam";
  f.lr = 0.001;
  f.precision = "bf16";
  f.config_path = "/tmp/ds.json";
  f.kolo_train_args = {"--no-lr-scaling"};
  f.ddp_args = {"--zero"};
  const std::vector<std::string> kolo =
      TrainCommand(f, "kolo", 2, 32, Tools(), "/tmp/k.json");
  EXPECT_TRUE(HasFlag(kolo, "--config", "/tmp/ds.json"));
  // The file carries kolo-train's optimizer: flags would override it.
  EXPECT_FALSE(Has(kolo, "--optimizer"));
  EXPECT_FALSE(Has(kolo, "--lr"));
  EXPECT_TRUE(HasFlag(kolo, "--precision", "bf16"));
  EXPECT_EQ(kolo.back(), "--no-lr-scaling");  // after every other flag
  EXPECT_FALSE(Has(kolo, "--zero"));
  const std::vector<std::string> ddp =
      TrainCommand(f, "torch-ddp", 2, 32, Tools(), "/tmp/d.json");
  EXPECT_FALSE(Has(ddp, "--config"));
  EXPECT_TRUE(HasFlag(ddp, "--optimizer", "adam"));
  EXPECT_TRUE(HasFlag(ddp, "--precision", "bf16"));
  EXPECT_EQ(ddp.back(), "--zero");
  EXPECT_FALSE(Has(ddp, "--no-lr-scaling"));
  // Without a recipe the command lines are what they were.
  const std::vector<std::string> plain =
      TrainCommand(TrainFlags{}, "kolo", 2, 32, Tools(), "/tmp/k.json");
  for (const char* flag : {"--optimizer", "--lr", "--precision", "--config"}) {
    EXPECT_FALSE(Has(plain, flag)) << flag;
  }
}

// ------------------------------------------------------------ a job's JSON

// What kolo-train --benchmark-steps writes at np 2, memory included.
json JobJson(int stage = 2) {
  return json::parse(R"({
    "tool": "kolo-train",
    "config": {"mode": "benchmark", "zero_stage": )" +
                     std::to_string(stage) + R"(, "precision": "fp32",
               "optimizer": "adam"},
    "result": {"images_per_second": 250.0, "step_ms": 256.0,
               "peak_rss_bytes": [1048576000, 1073741824],
               "memory": {"optimizer_state_bytes": [100, 300],
                          "gradient_bytes": [50, 70],
                          "master_weight_bytes": [0, 0]}}})");
}

TEST(ZeroRead, AJobsFiguresPerRank) {
  StatusOr<ZeroMeasurement> m =
      ReadZeroMeasurement(JobJson(), "", Variant("kolo-zero2"), 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->images_per_second, 250.0);
  EXPECT_EQ(m->step_ms, 256.0);
  EXPECT_THAT(m->optimizer_state_bytes, ElementsAre(100, 300));
  EXPECT_THAT(m->gradient_bytes, ElementsAre(50, 70));
  EXPECT_THAT(m->master_weight_bytes, ElementsAre(0, 0));
  EXPECT_THAT(m->peak_rss_bytes, ElementsAre(1048576000, 1073741824));
}

TEST(ZeroRead, Fsdp2MustHaveRunStageThree) {
  // torch_ddp.py --fsdp2's record says zero_stage 3; a script without
  // --fsdp2 would have run plain DDP (stage 0).
  EXPECT_TRUE(
      ReadZeroMeasurement(JobJson(3), "", Variant("torch-fsdp2"), 2).ok());
  StatusOr<ZeroMeasurement> m =
      ReadZeroMeasurement(JobJson(0), "", Variant("torch-fsdp2"), 2);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("it ran ZeRO stage 0, not 3"));
}

TEST(ZeroRead, MissingMemoryIsAnErrorQuotingTheJob) {
  json job = JobJson();
  job["result"].erase("memory");
  const std::string output =
      "line 1\nline 2\nkolo-train benchmark: 250 images/s\n";
  StatusOr<ZeroMeasurement> m =
      ReadZeroMeasurement(job, output, Variant("kolo-zero2"), 2);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInternal);
  EXPECT_THAT(m.status().message(), HasSubstr("no result.memory"));
  EXPECT_THAT(m.status().message(),
              HasSubstr("\n  kolo-train benchmark: 250 images/s"));
}

TEST(ZeroRead, EachBadFieldIsNamed) {
  const ZeroVariant zero2 = Variant("kolo-zero2");
  json job = JobJson();
  job["result"]["memory"]["gradient_bytes"] = {50};  // one rank of two
  EXPECT_THAT(ReadZeroMeasurement(job, "", zero2, 2).status().message(),
              HasSubstr("result.memory.gradient_bytes is [50], not 2"));
  job = JobJson();
  job["result"]["memory"].erase("master_weight_bytes");
  EXPECT_THAT(ReadZeroMeasurement(job, "", zero2, 2).status().message(),
              HasSubstr("no result.memory.master_weight_bytes"));
  job = JobJson();
  job["result"]["memory"]["optimizer_state_bytes"] = {100, -1};
  EXPECT_THAT(ReadZeroMeasurement(job, "", zero2, 2).status().message(),
              HasSubstr("not all non-negative integers"));
  job = JobJson();
  job["result"]["images_per_second"] = 0;
  EXPECT_THAT(ReadZeroMeasurement(job, "", zero2, 2).status().message(),
              HasSubstr("result.images_per_second is missing or not positive"));
  // A kolo-train that ignored --zero-stage, or predates it.
  EXPECT_THAT(ReadZeroMeasurement(JobJson(0), "", zero2, 2).status().message(),
              HasSubstr("it ran ZeRO stage 0, not 2"));
  job = JobJson();
  job["config"].erase("zero_stage");
  EXPECT_THAT(ReadZeroMeasurement(job, "", zero2, 2).status().message(),
              HasSubstr("no config.zero_stage"));
}

// ------------------------------------------------------------ the table

ZeroMeasurement Measurement(double rate, double step_ms,
                            std::vector<int64_t> state,
                            std::vector<int64_t> gradients,
                            std::vector<int64_t> rss) {
  ZeroMeasurement m;
  m.images_per_second = rate;
  m.step_ms = step_ms;
  m.optimizer_state_bytes = std::move(state);
  m.gradient_bytes = std::move(gradients);
  m.master_weight_bytes.assign(m.optimizer_state_bytes.size(), 0);
  m.peak_rss_bytes = std::move(rss);
  return m;
}

TEST(ZeroTable, MediansOfTheLargestRank) {
  // Three repeats at np 2: images/s 100, 300, 200 -> median 200; the
  // largest rank's state 40, 60, 50 MiB -> 50 MiB.
  const int64_t mib = 1 << 20;
  const ZeroRow row =
      SummarizeZero("resnet50", 2, "kolo-zero1",
                    {Measurement(100, 30, {40 * mib, 10 * mib},
                                 {8 * mib, 8 * mib}, {500 * mib, 600 * mib}),
                     Measurement(300, 10, {20 * mib, 60 * mib},
                                 {8 * mib, 8 * mib}, {700 * mib, 600 * mib}),
                     Measurement(200, 20, {50 * mib, 50 * mib},
                                 {8 * mib, 9 * mib}, {800 * mib, 650 * mib})});
  EXPECT_EQ(row.images_per_second, 200);
  EXPECT_EQ(row.step_ms, 20);
  EXPECT_EQ(row.optimizer_state_bytes, 50 * mib);
  EXPECT_EQ(row.gradient_bytes, 8 * mib);
  EXPECT_EQ(row.peak_rss_bytes, 700 * mib);
}

TEST(ZeroTable, FractionsAndRatiosAgainstKoloDdpAtTheSameNp) {
  auto row = [](const std::string& model, int32_t np,
                const std::string& variant, double rate, double state_mib,
                double gradient_mib) {
    ZeroRow r;
    r.model = model;
    r.np = np;
    r.variant = variant;
    r.images_per_second = rate;
    r.step_ms = 1000.0 * 32 * np / rate;
    r.optimizer_state_bytes = state_mib * kMiB;
    r.gradient_bytes = gradient_mib * kMiB;
    r.peak_rss_bytes = 1000 * kMiB;
    return r;
  };
  // Adam on P bytes of parameters: kolo-ddp holds 2P of state and P of
  // gradients; ZeRO-1 at np 4 2P/4 + P; ZeRO-2 at np 4 (2P + P)/4.
  const double p = 96;  // MiB
  std::vector<ZeroRow> rows = {
      row("resnet50", 4, "kolo-ddp", 400, 2 * p, p),
      row("resnet50", 4, "kolo-zero1", 390, 2 * p / 4, p),
      row("resnet50", 4, "kolo-zero2", 380, 2 * p / 4, p / 4),
      row("resnet50", 4, "torch-zero", 300, 2 * p / 4, p),
      row("resnet50", 2, "kolo-zero2", 250, 2 * p / 2, p / 2),  // no base
      row("lenet", 4, "kolo-zero2", 5000, 1, 1)};               // no base
  CompareWithKoloDdp(&rows);
  ASSERT_TRUE(rows[0].memory_fraction && rows[0].throughput_ratio);
  EXPECT_DOUBLE_EQ(*rows[0].memory_fraction, 1.0);
  EXPECT_DOUBLE_EQ(*rows[0].throughput_ratio, 1.0);
  EXPECT_DOUBLE_EQ(*rows[1].memory_fraction, 0.5);   // (P/2 + P) / 3P
  EXPECT_DOUBLE_EQ(*rows[2].memory_fraction, 0.25);  // (3P/4) / 3P
  EXPECT_DOUBLE_EQ(*rows[2].throughput_ratio, 0.95);
  EXPECT_DOUBLE_EQ(*rows[3].throughput_ratio, 0.75);
  EXPECT_FALSE(rows[4].memory_fraction);
  EXPECT_FALSE(rows[4].throughput_ratio);
  EXPECT_FALSE(rows[5].memory_fraction);

  EXPECT_THAT(ZeroCells(rows[2]),
              ElementsAre("resnet50", "4", "kolo-zero2", "380", "336.8", "48.0",
                          "24.0", "0.250", "1000", "0.95"));
  EXPECT_THAT(ZeroCells(rows[4]),
              ElementsAre("resnet50", "2", "kolo-zero2", "250", "256.0", "96.0",
                          "48.0", "-", "1000", "-"));
  const Table table = ZeroTable();
  ASSERT_EQ(table.columns().size(), 10u);
  EXPECT_EQ(table.columns()[7].title, "state+grad");
  EXPECT_EQ(table.columns()[9].unit, "÷ kolo-ddp");
}

// ------------------------------------------------------------ the report

// Two records of one configuration (the second re-measures kolo-zero2 at
// np 2) and a missing peer, as kolo-bench zero writes them.
const char* kZeroRecords = R"([
  {"benchmark": "zero", "tool": "kolo-bench zero",
   "config": {"optimizer": "adam", "precision": "fp32",
              "dataset": "synthetic", "image_size": 32, "batch_size": 32,
              "threads": 1},
   "environment": {"cpu_model": "Test CPU", "cores": 2},
   "rows": [
     {"model": "resnet50", "np": 2, "variant": "kolo-zero2",
      "images_per_second_median": 90, "step_ms_median": 711,
      "optimizer_state_bytes": 100663296, "gradient_bytes": 50331648,
      "peak_rss_mib": 900},
     {"model": "resnet50", "np": 2, "variant": "kolo-ddp",
      "images_per_second_median": 100, "step_ms_median": 640,
      "optimizer_state_bytes": 201326592, "gradient_bytes": 100663296,
      "peak_rss_mib": 1200},
     {"variant": "torch-zero", "framework": "torch-ddp",
      "missing": "not installed"}]},
  {"benchmark": "zero", "tool": "kolo-bench zero",
   "config": {"optimizer": "adam", "precision": "fp32",
              "dataset": "synthetic", "image_size": 32, "batch_size": 32,
              "threads": 1},
   "rows": [
     {"model": "resnet50", "np": 2, "variant": "kolo-zero2",
      "images_per_second_median": 95, "step_ms_median": 673,
      "optimizer_state_bytes": 100663296, "gradient_bytes": 50331648,
      "peak_rss_mib": 890}]}
])";

TEST(ZeroReport, RecordsMergeAndRatiosComeFromTheMergedFigures) {
  Results results;
  ASSERT_TRUE(
      AddResults(json::parse(kZeroRecords), "zero.json", &results).ok());
  ASSERT_EQ(results.zero.size(), 2u);
  EXPECT_TRUE(results.train.empty());
  const std::vector<ZeroView> views = GroupZero(results);
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].config.Label(),
            "adam, fp32, synthetic 3x32x32, batch 32 per worker, 1 thread");
  ASSERT_EQ(views[0].rows.size(), 2u);
  // kolo-ddp first; kolo-zero2 is the later record's 95 images/s.
  EXPECT_EQ(views[0].rows[0].variant, "kolo-ddp");
  const ZeroReportRow& zero2 = views[0].rows[1];
  EXPECT_EQ(zero2.variant, "kolo-zero2");
  EXPECT_EQ(*zero2.images_per_second, 95);
  // (96 + 48) / (192 + 96) MiB; 95 / 100 images/s.
  EXPECT_DOUBLE_EQ(*ZeroMemoryFraction(views[0], zero2), 0.5);
  EXPECT_DOUBLE_EQ(*ZeroThroughputRatio(views[0], zero2), 0.95);
  EXPECT_EQ(views[0].missing.at("torch-zero"), "not installed");

  const std::string html = RenderReport(results);
  EXPECT_THAT(html, HasSubstr("<h2>ZeRO: memory per rank and throughput</h2>"));
  EXPECT_THAT(html, HasSubstr("2 ZeRO records"));
  auto cell = [](const std::string& text) {
    return "<td class=\"num\">" + text + "</td>";
  };
  EXPECT_THAT(html, HasSubstr(cell("0.500")));
  EXPECT_THAT(html, HasSubstr(cell("0.95")));
  EXPECT_THAT(html, HasSubstr(cell("96.0")));  // kolo-zero2's state, MiB
  EXPECT_THAT(html, HasSubstr(cell("48.0")));  // and its gradients
  EXPECT_THAT(html, HasSubstr(">kolo-zero2</text>"));  // the legend
  EXPECT_THAT(html, HasSubstr("not installed"));
}

TEST(ZeroReport, APageWithoutZeroRecordsSaysSo) {
  Results results;
  ASSERT_TRUE(AddResults(json::parse(R"({"tool": "kolo-bench train",
      "config": {"model": "lenet"}, "rows": []})"),
                         "train.json", &results)
                  .ok());
  const std::string html = RenderReport(results);
  EXPECT_THAT(html, HasSubstr("No ZeRO records in these files"));
  EXPECT_THAT(html, Not(HasSubstr("ZeRO record,")));
}

// ------------------------------------------------------------ study deepspeed

TEST(DeepSpeedStudy, TheStudysConfigurationAsADsConfig) {
  const json c = DeepSpeedConfig(128);
  EXPECT_EQ(c["train_micro_batch_size_per_gpu"], 128);
  EXPECT_EQ(c["gradient_accumulation_steps"], 1);
  EXPECT_EQ(c["optimizer"]["type"], "Adam");
  const json& params = c["optimizer"]["params"];
  EXPECT_EQ(params["lr"], 1e-3);
  EXPECT_EQ(params["betas"], json({0.9, 0.999}));
  EXPECT_EQ(params["eps"], 1e-8);
  EXPECT_EQ(params["weight_decay"], 3e-7);
  EXPECT_EQ(c["gradient_clipping"], 1.0);
  EXPECT_EQ(c["bf16"]["enabled"], true);
  EXPECT_FALSE(c.contains("fp16"));
  EXPECT_EQ(c["zero_optimization"]["stage"], 2);
  EXPECT_FALSE(c.contains("scheduler"));  // a constant rate, as DeepSpeed's
}

TEST(DeepSpeedStudy, LenetTrainedAndResnet18TimedWithTheConfig) {
  StudyFlags flags;
  flags.name = "deepspeed";
  flags.peers = "torch-ddp,libtorch";
  flags.json_path = "/tmp/ds-study.json";
  StatusOr<std::vector<StudyStep>> steps = PlanStudy(flags);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 2u);
  const TrainFlags& lenet = (*steps)[0].flags;
  EXPECT_EQ(lenet.model, "lenet");
  EXPECT_EQ(lenet.dataset, "fashion-mnist");
  EXPECT_GT(lenet.epochs, 0);
  EXPECT_EQ(lenet.np, "1,2,4");
  EXPECT_EQ(lenet.study, "deepspeed");
  EXPECT_EQ(lenet.config_path, "/tmp/ds-study.lenet.ds_config.json");
  EXPECT_EQ(lenet.optimizer, "adam");
  EXPECT_EQ(lenet.lr, 1e-3);
  EXPECT_EQ(lenet.peers, "torch-ddp");  // libtorch has no ZeRO
  // The ds_config's optimizer section keeps kolo-train's rate constant
  // and unscaled; no flag may override the file's recipe.
  EXPECT_TRUE(lenet.kolo_train_args.empty());
  // The peer's closest: ZeRO-1, bf16 autocast, the same clipping and decay.
  for (const char* flag :
       {"--zero", "--precision", "bf16", "--gradient-clipping", "1.0",
        "--weight-decay", "3e-7", "--no-lr-scaling"}) {
    EXPECT_TRUE(Has(lenet.ddp_args, flag)) << flag;
  }
  const TrainFlags& resnet = (*steps)[1].flags;
  EXPECT_EQ(resnet.model, "resnet18");
  EXPECT_EQ(resnet.dataset, "synthetic");
  EXPECT_EQ(resnet.image_size, 32);
  EXPECT_EQ(resnet.epochs, 0);  // timed
  EXPECT_EQ(resnet.config_path, "/tmp/ds-study.resnet18.ds_config.json");
  const std::vector<std::string> c =
      TrainCommand(resnet, "kolo", 2, resnet.batch_size, Tools(), "/tmp/r");
  EXPECT_TRUE(HasFlag(c, "--config", "/tmp/ds-study.resnet18.ds_config.json"));
}

}  // namespace
}  // namespace kolo::bench
