#include "study.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include "json_file.h"
#include "list_flag.h"
#include "table.h"

namespace kolo::bench {
namespace {

constexpr const char* kSmallCnn = "small-cnn";
constexpr const char* kResnetMobilenet = "resnet-mobilenet";
constexpr const char* kScaling = "scaling";
constexpr const char* kDeepSpeed = "deepspeed";
constexpr const char* kPsVsAllreduce = "ps-vs-allreduce";

// The framework study's DeepSpeed optimizer, as a ds_config writes it.
constexpr double kDeepSpeedLr = 1e-3;
constexpr const char* kDeepSpeedWeightDecay = "3e-7";
constexpr const char* kDeepSpeedClipping = "1.0";

// How far a preset is scaled down: the steps, epochs and examples of its
// runs. kFull is what the README's tables were measured with: each preset
// took 7-8 minutes on 2 cores with the DDP peer while other builds shared
// the machine, leaving room under 15 minutes for a busier one. That is why
// small-cnn trains 10 epochs rather than kolo-train's 15 (88% there, about
// 87.8% here), and mobilenetv2, at about 90 images/s, sees 2,048 images an
// epoch. kQuick only proves the plumbing.
struct StudyScale {
  // small-cnn: lenet trained on Fashion-MNIST.
  int64_t lenet_epochs;
  int64_t lenet_train_subset;  // 0: all 60,000
  int64_t lenet_test_subset;   // 0: all 10,000
  // resnet-mobilenet: resnet50 timed, mobilenetv2 trained.
  int64_t resnet50_warmup;
  int64_t resnet50_iters;
  int32_t resnet50_repeat;
  int64_t mobilenet_epochs;
  int64_t mobilenet_train_subset;
  int64_t mobilenet_test_subset;
  // scaling: resnet18 timed.
  int64_t resnet18_warmup;
  int64_t resnet18_iters;
  int32_t resnet18_repeat;
  // deepspeed: lenet trained, resnet18 timed, both in bf16 with ZeRO-2.
  int64_t ds_lenet_epochs;
  int64_t ds_lenet_train_subset;
  int64_t ds_lenet_test_subset;
  int64_t ds_resnet18_warmup;
  int64_t ds_resnet18_iters;
  // ps-vs-allreduce: lenet trained, resnet18 timed, by each variant.
  int64_t ps_lenet_epochs;
  int64_t ps_lenet_train_subset;
  int64_t ps_lenet_test_subset;
  int64_t ps_resnet18_warmup;
  int64_t ps_resnet18_iters;
  int32_t ps_resnet18_repeat;
};

constexpr StudyScale kFull = {/*lenet_epochs=*/10,
                              /*lenet_train_subset=*/0,
                              /*lenet_test_subset=*/0,
                              /*resnet50_warmup=*/2,
                              /*resnet50_iters=*/6,
                              /*resnet50_repeat=*/2,
                              /*mobilenet_epochs=*/2,
                              /*mobilenet_train_subset=*/2048,
                              /*mobilenet_test_subset=*/1000,
                              /*resnet18_warmup=*/1,
                              /*resnet18_iters=*/3,
                              /*resnet18_repeat=*/2,
                              /*ds_lenet_epochs=*/2,
                              /*ds_lenet_train_subset=*/16384,
                              /*ds_lenet_test_subset=*/0,
                              /*ds_resnet18_warmup=*/1,
                              /*ds_resnet18_iters=*/4,
                              /*ps_lenet_epochs=*/10,
                              /*ps_lenet_train_subset=*/0,
                              /*ps_lenet_test_subset=*/0,
                              /*ps_resnet18_warmup=*/1,
                              /*ps_resnet18_iters=*/4,
                              /*ps_resnet18_repeat=*/2};

// Small enough for a test: every job lasts a few seconds, and lenet still
// learns enough in its three epochs (at np 4, 8 steps each) to tell a
// working run from a broken one.
constexpr StudyScale kQuick = {/*lenet_epochs=*/3,
                               /*lenet_train_subset=*/4096,
                               /*lenet_test_subset=*/1000,
                               /*resnet50_warmup=*/0,
                               /*resnet50_iters=*/1,
                               /*resnet50_repeat=*/1,
                               /*mobilenet_epochs=*/1,
                               /*mobilenet_train_subset=*/256,
                               /*mobilenet_test_subset=*/256,
                               /*resnet18_warmup=*/0,
                               /*resnet18_iters=*/1,
                               /*resnet18_repeat=*/1,
                               /*ds_lenet_epochs=*/1,
                               /*ds_lenet_train_subset=*/2048,
                               /*ds_lenet_test_subset=*/1000,
                               /*ds_resnet18_warmup=*/0,
                               /*ds_resnet18_iters=*/1,
                               /*ps_lenet_epochs=*/1,
                               /*ps_lenet_train_subset=*/1024,
                               /*ps_lenet_test_subset=*/500,
                               /*ps_resnet18_warmup=*/0,
                               /*ps_resnet18_iters=*/0,
                               /*ps_resnet18_repeat=*/1};

std::string Examples(int64_t subset, const char* all) {
  return subset > 0 ? fmt::format("the first {}", subset) : std::string(all);
}

// "E epoch(s) on ... training and ... test images" of Fashion-MNIST.
std::string LenetEpochsText(int64_t epochs, int64_t train_subset,
                            int64_t test_subset) {
  return fmt::format("{} epoch{} on {} training and {} test images", epochs,
                     epochs == 1 ? "" : "s",
                     Examples(train_subset, "all 60,000"),
                     Examples(test_subset, "all 10,000"));
}

std::string ScaleText(const std::string& name, const StudyScale& s) {
  if (name == kSmallCnn) {
    return fmt::format("{} epochs on {} training and {} test images, 1 repeat",
                       s.lenet_epochs,
                       Examples(s.lenet_train_subset, "all 60,000"),
                       Examples(s.lenet_test_subset, "all 10,000"));
  }
  if (name == kResnetMobilenet) {
    return fmt::format(
        "resnet50: {} warm-up + {} timed steps, {} repeats; mobilenetv2: {} "
        "epochs on {} training and {} test images, 1 repeat",
        s.resnet50_warmup, s.resnet50_iters, s.resnet50_repeat,
        s.mobilenet_epochs, Examples(s.mobilenet_train_subset, "all"),
        Examples(s.mobilenet_test_subset, "all"));
  }
  if (name == kDeepSpeed) {
    return fmt::format(
        "lenet: {}; resnet18: {} warm-up + {} timed steps; 1 repeat",
        LenetEpochsText(s.ds_lenet_epochs, s.ds_lenet_train_subset,
                        s.ds_lenet_test_subset),
        s.ds_resnet18_warmup, s.ds_resnet18_iters);
  }
  if (name == kPsVsAllreduce) {
    return fmt::format(
        "lenet: {}; resnet18: {} warm-up + {} timed steps{}, {} repeat{}",
        LenetEpochsText(s.ps_lenet_epochs, s.ps_lenet_train_subset,
                        s.ps_lenet_test_subset),
        s.ps_resnet18_warmup, s.ps_resnet18_iters,
        s.ps_resnet18_iters == 0 ? " (left out)" : "", s.ps_resnet18_repeat,
        s.ps_resnet18_repeat == 1 ? "" : "s");
  }
  return fmt::format("{} warm-up + {} timed steps, {} repeats",
                     s.resnet18_warmup, s.resnet18_iters, s.resnet18_repeat);
}

// What a preset is for, in a line of the help text.
std::string Purpose(const std::string& name) {
  if (name == kSmallCnn) {
    return "lenet on Fashion-MNIST, batch 128 per worker, np 1, 2, 4: wall "
           "time, images/s, test accuracy";
  }
  if (name == kResnetMobilenet) {
    return "resnet50 on 28x28 synthetic images, batch 32, np 1, 2: "
           "throughput; mobilenetv2 on Fashion-MNIST, batch 32, np 1, 2: wall "
           "time, images/s, test accuracy";
  }
  if (name == kDeepSpeed) {
    return "the framework study's DeepSpeed configuration as a ds_config for "
           "kolo-train --config (Adam lr 1e-3, betas 0.9/0.999, eps 1e-8, "
           "weight decay 3e-7; gradient_clipping 1.0; bf16, since LibTorch "
           "has no CPU fp16 kernels; ZeRO stage 2; no scheduler, so a "
           "constant rate, not scaled by the workers): lenet on "
           "Fashion-MNIST, batch 128 per worker (wall time, images/s, test "
           "accuracy) and resnet18 on CIFAR-style 3x32x32 synthetic images, "
           "batch 32 per worker (images/s), np 1, 2, 4. The torch-ddp peer "
           "runs the closest it has: the same Adam, clipping and constant "
           "rate, bf16 autocast over fp32 weights, and "
           "ZeroRedundancyOptimizer, "
           "which is ZeRO stage 1 (gradients allreduced whole, not "
           "reduce-scattered); it reads no ds_config";
  }
  if (name == kPsVsAllreduce) {
    return "kolo's parameter server against its allreduce, each a kolorun "
           "job of the same kolo-train: allreduce (kolo), synchronous, "
           "asynchronous and bounded-staleness (2) parameter servers on 1 "
           "server (kolo-ps-sync-1, kolo-ps-async-1, kolo-ps-stale-1) at 2 "
           "and 4 workers, and sync and async on 2 servers (kolo-ps-sync-2, "
           "kolo-ps-async-2) at 4 workers; lenet on Fashion-MNIST, batch 128 "
           "per worker (wall time, images/s, test accuracy, and the "
           "asynchronous modes' accuracy less the synchronous one's) and "
           "resnet18 on synthetic 3x32x32 images, batch 32 per worker "
           "(images/s). The servers are extra processes (kolorun "
           "--servers K) on the same cores";
  }
  return "resnet18 on 32x32 synthetic images, global batch 128, np 1, 2, 4: "
         "weak and strong scaling (images/s, speedup, efficiency)";
}

// The ds_config file of a deepspeed step: beside the study's --json file,
// named after it and the model.
std::string ConfigPath(const std::string& json_path, const std::string& model) {
  std::string stem = json_path;
  const std::string suffix = ".json";
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
    stem.resize(stem.size() - suffix.size());
  }
  return stem + "." + model + ".ds_config.json";
}

// A deepspeed step: the ds_config for kolo-train (whose optimizer section
// makes kolo-train keep its rate constant and unscaled, as DeepSpeed does
// without a "scheduler"), and the same recipe spelled in flags for the peer.
void ApplyDeepSpeed(TrainFlags* f) {
  f->config_path = ConfigPath(f->json_path, f->model);
  f->optimizer = "adam";
  f->lr = kDeepSpeedLr;
  const std::vector<std::string> schedule = {
      "--no-lr-scaling", "--lr-schedule", "constant", "--warmup-epochs", "0"};
  f->ddp_args = schedule;
  f->ddp_args.insert(
      f->ddp_args.end(),
      {"--weight-decay", kDeepSpeedWeightDecay, "--gradient-clipping",
       kDeepSpeedClipping, "--precision", "bf16", "--zero"});
}

// What every step shares: one LibTorch thread per worker (the machine's
// two cores are the workers'), and the tools and output of the study.
TrainFlags BaseFlags(const StudyFlags& study) {
  TrainFlags f;
  f.threads = 1;
  f.repeat = 1;
  f.peers = study.peers;
  f.json_path = study.json_path.empty() ? "kolo-study-" + study.name + ".json"
                                        : study.json_path;
  f.study = study.name;
  f.kolorun = study.kolorun;
  f.kolo_train = study.kolo_train;
  f.ddp_script = study.ddp_script;
  f.python = study.python;
  return f;
}

// Accuracy steps drop the libtorch peer: it only times steps.
std::string AccuracyPeers(const std::string& peers) {
  std::string out;
  for (const std::string& item : SplitList(peers)) {
    if (item == "libtorch") continue;
    out += (out.empty() ? "" : ",") + item;
  }
  return out;
}

// The ps-vs-allreduce preset's variants of one model's step: allreduce at
// 2 and 4 workers, then the synchronous, asynchronous and bounded-staleness
// (2) parameter servers on 1 server at 2 and 4 workers, and the first two
// on 2 servers at 4 (2 servers for 2 workers would put as many servers as
// workers on the machine's 2 cores).
// --quick: 2 workers and 1 server only.
void AddPsSteps(const TrainFlags& step, const std::string& title, bool quick,
                std::vector<StudyStep>* steps) {
  TrainFlags allreduce = step;
  allreduce.np = quick ? "2" : "2,4";
  steps->push_back({title + ": allreduce", allreduce});
  for (int32_t servers : {1, 2}) {
    if (quick && servers > 1) break;
    for (const char* mode : {"sync", "async", "stale"}) {
      const bool stale = std::string(mode) == "stale";
      // Bounded staleness on one server only: its point is the bound, not
      // the servers' bandwidth.
      if (stale && servers > 1) continue;
      TrainFlags ps = step;
      ps.np = quick ? "2" : servers == 1 ? "2,4" : "4";
      ps.kolo_name = fmt::format("kolo-ps-{}-{}", mode, servers);
      ps.kolorun_args = {"--servers", std::to_string(servers)};
      ps.kolo_train_args = {"--parameter-servers", std::to_string(servers),
                            "--ps-mode", mode};
      if (stale) {
        ps.kolo_train_args.insert(ps.kolo_train_args.end(),
                                  {"--staleness", "2"});
      }
      steps->push_back(
          {fmt::format("{}: parameter server, {}, {} server{}", title, mode,
                       servers, servers == 1 ? "" : "s"),
           ps});
    }
  }
}

// An accuracy run of `model` on Fashion-MNIST for `epochs` epochs on the
// first `train` training and `test` test images, beside the peers that
// can measure accuracy.
TrainFlags FashionMnistRun(const TrainFlags& base, const StudyFlags& study,
                           const char* model, int64_t epochs, int64_t train,
                           int64_t test) {
  TrainFlags f = base;
  f.model = model;
  f.dataset = "fashion-mnist";
  f.data_dir = study.data_dir;
  f.epochs = epochs;
  f.train_subset = train;
  f.test_subset = test;
  f.peers = AccuracyPeers(study.peers);
  return f;
}

// A throughput run of `model` on synthetic `image_size` images.
TrainFlags SyntheticRun(const TrainFlags& base, const char* model,
                        int64_t image_size, int64_t warmup, int64_t iters,
                        int32_t repeat) {
  TrainFlags f = base;
  f.model = model;
  f.dataset = "synthetic";
  f.image_size = image_size;
  f.warmup = warmup;
  f.iters = iters;
  f.repeat = repeat;
  return f;
}

// Each preset's steps, from the flags every step shares.
using StudyPlanner = std::vector<StudyStep> (*)(const StudyFlags&,
                                                const StudyScale&,
                                                const TrainFlags&);

std::vector<StudyStep> SmallCnnSteps(const StudyFlags& study,
                                     const StudyScale& s,
                                     const TrainFlags& base) {
  TrainFlags f = FashionMnistRun(base, study, "lenet", s.lenet_epochs,
                                 s.lenet_train_subset, s.lenet_test_subset);
  f.batch_size = 128;
  f.np = "1,2,4";
  return {{"lenet on Fashion-MNIST: time, images/s, test accuracy", f}};
}

std::vector<StudyStep> ResnetMobilenetSteps(const StudyFlags& study,
                                            const StudyScale& s,
                                            const TrainFlags& base) {
  TrainFlags resnet = SyntheticRun(base, "resnet50", 28, s.resnet50_warmup,
                                   s.resnet50_iters, s.resnet50_repeat);
  resnet.batch_size = 32;
  resnet.np = "1,2";
  TrainFlags mobilenet =
      FashionMnistRun(base, study, "mobilenetv2", s.mobilenet_epochs,
                      s.mobilenet_train_subset, s.mobilenet_test_subset);
  mobilenet.batch_size = 32;
  mobilenet.np = "1,2";
  return {{"resnet50 on synthetic 28x28: throughput", resnet},
          {"mobilenetv2 on Fashion-MNIST: time, images/s, test accuracy",
           mobilenet}};
}

std::vector<StudyStep> ScalingSteps(const StudyFlags&, const StudyScale& s,
                                    const TrainFlags& base) {
  std::vector<StudyStep> steps;
  for (const char* scaling : {"weak", "strong"}) {
    TrainFlags f =
        SyntheticRun(base, "resnet18", base.image_size, s.resnet18_warmup,
                     s.resnet18_iters, s.resnet18_repeat);
    f.batch_size = 128;  // per worker (weak) or global (strong)
    f.np = "1,2,4";
    f.scaling = scaling;
    steps.push_back(
        {fmt::format("resnet18 on synthetic 32x32, global batch 128 at np "
                     "1: {} scaling",
                     scaling),
         f});
  }
  return steps;
}

std::vector<StudyStep> DeepSpeedSteps(const StudyFlags& study,
                                      const StudyScale& s,
                                      const TrainFlags& base) {
  TrainFlags lenet =
      FashionMnistRun(base, study, "lenet", s.ds_lenet_epochs,
                      s.ds_lenet_train_subset, s.ds_lenet_test_subset);
  lenet.batch_size = 128;
  lenet.np = "1,2,4";
  ApplyDeepSpeed(&lenet);
  TrainFlags resnet = SyntheticRun(base, "resnet18", 32, s.ds_resnet18_warmup,
                                   s.ds_resnet18_iters, 1);
  resnet.batch_size = 32;
  resnet.np = "1,2,4";
  // kolo-train --no-kolo has no ZeRO to run the recipe with.
  resnet.peers = AccuracyPeers(study.peers);
  ApplyDeepSpeed(&resnet);
  return {{"lenet on Fashion-MNIST, DeepSpeed's recipe (Adam, "
           "clipping 1.0, bf16, ZeRO-2): time, images/s, test "
           "accuracy",
           lenet},
          {"resnet18 on CIFAR-style synthetic 3x32x32, DeepSpeed's "
           "recipe: throughput",
           resnet}};
}

// kolo only: the peers have no parameter server to compare.
std::vector<StudyStep> PsVsAllreduceSteps(const StudyFlags& study,
                                          const StudyScale& s,
                                          const TrainFlags& base) {
  std::vector<StudyStep> steps;
  TrainFlags lenet =
      FashionMnistRun(base, study, "lenet", s.ps_lenet_epochs,
                      s.ps_lenet_train_subset, s.ps_lenet_test_subset);
  lenet.peers.clear();
  lenet.batch_size = 128;
  AddPsSteps(lenet, "lenet on Fashion-MNIST: time, images/s, test accuracy",
             study.quick, &steps);
  // --quick proves the plumbing on lenet alone: a resnet18 job takes 7 to
  // 10 s on 2 cores whatever its steps, mostly starting its ranks.
  if (study.quick) return steps;
  TrainFlags resnet =
      SyntheticRun(base, "resnet18", base.image_size, s.ps_resnet18_warmup,
                   s.ps_resnet18_iters, s.ps_resnet18_repeat);
  resnet.peers.clear();
  resnet.batch_size = 32;
  // Timed steps cycle through these; generating 60,000 synthetic images
  // would take longer than the steps.
  resnet.train_subset = 1024;
  AddPsSteps(resnet, "resnet18 on synthetic 3x32x32: throughput", study.quick,
             &steps);
  return steps;
}

}  // namespace

std::vector<std::string> StudyNames() {
  return {kSmallCnn, kResnetMobilenet, kScaling, kDeepSpeed, kPsVsAllreduce};
}

nlohmann::json DeepSpeedConfig(int64_t micro_batch) {
  return {{"train_micro_batch_size_per_gpu", micro_batch},
          {"gradient_accumulation_steps", 1},
          {"optimizer",
           {{"type", "Adam"},
            {"params",
             {{"lr", kDeepSpeedLr},
              {"betas", {0.9, 0.999}},
              {"eps", 1e-8},
              {"weight_decay", 3e-7}}}}},
          {"gradient_clipping", 1.0},
          {"bf16", {{"enabled", true}}},
          {"zero_optimization", {{"stage", 2}}}};
}

Status WriteStudyConfigs(const std::vector<StudyStep>& steps) {
  for (const StudyStep& step : steps) {
    if (step.flags.config_path.empty()) continue;
    KOLO_RETURN_IF_ERROR(WriteJsonFile(step.flags.config_path,
                                       DeepSpeedConfig(step.flags.batch_size))
                             .WithContext("the ds_config of " + step.title));
  }
  return Status::Ok();
}

std::string PresetScale(const std::string& name) {
  return ScaleText(name, kFull);
}

StatusOr<std::vector<StudyStep>> PlanStudy(const StudyFlags& study) {
  KOLO_RETURN_IF_ERROR(ParseTrainPeers(study.peers).status());
  static const std::pair<const char*, StudyPlanner> kPlanners[] = {
      {kSmallCnn, SmallCnnSteps},
      {kResnetMobilenet, ResnetMobilenetSteps},
      {kScaling, ScalingSteps},
      {kDeepSpeed, DeepSpeedSteps},
      {kPsVsAllreduce, PsVsAllreduceSteps}};
  for (const auto& [name, planner] : kPlanners) {
    if (study.name == name) {
      return planner(study, study.quick ? kQuick : kFull, BaseFlags(study));
    }
  }
  std::string names;
  for (const std::string& n : StudyNames()) {
    names += (names.empty() ? "" : ", ") + n;
  }
  return InvalidArgument("unknown study '" + study.name +
                         "'; the presets are " + names);
}

namespace {

// "-1.23": an asynchronous variant's test accuracy less the synchronous
// server's at the same model, workers and servers; "-" elsewhere.
std::string AccuracyAgainstSync(
    const nlohmann::json& row, const std::string& model, int64_t np,
    const std::string& servers,
    const std::map<std::tuple<std::string, int64_t, std::string>, double>&
        sync_accuracy) {
  const std::string framework = row.value("framework", "");
  const bool asynchronous = framework.rfind("kolo-ps-async-", 0) == 0 ||
                            framework.rfind("kolo-ps-stale-", 0) == 0;
  if (!asynchronous || !row.contains("test_accuracy")) return "-";
  const auto sync = sync_accuracy.find({model, np, servers});
  if (sync == sync_accuracy.end()) return "-";
  return FormatFixed(row["test_accuracy"].get<double>() - sync->second, 2);
}

}  // namespace

std::vector<std::string> PsSummaryLines(
    const std::vector<nlohmann::json>& records) {
  // Table::Column: title, unit, width, group, left-aligned.
  Table table({{"model", "", 8, "", true},
               {"np", "", 3, "", false},
               {"variant", "", 15, "", true},
               {"servers", "", 7, "", false},
               {"images/s", "mean", 9, "", false},
               {"images/s", "÷ allreduce", 11, "", false},
               {"test acc", "(%)", 8, "", false},
               {"test acc", "- sync", 8, "", false},
               {"wall", "(s)", 7, "", false}});
  std::vector<std::string> lines = table.HeaderLines();
  // allreduce's images/s by model and workers, for the ratio.
  std::map<std::pair<std::string, int64_t>, double> allreduce;
  for (const nlohmann::json& record : records) {
    const std::string model = record["config"].value("model", "");
    for (const nlohmann::json& row : record.value("rows", nlohmann::json())) {
      if (row.value("framework", "") == "kolo") {
        allreduce[{model, row.value("np", int64_t{0})}] =
            row.value("images_per_second_mean", 0.0);
      }
    }
  }
  // The synchronous server's accuracy by model, workers and servers: the
  // asynchronous modes are held to it.
  std::map<std::tuple<std::string, int64_t, std::string>, double> sync_accuracy;
  for (const nlohmann::json& record : records) {
    const std::string model = record["config"].value("model", "");
    for (const nlohmann::json& row : record.value("rows", nlohmann::json())) {
      const std::string framework = row.value("framework", "");
      if (framework.rfind("kolo-ps-sync-", 0) == 0 &&
          row.contains("test_accuracy")) {
        sync_accuracy[{model, row.value("np", int64_t{0}),
                       framework.substr(std::string("kolo-ps-sync-").size())}] =
            row["test_accuracy"].get<double>();
      }
    }
  }
  for (const nlohmann::json& record : records) {
    const nlohmann::json& config = record["config"];
    const std::string model = config.value("model", "");
    const nlohmann::json args =
        config.value("kolorun_args", nlohmann::json::array());
    const std::string servers =
        args.size() == 2 ? args[1].get<std::string>() : "-";
    for (const nlohmann::json& row : record.value("rows", nlohmann::json())) {
      const int64_t np = row.value("np", int64_t{0});
      const double rate = row.value("images_per_second_mean", 0.0);
      const auto base = allreduce.find({model, np});
      const std::string framework = row.value("framework", "");
      lines.push_back(table.Row(
          {model, std::to_string(np),
           framework == "kolo" ? "allreduce" : framework, servers,
           FormatFixed(rate, 0),
           base != allreduce.end() && base->second > 0
               ? FormatFixed(rate / base->second, 2)
               : "-",
           row.contains("test_accuracy")
               ? FormatFixed(row["test_accuracy"].get<double>(), 2)
               : "-",
           AccuracyAgainstSync(row, model, np, servers, sync_accuracy),
           row.contains("wall_seconds")
               ? FormatFixed(row["wall_seconds"].get<double>(), 1)
               : "-"}));
    }
  }
  return lines;
}

CLI::App* AddStudyCommand(CLI::App& app, StudyFlags* f) {
  std::string description =
      "preset comparisons of kolo against its peers, each under 15 minutes "
      "on 2 cores, scaled down in steps, epochs and examples (never in "
      "model, batch or workers):";
  for (const std::string& name : StudyNames()) {
    description += "\n  " + name + ": " + Purpose(name) +
                   ".\n    Scaled down to " + PresetScale(name) + ".";
  }
  CLI::App* cmd = app.add_subcommand("study", description);
  cmd->add_option("name", f->name, "the preset")
      ->required()
      ->check(CLI::IsMember(StudyNames()));
  cmd->add_option("--peer", f->peers,
                  "peers measured beside kolo: torch-ddp, libtorch "
                  "(throughput steps only; comma-separated)");
  cmd->add_option("--json", f->json_path,
                  "append every record here (default kolo-study-NAME.json)");
  cmd->add_flag("--quick", f->quick,
                "a few steps and examples per job: checks the study runs, "
                "measures nothing worth reporting");
  cmd->add_option("--data-dir", f->data_dir, "where Fashion-MNIST's files are");
  AddToolFlags(cmd, &f->kolorun, &f->kolo_train, &f->ddp_script, &f->python);
  return cmd;
}

int RunStudyCommand(const StudyFlags& flags) {
  using Clock = std::chrono::steady_clock;
  StatusOr<std::vector<StudyStep>> steps = PlanStudy(flags);
  if (!steps.ok()) {
    fmt::print(stderr, "kolo-bench study: {}\n", steps.status().message());
    return 1;
  }
  Status written = WriteStudyConfigs(*steps);
  if (!written.ok()) {
    fmt::print(stderr, "kolo-bench study: {}\n", written.message());
    return 1;
  }
  fmt::print("# kolo-bench study {}{}: {}\n", flags.name,
             flags.quick ? " --quick" : "",
             ScaleText(flags.name, flags.quick ? kQuick : kFull));
  std::vector<double> seconds;
  std::vector<nlohmann::json> records;
  const Clock::time_point start = Clock::now();
  for (const StudyStep& step : *steps) {
    fmt::print("\n## {}\n", step.title);
    std::fflush(stdout);
    const Clock::time_point step_start = Clock::now();
    StatusOr<nlohmann::json> record = RunTrain(step.flags);
    if (!record.ok()) {
      fmt::print(stderr, "kolo-bench study {}: {}: {}\n", flags.name,
                 step.title, record.status().message());
      return 1;
    }
    seconds.push_back(
        std::chrono::duration<double>(Clock::now() - step_start).count());
    records.push_back(*std::move(record));
  }
  if (flags.name == kPsVsAllreduce) {
    fmt::print("\n## every variant, against allreduce at the same workers\n");
    for (const std::string& line : PsSummaryLines(records)) {
      fmt::print("{}\n", line);
    }
  }
  const double total =
      std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print("\n# study {}: {} step{} in {:.0f} s (", flags.name, steps->size(),
             steps->size() == 1 ? "" : "s", total);
  for (size_t i = 0; i < seconds.size(); ++i) {
    fmt::print("{}{:.0f} s", i == 0 ? "" : ", ", seconds[i]);
  }
  fmt::print("); records appended to {}\n", steps->front().flags.json_path);
  return 0;
}

}  // namespace kolo::bench
