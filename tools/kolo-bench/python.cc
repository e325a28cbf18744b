#include "python.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <map>

#include "job_runner.h"
#include "kolo_internal/config.h"
#include "list_flag.h"
#include "peer_python.h"
#include "scratch_dir.h"
#include "sibling_tools.h"
#include "statistics.h"
#include "table.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kFrameworks = {"kolo", "ddp", "horovod", "none"};
// The latency jobs always run two ranks on shm: the figure.
constexpr int kLatencyRanks = 2;

// One configuration of the training script.
struct Case {
  std::string model;
  std::string data;
  int64_t batch_size = 0;
};

StatusOr<Case> CaseOf(const std::string& model, bool quick) {
  if (model == "lenet") return Case{model, "fashion-mnist", quick ? 16 : 128};
  if (model == "resnet18") return Case{model, "synthetic", quick ? 4 : 32};
  return InvalidArgument("--models: unknown model '" + model +
                         "' (expected lenet or resnet18)");
}

// A job of the table and what its repeats measured.
struct Job {
  std::string label;
  Case config;
  int32_t np = 0;
  std::string framework;  // or "latency-python", "latency-c++"
  std::vector<std::string> command;
  std::vector<json> results;
};

struct Programs {
  std::string kolorun;
  std::string kolo_bench;
  std::string python;
  std::string script;
  std::string latency_script;
  std::string horovod_python;
  std::string horovodrun;
  std::string horovod_missing;  // empty when Horovod can run
};

StatusOr<Programs> FindPrograms(const PythonFlags& f) {
  Programs p;
  p.kolorun = f.kolorun.empty() ? FindTool("kolorun") : f.kolorun;
  p.kolo_bench = FindTool("kolo-bench");
  p.python = FindPython(f.python);
  p.script = FindSourceScript("examples/python/synthetic_benchmark.py");
  p.latency_script = FindSourceScript("bench/python/allreduce_latency.py");
  for (const std::string& path : {p.kolorun, p.script, p.latency_script}) {
    if (!fs::exists(path)) return NotFound(path + " does not exist");
  }
  p.horovod_python =
      f.horovod_python.empty()
          ? (fs::path(KOLO_SOURCE_DIR) / ".venv-horovod/bin/python").string()
          : f.horovod_python;
  p.horovodrun =
      (fs::path(p.horovod_python).parent_path() / "horovodrun").string();
  if (!fs::exists(p.horovod_python) || !fs::exists(p.horovodrun)) {
    p.horovod_missing = "not installed (" + p.horovodrun +
                        " is missing; make it with scripts/setup_horovod.sh)";
  }
  return p;
}

std::vector<std::string> TrainCommand(const PythonFlags& f, const Programs& p,
                                      const Case& c, int32_t np,
                                      const std::string& framework) {
  const std::string ranks = std::to_string(np);
  std::vector<std::string> command;
  if (framework == "kolo") {
    command = {p.kolorun, "-np", ranks, p.python};
  } else if (framework == "ddp") {
    command = {
        p.python,           "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", ranks};
  } else if (framework == "horovod") {
    command = {p.horovodrun, "-np", ranks, "--gloo", p.horovod_python};
  } else {
    command = {p.python};
  }
  command.insert(
      command.end(),
      {p.script, "--framework", framework, "--model", c.model, "--data", c.data,
       "--batch-size", std::to_string(c.batch_size), "--num-warmup-batches",
       std::to_string(f.warmup), "--num-batches-per-iter",
       std::to_string(f.batches_per_iter), "--num-iters",
       std::to_string(f.iters), "--threads", std::to_string(f.threads)});
  return command;
}

StatusOr<PythonFlags> Checked(PythonFlags f) {
  if (f.quick) {
    f.warmup = 1;
    f.batches_per_iter = 2;
    f.iters = 2;
    f.repeat = 1;
    f.latency_iters = 50;
  }
  if (f.repeat < 1 || f.batches_per_iter < 1 || f.iters < 1 || f.warmup < 0 ||
      f.threads < 0 || f.latency_iters < 1 || f.latency_bytes < 4) {
    return InvalidArgument(
        "--repeat, --batches-per-iter, --iters and --latency-iters must be at "
        "least 1, --warmup and --threads at least 0 and --latency-bytes at "
        "least 4");
  }
  for (const std::string& name : SplitList(f.frameworks)) {
    if (std::find(kFrameworks.begin(), kFrameworks.end(), name) ==
        kFrameworks.end()) {
      return InvalidArgument("--frameworks: unknown framework '" + name +
                             "' (expected kolo, ddp, horovod or none)");
    }
  }
  return f;
}

StatusOr<std::vector<Job>> PlanJobs(const PythonFlags& f, const Programs& p) {
  std::vector<Job> jobs;
  const std::vector<std::string> frameworks = SplitList(f.frameworks);
  for (const std::string& model : SplitList(f.models)) {
    KOLO_ASSIGN_OR_RETURN(const Case c, CaseOf(model, f.quick));
    for (const std::string& item : SplitList(f.np)) {
      KOLO_ASSIGN_OR_RETURN(const int64_t np, ParseInt(item, 1, 64, "--np"));
      for (const std::string& framework : frameworks) {
        if (framework == "none" && np != 1) continue;  // one process only
        Job job{fmt::format("{} np {} {}", model, np, framework),
                c,
                static_cast<int32_t>(np),
                framework,
                {},
                {}};
        if (framework != "horovod" || p.horovod_missing.empty()) {
          job.command = TrainCommand(f, p, c, job.np, framework);
        }
        jobs.push_back(std::move(job));
      }
    }
  }
  if (jobs.empty()) return InvalidArgument("--models and --np name no job");
  const std::string bytes = std::to_string(f.latency_bytes);
  const std::vector<std::string> launch = {
      p.kolorun, "-np", std::to_string(kLatencyRanks), "--backend", "shm"};
  Job python{"latency python", {}, kLatencyRanks, "latency-python", launch, {}};
  python.command.insert(python.command.end(),
                        {p.python, p.latency_script, "--bytes", bytes,
                         "--iters", std::to_string(f.latency_iters)});
  Job native{"latency c++", {}, kLatencyRanks, "latency-c++", launch, {}};
  native.command.insert(
      native.command.end(),
      {p.kolo_bench, "collectives", "--ops", "allreduce", "-b", bytes, "-e",
       bytes, "-n", std::to_string(f.latency_iters)});
  jobs.push_back(std::move(python));
  jobs.push_back(std::move(native));
  return jobs;
}

// Runs `job` once and keeps its JSON; the line the progress prints.
StatusOr<std::string> RunOnce(Job& job, const ScratchDir& scratch,
                              int32_t repeat) {
  if (job.command.empty()) return job.label + ": not installed";
  const std::string name =
      fmt::format("{}-{}", job.label, repeat);  // spaces are fine in paths
  const std::string json_path = (scratch / (name + ".json")).string();
  std::vector<std::string> command = job.command;
  command.insert(command.end(), {"--json", json_path});
  const bool records = job.framework == "latency-c++";
  KOLO_ASSIGN_OR_RETURN(
      JobOutput out,
      RunJob(command, json_path, (scratch / (name + ".log")).string(),
             records ? JobJson::kRecords : JobJson::kObject));
  json result = records ? out.json.back() : out.json;
  const auto positive = [&](const json& value, const std::string& key) {
    return value.is_number() && value.get<double>() > 0 &&
                   std::isfinite(value.get<double>())
               ? Status::Ok()
               : JobError(out.output, key + " is missing or not positive");
  };
  if (job.framework == "latency-c++") {
    const json& rows = result.value("rows", json::array());
    if (!rows.is_array() || rows.empty() || !rows[0].is_object()) {
      return JobError(out.output, "the collectives record has no row");
    }
    for (const char* form : {"out_of_place", "in_place"}) {
      const json time =
          rows[0].value(form, json::object()).value("time_us", json());
      KOLO_RETURN_IF_ERROR(positive(time, std::string(form) + ".time_us"));
      result[std::string(form) + "_us"] = time;
    }
  } else if (job.framework == "latency-python") {
    for (const char* key : {"out_of_place_us", "in_place_us"}) {
      KOLO_RETURN_IF_ERROR(positive(result.value(key, json()), key));
    }
    if (result.value("wrong", 1) != 0) {
      return JobError(out.output, "an allreduce's result was wrong");
    }
  } else {
    KOLO_RETURN_IF_ERROR(positive(result.value("images_per_second", json()),
                                  "images_per_second"));
  }
  job.results.push_back(result);
  if (job.framework.rfind("latency", 0) == 0) {
    return fmt::format("{}: {:.2f} us out of place, {:.2f} us in place",
                       job.label, result["out_of_place_us"].get<double>(),
                       result["in_place_us"].get<double>());
  }
  return fmt::format("{}: {:.0f} images/s", job.label,
                     result["images_per_second"].get<double>());
}

double Median(const Job& job, const std::string& key) {
  std::vector<double> values;
  for (const json& r : job.results) values.push_back(r[key].get<double>());
  return SpreadOf(values).median;
}

// kolo's median images/s over `job`'s, for the same model and np.
std::optional<double> KoloOver(const std::vector<Job>& jobs, const Job& job) {
  if (job.results.empty() || job.framework == "kolo") return std::nullopt;
  for (const Job& kolo : jobs) {
    if (kolo.framework == "kolo" && kolo.config.model == job.config.model &&
        kolo.np == job.np && !kolo.results.empty()) {
      return Median(kolo, "images_per_second") /
             Median(job, "images_per_second");
    }
  }
  return std::nullopt;
}

// The training table; its rows as JSON.
json PrintThroughput(const std::vector<Job>& jobs, const Programs& p) {
  const Table table({{"model", "", 9, "", true},
                     {"np", "", 3, "", false},
                     {"framework", "", 9, "", true},
                     {"img/s", "(median)", 9, "", false},
                     {"min", "", 9, "", false},
                     {"max", "", 9, "", false},
                     {"kolo x", "", 7, "", false},
                     {"torch", "", 14, "", true}});
  PrintHeader(table);
  json rows = json::array();
  // The none row sits beside kolo at np 1: kolo alone over plain PyTorch.
  for (const Job& job : jobs) {
    if (job.framework.rfind("latency", 0) == 0) continue;
    json row = {{"model", job.config.model},
                {"data", job.config.data},
                {"batch_size", job.config.batch_size},
                {"np", job.np},
                {"framework", job.framework}};
    if (job.results.empty()) {
      row["missing"] = p.horovod_missing;
      fmt::print("{}\n", table.Row({job.config.model, std::to_string(job.np),
                                    job.framework, p.horovod_missing}));
      rows.push_back(row);
      continue;
    }
    std::vector<double> rates;
    for (const json& r : job.results)
      rates.push_back(r["images_per_second"].get<double>());
    const Spread spread = SpreadOf(rates);
    // ResNet-18 on CPUs trains at tens of images/s: a decimal shows.
    const int decimals = spread.median < 100 ? 1 : 0;
    const std::optional<double> ratio = KoloOver(jobs, job);
    const std::string torch = job.results.front().value("torch_version", "");
    row.update(
        {{"images_per_second", rates},
         {"images_per_second_median", spread.median},
         {"threads_per_rank", job.results.front().value("threads_per_rank", 0)},
         {"torch_version", torch}});
    if (ratio) row["kolo_over_this"] = *ratio;
    rows.push_back(row);
    fmt::print("{}\n",
               table.Row({job.config.model, std::to_string(job.np),
                          job.framework, FormatFixed(spread.median, decimals),
                          FormatFixed(spread.min, decimals),
                          FormatFixed(spread.max, decimals),
                          ratio ? FormatFixed(*ratio, 2) : "", torch}));
  }
  return rows;
}

json PrintLatency(const std::vector<Job>& jobs, int64_t bytes) {
  json rows = json::array();
  fmt::print(
      "# allreduce of {} B at np {} on shm, median of the slowest "
      "rank's call (us):\n",
      bytes, kLatencyRanks);
  for (const Job& job : jobs) {
    if (job.framework.rfind("latency", 0) != 0 || job.results.empty()) continue;
    const double out = Median(job, "out_of_place_us");
    const double in = Median(job, "in_place_us");
    fmt::print("#   {:<24} {:>8.2f} out of place {:>8.2f} in place\n",
               job.framework == "latency-python"
                   ? "kolo.torch (hvd.allreduce)"
                   : "C++ (kolo-bench collectives)",
               out, in);
    rows.push_back(
        {{"side", job.framework == "latency-python" ? "python" : "c++"},
         {"bytes", bytes},
         {"np", kLatencyRanks},
         {"out_of_place_us", out},
         {"in_place_us", in}});
  }
  return rows;
}

}  // namespace

CLI::App* AddPythonCommand(CLI::App& app, PythonFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "python",
      "one Python training script under kolo.torch (kolorun), PyTorch DDP "
      "(torchrun), Horovod (horovodrun) and plain PyTorch: images/s of "
      "LeNet on Fashion-MNIST and ResNet-18 on synthetic images, and a "
      "small allreduce's time from Python beside C++'s");
  AddModelsFlag(cmd, &f->models);
  AddNpFlag(cmd, &f->np);
  cmd->add_option("--frameworks", f->frameworks,
                  "kolo, ddp, horovod, none (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "untimed batches of each job")
      ->capture_default_str();
  cmd->add_option("--batches-per-iter", f->batches_per_iter,
                  "batches per timed iteration")
      ->capture_default_str();
  cmd->add_option("--iters", f->iters,
                  "timed iterations of each job (the job's median)")
      ->capture_default_str();
  AddJobFlags(cmd, &f->threads, "rank (0: the cores over the host's ranks)",
              nullptr, nullptr, &f->repeat,
              "runs of every job, interleaved (the table gives medians)");
  AddByteSizeFlag(cmd, "--latency-bytes", &f->latency_bytes,
                  "size of the timed allreduce");
  cmd->add_option("--latency-iters", f->latency_iters,
                  "timed allreduces of each latency job")
      ->capture_default_str();
  cmd->add_flag("--quick", f->quick,
                "small batches, one repeat: checks the plumbing, measures "
                "nothing worth reporting");
  AddKolorunFlag(cmd, &f->kolorun);
  AddPythonFlag(cmd, &f->python);
  cmd->add_option("--horovod-python", f->horovod_python,
                  "Horovod's interpreter, horovodrun beside it (default: "
                  ".venv-horovod/bin/python at the source root)");
  AddRecordFlag(cmd, &f->json_path);
  return cmd;
}

StatusOr<json> RunPythonStudy(const PythonFlags& flags) {
  KOLO_ASSIGN_OR_RETURN(const PythonFlags f, Checked(flags));
  KOLO_ASSIGN_OR_RETURN(const Programs p, FindPrograms(f));
  KOLO_ASSIGN_OR_RETURN(std::vector<Job> jobs, PlanJobs(f, p));
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch, ScratchDir::Create("python"));
  std::vector<std::string> labels;
  for (const Job& job : jobs) labels.push_back(job.label);
  KOLO_RETURN_IF_ERROR(
      RunRepeats(labels, f.repeat, [&](size_t i, int32_t repeat) {
        return RunOnce(jobs[i], scratch, repeat);
      }));
  const json rows = PrintThroughput(jobs, p);
  const json latency = PrintLatency(jobs, f.latency_bytes);
  return FinishRecord({{"benchmark", "python"},
                       {"config",
                        {{"models", f.models},
                         {"np", f.np},
                         {"frameworks", f.frameworks},
                         {"warmup", f.warmup},
                         {"batches_per_iter", f.batches_per_iter},
                         {"iters", f.iters},
                         {"threads", f.threads},
                         {"repeat", f.repeat},
                         {"quick", f.quick}}},
                       {"rows", rows},
                       {"latency", latency}},
                      f.json_path);
}

}  // namespace kolo::bench
