#include "train.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bench_common.h"
#include "json_file.h"
#include "kolo_internal/config.h"
#include "list_flag.h"
#include "metrics_scraper.h"
#include "peer_python.h"
#include "progress_line.h"
#include "scratch_dir.h"
#include "sibling_tools.h"
#include "statistics.h"
#include "table.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// kolo with kolorun --metrics-port, scraped once a second: what monitoring
// costs, against kolo without it in the same run.
constexpr const char* kKoloMetrics = "kolo-metrics";

// One measurement to make: a framework at a world size.
struct Run {
  std::string framework;
  int32_t np = 1;
  int64_t batch = 0;  // per worker
};

std::string RunLabel(const Run& run) {
  return fmt::format("{} np {}", run.framework, run.np);
}

// One job's JSON as it wrote it (the record keeps it) and its result read
// through the schema.
struct Measured {
  json job;
  TrainResult result;
};

// Runs `command` with its output in `log`; what it wrote, or an error
// quoting the last lines of its output or naming the key it got wrong.
StatusOr<Measured> Measure(const std::vector<std::string>& command,
                           const fs::path& json_path, const fs::path& log) {
  KOLO_ASSIGN_OR_RETURN(JobOutput out,
                        RunJob(command, json_path.string(), log.string()));
  KOLO_ASSIGN_OR_RETURN(TrainResult result,
                        TrainResultOfJob(out.json, json_path.string()));
  return Measured{std::move(out.json), std::move(result)};
}

std::string FormatRate(const MeanInterval& m) {
  return fmt::format("{:.0f} ± {:.0f}", m.mean, m.half_width);
}

// The checks CLI11 does not make; kInvalidArgument naming the flag.
Status Validate(const TrainFlags& f, const std::vector<std::string>& peers) {
  if (f.iters < 1 || f.warmup < 0 || f.repeat < 1 || f.threads < 1 ||
      f.batch_size < 1) {
    return InvalidArgument(
        "--iters, --repeat, --threads and --batch-size must be at least 1, "
        "--warmup at least 0");
  }
  if (f.epochs < 0 || f.train_subset < 0 || f.test_subset < 0) {
    return InvalidArgument(
        "--epochs, --train-subset and --test-subset must not be negative");
  }
  if (f.image_size < 1) {
    return InvalidArgument(
        fmt::format("--image-size must be at least 1, got {}", f.image_size));
  }
  if (f.image_size != 32 && f.dataset != "synthetic") {
    return InvalidArgument("--image-size applies to --dataset synthetic only");
  }
  if (f.lr < 0) {
    return InvalidArgument(
        fmt::format("--lr must not be negative, got {}", f.lr));
  }
  if (!f.config_path.empty() && !fs::is_regular_file(f.config_path)) {
    return InvalidArgument(
        fmt::format("--config {}: no such file", f.config_path));
  }
  if (f.epochs == 0) {
    if (f.test_subset > 0) {
      return InvalidArgument("--test-subset applies to --epochs only");
    }
    return Status::Ok();
  }
  // The synthetic set has a test split in kolo-train but none in the DDP
  // peer, and its accuracy says nothing about a real task.
  if (f.dataset == "synthetic") {
    return InvalidArgument(
        "--epochs needs a real --dataset (fashion-mnist, mnist or cifar10)");
  }
  if (std::find(peers.begin(), peers.end(), kLibtorch) != peers.end()) {
    return InvalidArgument(
        "--peer libtorch measures throughput only (kolo-train --no-kolo has "
        "no --epochs); leave it out of --epochs runs");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<int32_t>> ParseNpList(const std::string& text) {
  std::vector<int32_t> out;
  for (const std::string& item : SplitList(text)) {
    KOLO_ASSIGN_OR_RETURN(int64_t np, ParseInt(item, 1, 1024, "--np"));
    out.push_back(static_cast<int32_t>(np));
  }
  if (out.empty()) return InvalidArgument("--np needs at least one count");
  return out;
}

StatusOr<TrainTools> FindTrainTools(const std::string& kolorun,
                                    const std::string& kolo_train,
                                    const std::string& ddp_script,
                                    const std::string& python) {
  TrainTools tools;
  tools.kolorun = kolorun.empty() ? FindTool("kolorun") : kolorun;
  tools.kolo_train = kolo_train.empty() ? FindTool("kolo-train") : kolo_train;
  tools.ddp_script =
      ddp_script.empty() ? FindPeerScript("torch_ddp.py") : ddp_script;
  tools.python = FindPython(python);
  for (const std::string& tool : {tools.kolorun, tools.kolo_train}) {
    if (access(tool.c_str(), X_OK) != 0) {
      return NotFound(tool +
                      " is not an executable (see --kolorun, --kolo-train)");
    }
  }
  return tools;
}

std::string JobTorchVersion(const json& job, const std::string& fallback) {
  const json& config = job.value("config", json::object());
  const auto it = config.find("torch_version");
  if (it != config.end() && it->is_string() && !it->get<std::string>().empty())
    return it->get<std::string>();
  return fallback;
}

StatusOr<std::vector<std::string>> ParseTrainPeers(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& item : SplitList(text)) {
    if (item != kLibtorch && item != kTorchDdp && item != kKoloMetrics) {
      return InvalidArgument(
          "--peer must be torch-ddp, libtorch or kolo-metrics, got '" + item +
          "'");
    }
    out.push_back(item);
  }
  return out;
}

std::vector<std::string> TrainCommand(const TrainFlags& f,
                                      const std::string& framework, int32_t np,
                                      int64_t batch, const TrainTools& tools,
                                      const std::string& json_path) {
  std::vector<std::string> common = {"--model",      f.model,
                                     "--dataset",    f.dataset,
                                     "--batch-size", std::to_string(batch),
                                     "--threads",    std::to_string(f.threads),
                                     "--json",       json_path};
  if (!f.data_dir.empty()) {
    common.insert(common.end(), {"--data-dir", f.data_dir});
  }
  if (f.train_subset > 0) {
    common.insert(common.end(),
                  {"--train-subset", std::to_string(f.train_subset)});
  }
  // Both programs take the same recipe flags; the peer has no --config.
  std::vector<std::string> recipe;
  if (!f.optimizer.empty())
    recipe.insert(recipe.end(), {"--optimizer", f.optimizer});
  if (f.lr > 0) recipe.insert(recipe.end(), {"--lr", fmt::format("{}", f.lr)});
  // Both programs take the same accuracy-mode flags.
  std::vector<std::string> mode;
  if (f.epochs > 0) {
    mode = {"--epochs", std::to_string(f.epochs)};
    if (f.test_subset > 0) {
      mode.insert(mode.end(), {"--test-subset", std::to_string(f.test_subset)});
    }
  }
  if (framework == kTorchDdp) {
    std::vector<std::string> c = {tools.python, tools.ddp_script, "--np",
                                  std::to_string(np)};
    if (f.epochs == 0) {
      c.insert(c.end(), {"--warmup", std::to_string(f.warmup), "--iters",
                         std::to_string(f.iters)});
    }
    c.insert(c.end(), mode.begin(), mode.end());
    if (f.dataset == "synthetic") {
      // kolo-train's synthetic images have 3 channels; the script's
      // default is 1.
      c.insert(c.end(), {"--channels", "3", "--image-size",
                         std::to_string(f.image_size)});
    }
    c.insert(c.end(), common.begin(), common.end());
    c.insert(c.end(), recipe.begin(), recipe.end());
    if (!f.precision.empty()) c.insert(c.end(), {"--precision", f.precision});
    c.insert(c.end(), f.ddp_args.begin(), f.ddp_args.end());
    return c;
  }
  std::vector<std::string> c;
  if (framework == kKolo || framework == kKoloMetrics) {
    c = {tools.kolorun, "-np", std::to_string(np)};
    if (framework == kKoloMetrics) c.insert(c.end(), {"--metrics-port", "0"});
    c.insert(c.end(), f.kolorun_args.begin(), f.kolorun_args.end());
    c.insert(c.end(), {"--", tools.kolo_train});
  } else {
    c = {tools.kolo_train, "--no-kolo"};
  }
  if (f.epochs == 0) {
    c.insert(c.end(), {"--benchmark-warmup", std::to_string(f.warmup),
                       "--benchmark-steps", std::to_string(f.iters)});
  }
  c.insert(c.end(), mode.begin(), mode.end());
  if (f.dataset == "synthetic" && f.image_size != 32) {
    c.insert(c.end(), {"--image-size", std::to_string(f.image_size)});
  }
  c.insert(c.end(), common.begin(), common.end());
  // A ds_config carries kolo-train's optimizer and learning rate: flags
  // would override the file's (its weight decay, say) with their defaults.
  if (f.config_path.empty()) c.insert(c.end(), recipe.begin(), recipe.end());
  if (!f.precision.empty()) c.insert(c.end(), {"--precision", f.precision});
  if (!f.config_path.empty()) c.insert(c.end(), {"--config", f.config_path});
  c.insert(c.end(), f.kolo_train_args.begin(), f.kolo_train_args.end());
  return c;
}

StatusOr<int64_t> PerWorkerBatch(int64_t batch, int32_t np,
                                 const std::string& scaling) {
  if (scaling == "weak") return batch;
  if (batch % np != 0) {
    return InvalidArgument(fmt::format(
        "--scaling strong divides --batch-size {} among {} workers, which "
        "does not divide evenly",
        batch, np));
  }
  return batch / np;
}

void AddToolFlags(CLI::App* cmd, std::string* kolorun, std::string* kolo_train,
                  std::string* ddp_script, std::string* python) {
  cmd->add_option("--kolorun", *kolorun, "kolorun to start kolo's jobs with");
  cmd->add_option("--kolo-train", *kolo_train, "kolo-train to run");
  if (ddp_script != nullptr) {
    cmd->add_option("--ddp-script", *ddp_script, "torch_ddp.py to run");
  }
  if (python != nullptr) AddPythonFlag(cmd, python);
}

CLI::App* AddTrainCommand(CLI::App& app, TrainFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "training throughput of kolo against PyTorch DDP and plain LibTorch, "
      "measured alternately in one run");
  cmd->add_option("--model", f->model, "model zoo network")
      ->capture_default_str();
  cmd->add_option("--dataset", f->dataset,
                  "synthetic, fashion-mnist, mnist or cifar10")
      ->check(CLI::IsMember({"synthetic", "fashion-mnist", "mnist", "cifar10"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", f->data_dir, "where the dataset's files are");
  cmd->add_option("--batch-size", f->batch_size,
                  "per worker (weak scaling) or global (strong)")
      ->capture_default_str();
  cmd->add_option("--np", f->np, "worker counts, comma-separated")
      ->capture_default_str();
  cmd->add_option("--scaling", f->scaling, "weak or strong")
      ->check(CLI::IsMember({"weak", "strong"}))
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "LibTorch threads per worker")
      ->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "untimed steps per measurement")
      ->capture_default_str();
  cmd->add_option("--iters", f->iters, "timed steps per measurement")
      ->capture_default_str();
  cmd->add_option("--repeat", f->repeat, "measurements per configuration")
      ->capture_default_str();
  cmd->add_option("--epochs", f->epochs,
                  "accuracy mode: train each configuration for this many "
                  "epochs (a real --dataset) and report wall time, images/s "
                  "and test accuracy instead of timing --iters steps");
  cmd->add_option("--train-subset", f->train_subset,
                  "train on the first N training images (0: all)");
  cmd->add_option("--test-subset", f->test_subset,
                  "--epochs: evaluate on the first N test images (0: all)");
  cmd->add_option("--image-size", f->image_size,
                  "--dataset synthetic: the images' height and width")
      ->capture_default_str();
  cmd->add_option("--peer", f->peers,
                  "peers measured in the same run: torch-ddp, libtorch, "
                  "kolo-metrics (kolo scraped once a second) "
                  "(comma-separated)");
  cmd->add_option("--optimizer", f->optimizer,
                  "sgd, adam or adamw, for kolo-train and the DDP peer "
                  "(default: their SGD with Nesterov momentum)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--lr", f->lr,
                  "learning rate of one worker (default: the programs')");
  cmd->add_option("--precision", f->precision,
                  "fp32, bf16 or fp16 (the DDP peer: fp16 with a torch 2.x)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--config", f->config_path,
                  "a DeepSpeed-style ds_config JSON file for kolo-train "
                  "--config (the DDP peer cannot read one)");
  cmd->add_option("--json", f->json_path, "write every figure to this file");
  AddToolFlags(cmd, &f->kolorun, &f->kolo_train, &f->ddp_script, &f->python);
  return cmd;
}

int RunTrainCommand(const TrainFlags& f) {
  StatusOr<json> record = RunTrain(f);
  if (!record.ok()) {
    fmt::print(stderr, "kolo-bench train: {}\n", record.status().message());
    return 1;
  }
  return 0;
}

StatusOr<json> RunTrain(const TrainFlags& f) {
  StatusOr<std::vector<int32_t>> nps = ParseNpList(f.np);
  if (!nps.ok()) return nps.status();
  StatusOr<std::vector<std::string>> peers = ParseTrainPeers(f.peers);
  if (!peers.ok()) return peers.status();
  KOLO_RETURN_IF_ERROR(Validate(f, *peers));
  const bool accuracy = f.epochs > 0;
  StatusOr<TrainTools> found =
      FindTrainTools(f.kolorun, f.kolo_train, f.ddp_script, f.python);
  if (!found.ok()) return found.status();
  const TrainTools& tools = *found;
  const bool want_ddp =
      std::find(peers->begin(), peers->end(), kTorchDdp) != peers->end();
  const bool want_libtorch =
      std::find(peers->begin(), peers->end(), kLibtorch) != peers->end();
  const bool want_metrics =
      std::find(peers->begin(), peers->end(), kKoloMetrics) != peers->end();
  std::optional<PeerPython> peer;
  std::string ddp_missing;
  if (want_ddp) {
    peer = ProbePeerPython(tools.python);
    ddp_missing = peer->Missing();
    if (ddp_missing.empty() && !fs::exists(tools.ddp_script)) {
      ddp_missing = "script not found: " + tools.ddp_script;
    }
    KOLO_RETURN_IF_ERROR(
        CheckPeerPrecision(f.precision, *peer, "the torch-ddp peer"));
  }

  // What a run's rows are called: kolo's by --kolo-name when given.
  auto name = [&](const Run& run) {
    return run.framework == kKolo && !f.kolo_name.empty() ? f.kolo_name
                                                          : run.framework;
  };
  auto label = [&](const Run& run) {
    return fmt::format("{} np {}", name(run), run.np);
  };
  std::vector<Run> runs;
  for (int32_t np : *nps) {
    StatusOr<int64_t> batch = PerWorkerBatch(f.batch_size, np, f.scaling);
    if (!batch.ok()) return batch.status();
    runs.push_back({kKolo, np, *batch});
    if (want_metrics) runs.push_back({kKoloMetrics, np, *batch});
    if (want_libtorch && np == 1) runs.push_back({kLibtorch, np, *batch});
    if (want_ddp && ddp_missing.empty())
      runs.push_back({kTorchDdp, np, *batch});
  }

  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch, ScratchDir::Create("train"));
  std::map<std::string, std::vector<Measured>> results;  // by RunLabel
  const std::string subsets =
      (f.train_subset > 0 ? fmt::format(", first {} training", f.train_subset)
                          : "") +
      (f.test_subset > 0 ? fmt::format(", first {} test", f.test_subset) : "") +
      (f.train_subset > 0 || f.test_subset > 0 ? " images" : "");
  fmt::print(
      "# kolo-bench train: {} on {}, {} scaling, batch {}, {} thread{} per "
      "worker, {}{}, {} repeat{}\n",
      f.model,
      f.dataset == "synthetic"
          ? fmt::format("synthetic 3x{}x{}", f.image_size, f.image_size)
          : f.dataset,
      f.scaling, f.batch_size, f.threads, f.threads == 1 ? "" : "s",
      accuracy ? fmt::format("{} epoch{}", f.epochs, f.epochs == 1 ? "" : "s")
               : fmt::format("{} warm-up + {} timed steps", f.warmup, f.iters),
      subsets, f.repeat, f.repeat == 1 ? "" : "s");
  std::fflush(stdout);
  // On a terminal, which run is on and how long the rest will take.
  RunsProgress progress(static_cast<int64_t>(runs.size()) * f.repeat);
  for (int32_t r = 0; r < f.repeat; ++r) {
    for (const Run& run : runs) {
      progress.Start(fmt::format("{} repeat {}", label(run), r + 1));
      const fs::path json_path = scratch / "result.json";
      std::optional<MetricsScraper> scraper;
      if (run.framework == kKoloMetrics) {
        scraper.emplace((scratch / "log.txt").string(),
                        std::chrono::seconds(1));
      }
      StatusOr<Measured> result = Measure(
          TrainCommand(f, run.framework, run.np, run.batch, tools, json_path),
          json_path, scratch / "log.txt");
      std::optional<ScrapeCount> scraped;
      if (scraper) scraped = scraper->Stop();
      if (!result.ok()) return result.status().WithContext(label(run));
      const TrainResult& figures = result->result;
      std::string line =
          fmt::format("#   repeat {}: {:<16} {:>8.0f} images/s", r + 1,
                      label(run), figures.images_per_second);
      if (accuracy) {
        line += fmt::format(", test accuracy {:.2f}%, {:.1f} s wall",
                            100.0 * figures.test_accuracy.value_or(0),
                            figures.wall_seconds.value_or(0));
      }
      if (scraped) {
        line += fmt::format(
            ", {} scrapes of {:.0f} KB, slowest {:.1f} ms", scraped->scrapes,
            scraped->scrapes > 0 ? scraped->bytes / 1024.0 / scraped->scrapes
                                 : 0.0,
            1000.0 * scraped->slowest_seconds);
        result->job["result"]["metrics_scrapes"] = scraped->scrapes;
        result->job["result"]["metrics_scrape_bytes"] = scraped->bytes;
      }
      progress.Print(line);
      results[RunLabel(run)].push_back(*std::move(result));
    }
  }
  progress.Finish();

  // One figure of every repeat of `run`, scaled.
  auto figures = [&](const Run& run, std::optional<double> TrainResult::*name,
                     double scale = 1.0) {
    std::vector<double> v;
    for (const Measured& m : results[RunLabel(run)]) {
      v.push_back(scale * (m.result.*name).value_or(0));
    }
    return v;
  };
  auto rates = [&](const Run& run) {
    std::vector<double> v;
    for (const Measured& m : results[RunLabel(run)]) {
      v.push_back(m.result.images_per_second);
    }
    return v;
  };
  auto mean_of = [&](const std::string& framework,
                     int32_t np) -> std::optional<double> {
    for (const Run& run : runs) {
      if (run.framework == framework && run.np == np)
        return Summarize(rates(run)).mean;
    }
    return std::nullopt;
  };

  auto column = [](const char* title, const char* unit, int width,
                   bool left = false) {
    Table::Column c;
    c.title = title;
    c.unit = unit;
    c.width = width;
    c.left_align = left;
    return c;
  };
  // Accuracy runs have no timed window to give a step time or kolo's
  // engine time per step; they have a wall time and an accuracy instead.
  std::vector<Table::Column> columns = {
      column("np", "", 3),
      column("framework", "",
             std::max(10, static_cast<int>(f.kolo_name.size())), true),
      column("batch", "/worker", 7)};
  if (accuracy) {
    columns.insert(columns.end(),
                   {column("epochs", "", 6), column("wall", "(s)", 8)});
  }
  columns.insert(columns.end(), {column("images/s", "mean ± 95%", 16),
                                 column("per worker", "images/s", 10)});
  if (accuracy) {
    columns.push_back(column("test acc", "(%)", 8));
  } else {
    columns.insert(columns.end(),
                   {column("step", "(ms)", 7), column("comm", "(ms/step)", 9)});
  }
  columns.insert(
      columns.end(),
      {column("peak RSS", "(MiB)", 8), column("speedup", "vs np 1", 8),
       column("efficiency", "(%)", 10), column("vs plain", "np 1", 8),
       column("kolo ÷", "this", 7)});
  Table table(columns);
  for (const std::string& line : table.HeaderLines()) fmt::print("{}\n", line);
  json rows = json::array();
  for (const Run& run : runs) {
    const MeanInterval m = Summarize(rates(run));
    std::vector<double> comm_ms;  // kolo's runtime statistics only
    double peak_rss_mib = 0;      // the largest worker's, over the repeats
    std::vector<json> jobs;       // as each wrote its JSON, for the record
    for (const Measured& measured : results[RunLabel(run)]) {
      const TrainResult& result = measured.result;
      if (result.communication_seconds) {
        comm_ms.push_back(1000.0 * *result.communication_seconds /
                          static_cast<double>(f.iters));
      }
      peak_rss_mib = std::max(
          peak_rss_mib,
          Largest(result.peak_rss_bytes.value_or(std::vector<int64_t>{})) /
              (1 << 20));
      jobs.push_back(measured.job);
    }
    const std::optional<double> base = mean_of(run.framework, 1);
    // Plain LibTorch's one process: a slow np 1 of the framework itself
    // cannot flatter its scaling against this.
    const std::optional<double> plain = mean_of(kLibtorch, 1);
    const std::optional<double> kolo = mean_of(kKolo, run.np);
    std::string speedup, efficiency, versus_plain, ratio;
    // kolo-train's jobs come from kolo-bench's build; the peer says which
    // torch it imported.
    const std::string torch_version =
        run.framework == kTorchDdp
            ? JobTorchVersion(jobs.front(), peer ? peer->torch_version : "")
            : KoloTorchVersion();
    json row = {{"framework", name(run)},
                {"np", run.np},
                {"torch_version", torch_version},
                {"batch_per_worker", run.batch},
                {"images_per_second", rates(run)},
                {"images_per_second_mean", m.mean},
                {"images_per_second_ci95", m.half_width},
                {"peak_rss_mib", peak_rss_mib},
                {"runs", jobs}};
    std::vector<std::string> cells = {std::to_string(run.np), name(run),
                                      std::to_string(run.batch)};
    double step_ms = 0, wall_seconds = 0, test_accuracy = 0;
    if (accuracy) {
      wall_seconds = Summarize(figures(run, &TrainResult::wall_seconds)).mean;
      // Percent, as tables and reports give it; the jobs report fractions.
      test_accuracy =
          Summarize(figures(run, &TrainResult::test_accuracy, 100.0)).mean;
      row["epochs"] = f.epochs;
      row["wall_seconds"] = wall_seconds;
      row["test_accuracy"] = test_accuracy;
      cells.insert(cells.end(),
                   {std::to_string(f.epochs), FormatFixed(wall_seconds, 1)});
    } else {
      step_ms = Summarize(figures(run, &TrainResult::step_ms)).mean;
      row["step_ms_mean"] = step_ms;
    }
    cells.insert(cells.end(), {FormatRate(m), FormatFixed(m.mean / run.np, 0)});
    if (base && *base > 0) {
      const double s = m.mean / *base;
      speedup = FormatFixed(s, 2);
      efficiency = FormatFixed(100.0 * s / run.np, 0);
      row["speedup"] = s;
      row["efficiency"] = s / run.np;
    }
    if (plain && *plain > 0) {
      versus_plain = FormatFixed(m.mean / *plain, 2);
      row["speedup_vs_libtorch_np1"] = m.mean / *plain;
    }
    if (run.framework != kKolo && kolo && m.mean > 0) {
      ratio = FormatFixed(*kolo / m.mean, 2);
      row["kolo_ratio"] = *kolo / m.mean;
    }
    if (accuracy) {
      cells.push_back(FormatFixed(test_accuracy, 2));
    } else {
      std::string comm = "-";
      if (!comm_ms.empty() && run.framework == kKolo && run.np > 1) {
        comm = FormatFixed(Summarize(comm_ms).mean, 2);
        row["communication_ms_per_step"] = Summarize(comm_ms).mean;
      }
      cells.insert(cells.end(), {FormatFixed(step_ms, 1), comm});
    }
    cells.insert(cells.end(), {FormatFixed(peak_rss_mib, 0), speedup,
                               efficiency, versus_plain, ratio});
    rows.push_back(row);
    fmt::print("{}\n", table.Row(cells));
  }
  if (!ddp_missing.empty()) {
    std::vector<std::string> cells = {"-", kTorchDdp, ""};
    if (accuracy) cells.insert(cells.end(), {"", ""});
    cells.push_back(ddp_missing);
    fmt::print("{}\n", table.Row(cells));
    rows.push_back({{"framework", kTorchDdp}, {"missing", ddp_missing}});
  }
  fmt::print("{}\n", TorchVersionsLine(peer ? &*peer : nullptr));
  std::fflush(stdout);
  json out = {{"tool", "kolo-bench train"},
              {"config",
               {{"mode", accuracy ? "epochs" : "throughput"},
                {"model", f.model},
                {"dataset", f.dataset},
                {"batch_size", f.batch_size},
                {"scaling", f.scaling},
                {"np", *nps},
                {"threads", f.threads},
                {"warmup", f.warmup},
                {"iters", f.iters},
                {"repeat", f.repeat},
                {"epochs", f.epochs},
                {"train_subset", f.train_subset},
                {"test_subset", f.test_subset},
                {"image_size", f.image_size},
                {"peers", *peers}}},
              {"environment", RunEnvironment(peer ? &*peer : nullptr)},
              {"rows", rows}};
  if (!f.study.empty()) out["study"] = f.study;
  // The recipe, where one was asked for: the report keeps such runs apart
  // from runs on the programs' defaults.
  json& config = out["config"];
  if (!f.optimizer.empty()) config["optimizer"] = f.optimizer;
  if (f.lr > 0) config["lr"] = f.lr;
  if (!f.precision.empty()) config["precision"] = f.precision;
  if (!f.config_path.empty()) {
    config["ds_config"] = f.config_path;
    // The file's contents, so the record says what was run after the file
    // is gone.
    std::ifstream file(f.config_path);
    json contents = json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (!contents.is_discarded()) config["ds_config_contents"] = contents;
  }
  if (!f.kolo_train_args.empty()) config["kolo_train_args"] = f.kolo_train_args;
  if (!f.ddp_args.empty()) config["ddp_args"] = f.ddp_args;
  if (!f.kolorun_args.empty()) config["kolorun_args"] = f.kolorun_args;
  if (!f.kolo_name.empty()) config["kolo_name"] = f.kolo_name;
  if (f.json_path.empty()) return out;
  // Appended: one file collects the runs a report is drawn from.
  Status written = AppendJsonRecord(f.json_path, out);
  if (!written.ok()) return written;
  return out;
}

}  // namespace kolo::bench
