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

// What a run's rows are called: kolo's by --kolo-name when given.
std::string RowName(const TrainFlags& f, const Run& run) {
  return run.framework == kKolo && !f.kolo_name.empty() ? f.kolo_name
                                                        : run.framework;
}

std::string RowLabel(const TrainFlags& f, const Run& run) {
  return fmt::format("{} np {}", RowName(f, run), run.np);
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
  KOLO_RETURN_IF_ERROR(ValidateTimedJob(f, f.dataset));
  if (f.epochs < 0 || f.train_subset < 0 || f.test_subset < 0) {
    return InvalidArgument(
        "--epochs, --train-subset and --test-subset must not be negative");
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

Status ValidateTimedJob(const TimedJobFlags& f, const std::string& dataset) {
  if (f.iters < 1 || f.warmup < 0 || f.repeat < 1 || f.threads < 1 ||
      f.batch_size < 1) {
    return InvalidArgument(
        "--iters, --repeat, --threads and --batch-size must be at least 1, "
        "--warmup at least 0");
  }
  if (f.image_size < 1) {
    return InvalidArgument(
        fmt::format("--image-size must be at least 1, got {}", f.image_size));
  }
  if (f.image_size != 32 && dataset != "synthetic") {
    return InvalidArgument("--image-size applies to --dataset synthetic only");
  }
  return Status::Ok();
}

json TimedJobConfig(const TimedJobFlags& f) {
  return {{"batch_size", f.batch_size}, {"image_size", f.image_size},
          {"threads", f.threads},       {"warmup", f.warmup},
          {"iters", f.iters},           {"repeat", f.repeat}};
}

void AddToolFlags(CLI::App* cmd, std::string* kolorun, std::string* kolo_train,
                  std::string* ddp_script, std::string* python) {
  AddKolorunFlag(cmd, kolorun);
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
  AddDatasetFlags(cmd, &f->dataset, &f->data_dir);
  cmd->add_option("--batch-size", f->batch_size,
                  "per worker (weak scaling) or global (strong)")
      ->capture_default_str();
  AddNpFlag(cmd, &f->np);
  cmd->add_option("--scaling", f->scaling, "weak or strong")
      ->check(CLI::IsMember({"weak", "strong"}))
      ->capture_default_str();
  AddJobFlags(cmd, &f->threads, "worker", &f->warmup, &f->iters, &f->repeat,
              "measurements per configuration");
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

namespace {

// What RunTrain measures, decided before the first job: one repeat's runs
// in order, and why the torch-ddp peer cannot run here, if it cannot.
struct TrainPlan {
  std::vector<int32_t> nps;
  std::vector<std::string> peers;
  TrainTools tools;
  TorchPeer peer;
  std::vector<Run> runs;
};

bool Contains(const std::vector<std::string>& list, const char* item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

StatusOr<TrainPlan> PlanTrain(const TrainFlags& f) {
  TrainPlan plan;
  KOLO_ASSIGN_OR_RETURN(plan.nps, ParseNpList(f.np));
  KOLO_ASSIGN_OR_RETURN(plan.peers, ParseTrainPeers(f.peers));
  KOLO_RETURN_IF_ERROR(Validate(f, plan.peers));
  KOLO_ASSIGN_OR_RETURN(plan.tools, FindTrainTools(f.kolorun, f.kolo_train,
                                                   f.ddp_script, f.python));
  const bool want_ddp = Contains(plan.peers, kTorchDdp);
  if (want_ddp) {
    const PeerPython& python =
        plan.peer.Probe(plan.tools.python, plan.tools.ddp_script);
    KOLO_RETURN_IF_ERROR(
        CheckPeerPrecision(f.precision, python, "the torch-ddp peer"));
  }
  for (int32_t np : plan.nps) {
    KOLO_ASSIGN_OR_RETURN(int64_t batch,
                          PerWorkerBatch(f.batch_size, np, f.scaling));
    plan.runs.push_back({kKolo, np, batch});
    if (Contains(plan.peers, kKoloMetrics)) {
      plan.runs.push_back({kKoloMetrics, np, batch});
    }
    if (Contains(plan.peers, kLibtorch) && np == 1) {
      plan.runs.push_back({kLibtorch, np, batch});
    }
    if (plan.peer.runs()) {
      plan.runs.push_back({kTorchDdp, np, batch});
    }
  }
  return plan;
}

void PrintTrainHeader(const TrainFlags& f) {
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
      f.epochs > 0
          ? fmt::format("{} epoch{}", f.epochs, f.epochs == 1 ? "" : "s")
          : fmt::format("{} warm-up + {} timed steps", f.warmup, f.iters),
      subsets, f.repeat, f.repeat == 1 ? "" : "s");
  std::fflush(stdout);
}

// One job of `run` in `scratch` (kolo-metrics: scraped once a second while
// it runs); `line` gets the line that reports it.
StatusOr<Measured> MeasureRun(const TrainFlags& f, const TrainTools& tools,
                              const Run& run, const ScratchDir& scratch,
                              int32_t repeat, std::string* line) {
  const fs::path json_path = scratch / "result.json";
  std::optional<MetricsScraper> scraper;
  if (run.framework == kKoloMetrics) {
    scraper.emplace((scratch / "log.txt").string(), std::chrono::seconds(1));
  }
  StatusOr<Measured> result = Measure(
      TrainCommand(f, run.framework, run.np, run.batch, tools, json_path),
      json_path, scratch / "log.txt");
  std::optional<ScrapeCount> scraped;
  if (scraper) scraped = scraper->Stop();
  if (!result.ok()) return result.status();
  const TrainResult& figures = result->result;
  *line = fmt::format("#   repeat {}: {:<16} {:>8.0f} images/s", repeat + 1,
                      RowLabel(f, run), figures.images_per_second);
  if (f.epochs > 0) {
    *line += fmt::format(", test accuracy {:.2f}%, {:.1f} s wall",
                         100.0 * figures.test_accuracy.value_or(0),
                         figures.wall_seconds.value_or(0));
  }
  if (scraped) {
    *line += fmt::format(
        ", {} scrapes of {:.0f} KB, slowest {:.1f} ms", scraped->scrapes,
        scraped->scrapes > 0 ? scraped->bytes / 1024.0 / scraped->scrapes : 0.0,
        1000.0 * scraped->slowest_seconds);
    result->job["result"]["metrics_scrapes"] = scraped->scrapes;
    result->job["result"]["metrics_scrape_bytes"] = scraped->bytes;
  }
  return result;
}

// Accuracy runs have no timed window to give a step time or kolo's engine
// time per step; they have a wall time and an accuracy instead.
Table TrainTable(const TrainFlags& f) {
  const bool accuracy = f.epochs > 0;
  std::vector<Table::Column> columns = {
      TableColumn("np", "", 3),
      TableColumn("framework", "",
                  std::max(10, static_cast<int>(f.kolo_name.size())), "", true),
      TableColumn("batch", "/worker", 7)};
  if (accuracy) {
    columns.insert(columns.end(), {TableColumn("epochs", "", 6),
                                   TableColumn("wall", "(s)", 8)});
  }
  columns.insert(columns.end(), {TableColumn("images/s", "mean ± 95%", 16),
                                 TableColumn("per worker", "images/s", 10)});
  if (accuracy) {
    columns.push_back(TableColumn("test acc", "(%)", 8));
  } else {
    columns.insert(columns.end(), {TableColumn("step", "(ms)", 7),
                                   TableColumn("comm", "(ms/step)", 9)});
  }
  columns.insert(columns.end(), {TableColumn("peak RSS", "(MiB)", 8),
                                 TableColumn("speedup", "vs np 1", 8),
                                 TableColumn("efficiency", "(%)", 10),
                                 TableColumn("vs plain", "np 1", 8),
                                 TableColumn("kolo ÷", "this", 7)});
  return Table(columns);
}

// Every repeat's measurements, by the index of the run in TrainPlan::runs.
using TrainResults = std::vector<std::vector<Measured>>;

// One figure of every repeat of run `i`, scaled.
std::vector<double> Figures(const TrainResults& results, size_t i,
                            std::optional<double> TrainResult::*name,
                            double scale = 1.0) {
  std::vector<double> v;
  for (const Measured& m : results[i]) {
    v.push_back(scale * (m.result.*name).value_or(0));
  }
  return v;
}

std::vector<double> Rates(const TrainResults& results, size_t i) {
  std::vector<double> v;
  for (const Measured& m : results[i]) v.push_back(m.result.images_per_second);
  return v;
}

// The mean images/s of `framework` at `np`, where the plan ran it.
std::optional<double> MeanRate(const TrainPlan& plan,
                               const TrainResults& results,
                               const std::string& framework, int32_t np) {
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    if (plan.runs[i].framework == framework && plan.runs[i].np == np) {
      return Summarize(Rates(results, i)).mean;
    }
  }
  return std::nullopt;
}

// The speedup and efficiency against the framework's own np 1, against
// plain LibTorch's np 1, and kolo's ratio to this row at the same np: into
// the row's record and its last four cells (empty where not measured).
void AddRatios(const TrainPlan& plan, const TrainResults& results,
               const Run& run, double mean, json* row,
               std::vector<std::string>* cells) {
  const std::optional<double> base = MeanRate(plan, results, run.framework, 1);
  // Plain LibTorch's one process: a slow np 1 of the framework itself
  // cannot flatter its scaling against this.
  const std::optional<double> plain = MeanRate(plan, results, kLibtorch, 1);
  const std::optional<double> kolo = MeanRate(plan, results, kKolo, run.np);
  std::string speedup, efficiency, versus_plain, ratio;
  if (base && *base > 0) {
    const double s = mean / *base;
    speedup = FormatFixed(s, 2);
    efficiency = FormatFixed(100.0 * s / run.np, 0);
    (*row)["speedup"] = s;
    (*row)["efficiency"] = s / run.np;
  }
  if (plain && *plain > 0) {
    versus_plain = FormatFixed(mean / *plain, 2);
    (*row)["speedup_vs_libtorch_np1"] = mean / *plain;
  }
  if (run.framework != kKolo && kolo && mean > 0) {
    ratio = FormatFixed(*kolo / mean, 2);
    (*row)["kolo_ratio"] = *kolo / mean;
  }
  cells->insert(cells->end(), {speedup, efficiency, versus_plain, ratio});
}

// Run `i`'s row: its table cells in `cells`, its record returned.
json TrainRow(const TrainFlags& f, const TrainPlan& plan,
              const TrainResults& results, size_t i,
              std::vector<std::string>* cells) {
  const Run& run = plan.runs[i];
  const bool accuracy = f.epochs > 0;
  const MeanInterval m = Summarize(Rates(results, i));
  std::vector<double> comm_ms;  // kolo's runtime statistics only
  double peak_rss_mib = 0;      // the largest worker's, over the repeats
  std::vector<json> jobs;       // as each wrote its JSON, for the record
  for (const Measured& measured : results[i]) {
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
  // kolo-train's jobs come from kolo-bench's build; the peer says which
  // torch it imported.
  const std::string torch_version =
      run.framework == kTorchDdp
          ? JobTorchVersion(jobs.front(), plan.peer.torch_version())
          : KoloTorchVersion();
  json row = {{"framework", RowName(f, run)},
              {"np", run.np},
              {"torch_version", torch_version},
              {"batch_per_worker", run.batch},
              {"images_per_second", Rates(results, i)},
              {"images_per_second_mean", m.mean},
              {"images_per_second_ci95", m.half_width},
              {"peak_rss_mib", peak_rss_mib},
              {"runs", jobs}};
  *cells = {std::to_string(run.np), RowName(f, run), std::to_string(run.batch)};
  double step_ms = 0, test_accuracy = 0;
  if (accuracy) {
    const double wall_seconds =
        Summarize(Figures(results, i, &TrainResult::wall_seconds)).mean;
    // Percent, as tables and reports give it; the jobs report fractions.
    test_accuracy =
        Summarize(Figures(results, i, &TrainResult::test_accuracy, 100.0)).mean;
    row["epochs"] = f.epochs;
    row["wall_seconds"] = wall_seconds;
    row["test_accuracy"] = test_accuracy;
    cells->insert(cells->end(),
                  {std::to_string(f.epochs), FormatFixed(wall_seconds, 1)});
  } else {
    step_ms = Summarize(Figures(results, i, &TrainResult::step_ms)).mean;
    row["step_ms_mean"] = step_ms;
  }
  cells->insert(cells->end(), {FormatRate(m), FormatFixed(m.mean / run.np, 0)});
  if (accuracy) {
    cells->push_back(FormatFixed(test_accuracy, 2));
  } else {
    std::string comm = "-";
    if (!comm_ms.empty() && run.framework == kKolo && run.np > 1) {
      comm = FormatFixed(Summarize(comm_ms).mean, 2);
      row["communication_ms_per_step"] = Summarize(comm_ms).mean;
    }
    cells->insert(cells->end(), {FormatFixed(step_ms, 1), comm});
  }
  cells->push_back(FormatFixed(peak_rss_mib, 0));
  AddRatios(plan, results, run, m.mean, &row, cells);
  return row;
}

// The record: the configuration, the environment and every row.
json TrainRecord(const TrainFlags& f, const TrainPlan& plan, json rows) {
  json out = {{"tool", "kolo-bench train"},
              {"config",
               {{"mode", f.epochs > 0 ? "epochs" : "throughput"},
                {"model", f.model},
                {"dataset", f.dataset},
                {"scaling", f.scaling},
                {"np", plan.nps},
                {"epochs", f.epochs},
                {"train_subset", f.train_subset},
                {"test_subset", f.test_subset},
                {"peers", plan.peers}}},
              {"environment", RunEnvironment(plan.peer.python())},
              {"rows", std::move(rows)}};
  if (!f.study.empty()) out["study"] = f.study;
  // The recipe, where one was asked for: the report keeps such runs apart
  // from runs on the programs' defaults.
  json& config = out["config"];
  config.update(TimedJobConfig(f));
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
  return out;
}

}  // namespace

StatusOr<json> RunTrain(const TrainFlags& f) {
  KOLO_ASSIGN_OR_RETURN(const TrainPlan plan, PlanTrain(f));
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch, ScratchDir::Create("train"));
  PrintTrainHeader(f);
  TrainResults results(plan.runs.size());
  std::vector<std::string> labels;
  for (const Run& run : plan.runs) labels.push_back(RowLabel(f, run));
  KOLO_RETURN_IF_ERROR(RunRepeats(
      labels, f.repeat, [&](size_t i, int32_t repeat) -> StatusOr<std::string> {
        std::string line;
        KOLO_ASSIGN_OR_RETURN(
            Measured m,
            MeasureRun(f, plan.tools, plan.runs[i], scratch, repeat, &line));
        results[i].push_back(std::move(m));
        return line;
      }));

  const Table table = TrainTable(f);
  PrintHeader(table);
  json rows = json::array();
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    std::vector<std::string> cells;
    rows.push_back(TrainRow(f, plan, results, i, &cells));
    fmt::print("{}\n", table.Row(cells));
  }
  if (!plan.peer.missing().empty()) {
    std::vector<std::string> cells = {"-", kTorchDdp, ""};
    if (f.epochs > 0) cells.insert(cells.end(), {"", ""});
    cells.push_back(plan.peer.missing());
    fmt::print("{}\n", table.Row(cells));
    rows.push_back(
        {{"framework", kTorchDdp}, {"missing", plan.peer.missing()}});
  }
  fmt::print("{}\n", TorchVersionsLine(plan.peer.python()));
  std::fflush(stdout);
  return FinishRecord(TrainRecord(f, plan, std::move(rows)), f.json_path);
}

}  // namespace kolo::bench
