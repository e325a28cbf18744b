#include "study.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "list_flag.h"

namespace kolo::bench {
namespace {

constexpr const char* kSmallCnn = "small-cnn";
constexpr const char* kResnetMobilenet = "resnet-mobilenet";
constexpr const char* kScaling = "scaling";

// How far a preset is scaled down: the steps, epochs and examples of its
// runs. kFull is what the README's tables were measured with: each preset
// took 7-8 minutes on 2 cores with the DDP peer while other builds shared
// the machine, leaving room under 15 minutes for a busier one. That is why
// small-cnn trains 10 epochs rather than kolo-train's 15 (88% there, about
// 87.8% here), and mobilenetv2, at about 90 images/s, sees 2,048 images an
// epoch. kQuick only proves the plumbing.
struct Scale {
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
};

constexpr Scale kFull = {/*lenet_epochs=*/10,
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
                         /*resnet18_repeat=*/2};

// Small enough for a test: every job lasts a few seconds, and lenet still
// learns enough in its three epochs (at np 4, 8 steps each) to tell a
// working run from a broken one.
constexpr Scale kQuick = {/*lenet_epochs=*/3,
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
                          /*resnet18_repeat=*/1};

std::string Examples(int64_t subset, const char* all) {
  return subset > 0 ? fmt::format("the first {}", subset) : std::string(all);
}

std::string ScaleText(const std::string& name, const Scale& s) {
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
  return "resnet18 on 32x32 synthetic images, global batch 128, np 1, 2, 4: "
         "weak and strong scaling (images/s, speedup, efficiency)";
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

}  // namespace

std::vector<std::string> StudyNames() {
  return {kSmallCnn, kResnetMobilenet, kScaling};
}

std::string PresetScale(const std::string& name) {
  return ScaleText(name, kFull);
}

StatusOr<std::vector<StudyStep>> PlanStudy(const StudyFlags& study) {
  KOLO_RETURN_IF_ERROR(ParseTrainPeers(study.peers).status());
  const Scale& s = study.quick ? kQuick : kFull;
  const TrainFlags base = BaseFlags(study);
  std::vector<StudyStep> steps;
  if (study.name == kSmallCnn) {
    TrainFlags f = base;
    f.model = "lenet";
    f.dataset = "fashion-mnist";
    f.data_dir = study.data_dir;
    f.batch_size = 128;
    f.np = "1,2,4";
    f.epochs = s.lenet_epochs;
    f.train_subset = s.lenet_train_subset;
    f.test_subset = s.lenet_test_subset;
    f.peers = AccuracyPeers(study.peers);
    steps.push_back(
        {"lenet on Fashion-MNIST: time, images/s, test accuracy", f});
  } else if (study.name == kResnetMobilenet) {
    TrainFlags resnet = base;
    resnet.model = "resnet50";
    resnet.dataset = "synthetic";
    resnet.image_size = 28;
    resnet.batch_size = 32;
    resnet.np = "1,2";
    resnet.warmup = s.resnet50_warmup;
    resnet.iters = s.resnet50_iters;
    resnet.repeat = s.resnet50_repeat;
    steps.push_back({"resnet50 on synthetic 28x28: throughput", resnet});
    TrainFlags mobilenet = base;
    mobilenet.model = "mobilenetv2";
    mobilenet.dataset = "fashion-mnist";
    mobilenet.data_dir = study.data_dir;
    mobilenet.batch_size = 32;
    mobilenet.np = "1,2";
    mobilenet.epochs = s.mobilenet_epochs;
    mobilenet.train_subset = s.mobilenet_train_subset;
    mobilenet.test_subset = s.mobilenet_test_subset;
    mobilenet.peers = AccuracyPeers(study.peers);
    steps.push_back(
        {"mobilenetv2 on Fashion-MNIST: time, images/s, test accuracy",
         mobilenet});
  } else if (study.name == kScaling) {
    for (const char* scaling : {"weak", "strong"}) {
      TrainFlags f = base;
      f.model = "resnet18";
      f.dataset = "synthetic";
      f.batch_size = 128;  // per worker (weak) or global (strong)
      f.np = "1,2,4";
      f.scaling = scaling;
      f.warmup = s.resnet18_warmup;
      f.iters = s.resnet18_iters;
      f.repeat = s.resnet18_repeat;
      steps.push_back(
          {fmt::format("resnet18 on synthetic 32x32, global batch 128 at np "
                       "1: {} scaling",
                       scaling),
           f});
    }
  } else {
    std::string names;
    for (const std::string& n : StudyNames()) {
      names += (names.empty() ? "" : ", ") + n;
    }
    return InvalidArgument("unknown study '" + study.name +
                           "'; the presets are " + names);
  }
  return steps;
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
  cmd->add_option("--kolorun", f->kolorun, "kolorun to start kolo's jobs with");
  cmd->add_option("--kolo-train", f->kolo_train, "kolo-train to run");
  cmd->add_option("--ddp-script", f->ddp_script, "torch_ddp.py to run");
  return cmd;
}

int RunStudyCommand(const StudyFlags& flags) {
  using Clock = std::chrono::steady_clock;
  StatusOr<std::vector<StudyStep>> steps = PlanStudy(flags);
  if (!steps.ok()) {
    fmt::print(stderr, "kolo-bench study: {}\n", steps.status().message());
    return 1;
  }
  fmt::print("# kolo-bench study {}{}: {}\n", flags.name,
             flags.quick ? " --quick" : "",
             ScaleText(flags.name, flags.quick ? kQuick : kFull));
  std::vector<double> seconds;
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
