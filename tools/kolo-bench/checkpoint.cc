#include "checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>

#include "bench_common.h"
#include "json_file.h"
#include "list_flag.h"
#include "peer_python.h"
#include "progress_line.h"
#include "scratch_dir.h"
#include "sibling_tools.h"
#include "statistics.h"
#include "train.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kWorker = "kolo-bench-checkpoint-worker";

const std::vector<CheckpointVariant>& KnownCheckpointVariants() {
  static const std::vector<CheckpointVariant> kAll = {
      {"kolo-zero1", kKolo, 1},
      {"kolo-zero2", kKolo, 2},
      {kTorchDcp, kTorchDcp, 0}};
  return kAll;
}

// The checks CLI11 does not make; kInvalidArgument naming the flag.
Status Validate(const CheckpointFlags& f) {
  if (f.repeat < 1 || f.threads < 1 || f.batch_size < 1 || f.image_size < 1) {
    return InvalidArgument(
        "--repeat, --threads, --batch-size and --image-size must be at least "
        "1");
  }
  if (SplitList(f.models).empty()) {
    return InvalidArgument("--models needs at least one model");
  }
  return Status::Ok();
}

// A number in `object[key]` that `good` accepts, or why not.
StatusOr<double> ResultNumber(const json& object, const char* key,
                              bool (*good)(double), const char* wanted) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number() || !good(it->get<double>())) {
    return Internal(fmt::format("result.{} is {}, not {}", key,
                                it == object.end() ? "missing" : it->dump(),
                                wanted));
  }
  return it->get<double>();
}

bool Positive(double v) { return v > 0 && std::isfinite(v); }
bool Finite(double v) { return std::isfinite(v); }

std::string RatioCell(const std::optional<double>& value) {
  return value ? FormatFixed(*value, 2) : "";
}

}  // namespace

StatusOr<std::vector<CheckpointVariant>> ParseCheckpointVariants(
    const std::string& text) {
  KOLO_ASSIGN_OR_RETURN(
      std::vector<CheckpointVariant> out,
      SelectByName(text, KnownCheckpointVariants(), "--variants",
                   "kolo-zero1, kolo-zero2 or torch-dcp"));
  if (out.empty()) {
    return InvalidArgument("--variants needs at least one variant");
  }
  return out;
}

std::vector<std::string> CheckpointCommand(const CheckpointFlags& f,
                                           const CheckpointVariant& variant,
                                           const std::string& model, bool save,
                                           int32_t np, const std::string& dir,
                                           const CheckpointTools& tools,
                                           const std::string& json_path) {
  // The flags both programs take, with the same meaning.
  const std::vector<std::string> common = {
      "--mode",       save ? "save" : "load",
      "--model",      model,
      "--dir",        dir,
      "--batch-size", std::to_string(f.batch_size),
      "--image-size", std::to_string(f.image_size),
      "--threads",    std::to_string(f.threads),
      "--json",       json_path};
  std::vector<std::string> c;
  if (variant.framework == kTorchDcp) {
    c = {tools.python, tools.script, "--np", std::to_string(np)};
  } else {
    c = {tools.kolorun,
         "-np",
         std::to_string(np),
         "--",
         tools.worker,
         "--zero-stage",
         std::to_string(variant.zero_stage)};
  }
  c.insert(c.end(), common.begin(), common.end());
  return c;
}

StatusOr<CheckpointMeasurement> ReadCheckpointMeasurement(
    const json& job, const std::string& output, int32_t np) {
  if (!job.is_object() || !job.contains("result") ||
      !job["result"].is_object()) {
    return JobError(output, "no result in its JSON");
  }
  const json& result = job["result"];
  CheckpointMeasurement m;
  struct Field {
    const char* key;
    bool (*good)(double);
    const char* wanted;
    double* out;
  };
  double bytes = 0, files = 0;
  for (const Field& field :
       {Field{"seconds", Positive, "a positive number", &m.seconds},
        Field{"bytes", Positive, "a positive number", &bytes},
        Field{"files", Positive, "a positive number", &files},
        Field{"parameter_sum", Finite, "a finite number", &m.parameter_sum},
        Field{"optimizer_state_sum", Finite, "a finite number",
              &m.optimizer_state_sum}}) {
    StatusOr<double> value =
        ResultNumber(result, field.key, field.good, field.wanted);
    if (!value.ok()) return JobError(output, value.status().message());
    *field.out = *value;
  }
  m.bytes = static_cast<int64_t>(bytes);
  m.files = static_cast<int64_t>(files);
  const auto rss = result.find("peak_rss_bytes");
  if (rss == result.end() || !rss->is_array() ||
      rss->size() != static_cast<size_t>(np)) {
    return JobError(
        output, fmt::format("result.peak_rss_bytes is {}, not {} per-rank "
                            "figure{}",
                            rss == result.end() ? "missing" : rss->dump(), np,
                            np == 1 ? "" : "s"));
  }
  for (const json& v : *rss) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return JobError(
          output,
          fmt::format(
              "result.peak_rss_bytes is {}: not all non-negative integers",
              rss->dump()));
    }
    m.peak_rss_bytes.push_back(v.get<int64_t>());
  }
  m.torch_version = JobTorchVersion(job, "");
  return m;
}

Status CheckRestored(const CheckpointMeasurement& save,
                     const CheckpointMeasurement& load,
                     const std::string& what) {
  for (auto [name, saved, loaded] :
       {std::tuple<const char*, double, double>{"parameter", save.parameter_sum,
                                                load.parameter_sum},
        {"optimizer-state", save.optimizer_state_sum,
         load.optimizer_state_sum}}) {
    if (std::fabs(saved - loaded) > 1e-6 * std::fabs(saved) + 1e-9) {
      return Internal(fmt::format(
          "{}: the load did not restore what the save wrote: its {} sum is "
          "{:.9g}, the save's {:.9g}",
          what, name, loaded, saved));
    }
  }
  return Status::Ok();
}

CheckpointRow SummarizeCheckpoint(
    const std::string& model, const CheckpointVariant& variant, int32_t save_np,
    int32_t load_np, const std::vector<CheckpointMeasurement>& saves,
    const std::vector<CheckpointMeasurement>& loads) {
  CheckpointRow row;
  row.model = model;
  row.variant = variant.name;
  row.framework = variant.framework;
  row.save_np = save_np;
  row.load_np = load_np;
  using M = CheckpointMeasurement;
  row.save_seconds = MedianOver(saves, &M::seconds);
  row.load_seconds = MedianOver(loads, &M::seconds);
  row.bytes = MedianOver(saves, &M::bytes);
  row.files = MedianOver(saves, &M::files);
  row.load_peak_rss_bytes = MedianOfLargest(loads, &M::peak_rss_bytes);
  row.torch_version = loads.empty() ? "" : loads.back().torch_version;
  return row;
}

void CompareWithDcp(std::vector<CheckpointRow>* rows) {
  for (CheckpointRow& row : *rows) {
    row.save_ratio.reset();
    row.load_ratio.reset();
    if (row.framework != kKolo) continue;
    const auto dcp =
        std::find_if(rows->begin(), rows->end(), [&](const CheckpointRow& r) {
          return r.framework == kTorchDcp && r.model == row.model &&
                 r.save_np == row.save_np && r.load_np == row.load_np;
        });
    if (dcp == rows->end()) continue;
    if (dcp->save_seconds > 0) {
      row.save_ratio = row.save_seconds / dcp->save_seconds;
    }
    if (dcp->load_seconds > 0) {
      row.load_ratio = row.load_seconds / dcp->load_seconds;
    }
  }
}

Table CheckpointTable() {
  return Table({TableColumn("model", "", 11, "", true),
                TableColumn("variant", "", 10, "", true),
                TableColumn("save", "np", 4), TableColumn("load", "np", 4),
                TableColumn("save", "(s)", 7), TableColumn("load", "(s)", 7),
                TableColumn("size", "(MiB)", 8), TableColumn("files", "", 5),
                TableColumn("load RSS", "(MiB)", 8),
                TableColumn("save", "time", 6, "÷ torch-dcp"),
                TableColumn("load", "time", 6, "÷ torch-dcp")});
}

std::vector<std::string> CheckpointCells(const CheckpointRow& row) {
  return {row.model,
          row.variant,
          std::to_string(row.save_np),
          std::to_string(row.load_np),
          FormatFixed(row.save_seconds, 3),
          FormatFixed(row.load_seconds, 3),
          Mib(row.bytes),
          FormatFixed(row.files, 0),
          FormatFixed(row.load_peak_rss_bytes / kMiB, 0),
          RatioCell(row.save_ratio),
          RatioCell(row.load_ratio)};
}

CLI::App* AddCheckpointCommand(CLI::App& app, CheckpointFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "checkpoint",
      "sharded checkpoints: kolo's ZeroOptimizer Save at --save-np ranks and "
      "Load resharded at each --load-np (kolo-zero1, kolo-zero2) against "
      "PyTorch Distributed Checkpoint of an FSDP2-sharded model (torch-dcp): "
      "seconds, bytes and files, every load checked against its save");
  AddModelsFlag(cmd, &f->models);
  cmd->add_option("--save-np", f->save_np, "ranks that save, comma-separated")
      ->capture_default_str();
  cmd->add_option("--load-np", f->load_np,
                  "ranks that load each save, comma-separated")
      ->capture_default_str();
  cmd->add_option("--variants", f->variants,
                  "kolo-zero1, kolo-zero2, torch-dcp (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--batch-size", f->batch_size,
                  "images per rank in the step before each save")
      ->capture_default_str();
  AddImageSizeFlag(cmd, &f->image_size);
  AddJobFlags(cmd, &f->threads, "rank", nullptr, nullptr, &f->repeat,
              "saves and loads per configuration, interleaved (the table "
              "gives medians)");
  AddRecordFlag(cmd, &f->json_path);
  AddKolorunFlag(cmd, &f->kolorun);
  cmd->add_option("--worker", f->worker,
                  "kolo-bench-checkpoint-worker to run kolo's side with");
  AddPythonFlag(cmd, &f->python);
  return cmd;
}

namespace {

// What RunCheckpoint measures, decided before the first job, and why a
// side cannot run here, by framework (such variants get a row saying so).
struct CheckpointPlan {
  std::vector<CheckpointVariant> variants;
  std::vector<int32_t> save_nps;
  std::vector<int32_t> load_nps;
  std::vector<std::string> models;
  CheckpointTools tools;
  std::map<std::string, std::string> missing;
  TorchPeer peer;

  bool RunsHere(const CheckpointVariant& v) const {
    const auto it = missing.find(v.framework);
    return it == missing.end() || it->second.empty();
  }
};

StatusOr<CheckpointPlan> PlanCheckpoint(const CheckpointFlags& f) {
  KOLO_RETURN_IF_ERROR(Validate(f));
  CheckpointPlan plan;
  KOLO_ASSIGN_OR_RETURN(plan.variants, ParseCheckpointVariants(f.variants));
  KOLO_ASSIGN_OR_RETURN(plan.save_nps, ParseNpList(f.save_np));
  KOLO_ASSIGN_OR_RETURN(plan.load_nps, ParseNpList(f.load_np));
  plan.models = SplitList(f.models);
  CheckpointTools& tools = plan.tools;
  tools.kolorun = f.kolorun.empty() ? FindTool("kolorun") : f.kolorun;
  tools.worker = f.worker.empty() ? FindTool(kWorker) : f.worker;
  tools.python = FindPython(f.python);
  tools.script = FindPeerScript("torch_checkpoint.py");
  for (const CheckpointVariant& v : plan.variants) {
    if (v.framework == kKolo) {
      if (access(tools.kolorun.c_str(), X_OK) != 0) {
        return NotFound(tools.kolorun +
                        " is not an executable (see --kolorun)");
      }
      if (access(tools.worker.c_str(), X_OK) != 0) {
        plan.missing[kKolo] = "not built (" + tools.worker +
                              " is built with LibTorch, KOLO_WITH_TORCH=ON; "
                              "see --worker)";
      }
    } else {
      plan.peer.Probe(tools.python, tools.script);
      plan.missing[kTorchDcp] = plan.peer.missing();
    }
  }
  return plan;
}

// One configuration: a variant's save at save_np and load at load_np.
struct Key {
  std::string model;
  std::string variant;
  int32_t save_np;
  int32_t load_np;
  bool operator<(const Key& o) const {
    return std::tie(model, variant, save_np, load_np) <
           std::tie(o.model, o.variant, o.save_np, o.load_np);
  }
};

// One job of the table: a save (load_np 0) or a load of the save before it.
struct CheckpointJob {
  std::string model;
  CheckpointVariant variant;
  int32_t save_np;
  int32_t load_np;
  bool last_load;  // the save's directory goes after it
};

std::string CheckpointJobLabel(const CheckpointJob& job) {
  if (job.load_np == 0) {
    return fmt::format("{} {} save np {}", job.model, job.variant.name,
                       job.save_np);
  }
  return fmt::format("{} {} np {} -> np {}", job.model, job.variant.name,
                     job.save_np, job.load_np);
}

// One repeat's jobs in order: each runnable variant's save at every save
// np, each followed by its loads.
std::vector<CheckpointJob> CheckpointJobs(const CheckpointPlan& plan) {
  std::vector<CheckpointJob> jobs;
  for (const std::string& model : plan.models) {
    for (const CheckpointVariant& v : plan.variants) {
      if (!plan.RunsHere(v)) continue;
      for (int32_t save_np : plan.save_nps) {
        jobs.push_back({model, v, save_np, 0, false});
        for (size_t l = 0; l < plan.load_nps.size(); ++l) {
          jobs.push_back({model, v, save_np, plan.load_nps[l],
                          l + 1 == plan.load_nps.size()});
        }
      }
    }
  }
  return jobs;
}

// Every repeat's measurements and JSON by configuration, and the save the
// loads running now restore.
struct CheckpointResults {
  std::map<Key, std::vector<CheckpointMeasurement>> saves, loads;
  std::map<Key, json> jobs_json;
  CheckpointMeasurement save;
  json save_json;
};

// Runs `job`; returns the line that reports it.
StatusOr<std::string> MeasureCheckpointJob(const CheckpointFlags& f,
                                           const CheckpointPlan& plan,
                                           const CheckpointJob& job,
                                           const ScratchDir& scratch, int32_t r,
                                           CheckpointResults& results) {
  const fs::path dir = scratch / fmt::format("{}-{}-np{}", job.model,
                                             job.variant.name, job.save_np);
  const fs::path json_path = scratch / "result.json";
  const bool save = job.load_np == 0;
  const int32_t np = save ? job.save_np : job.load_np;
  KOLO_ASSIGN_OR_RETURN(
      JobOutput out,
      RunJob(CheckpointCommand(f, job.variant, job.model, save, np,
                               dir.string(), plan.tools, json_path.string()),
             json_path.string(), (scratch / "log.txt").string()));
  KOLO_ASSIGN_OR_RETURN(CheckpointMeasurement m,
                        ReadCheckpointMeasurement(out.json, out.output, np));
  const std::string label = CheckpointJobLabel(job);
  if (save) {
    results.save = m;
    results.save_json = std::move(out.json);
    return fmt::format("#   repeat {}: {:<36} {:>8.3f} s, {} MiB in {} files",
                       r + 1, label, m.seconds,
                       Mib(static_cast<double>(m.bytes)), m.files);
  }
  KOLO_RETURN_IF_ERROR(CheckRestored(results.save, m, label));
  std::string line = fmt::format(
      "#   repeat {}: {:<36} {:>8.3f} s, weights and moments as saved", r + 1,
      label, m.seconds);
  const Key key{job.model, job.variant.name, job.save_np, job.load_np};
  results.saves[key].push_back(results.save);
  results.loads[key].push_back(std::move(m));
  results.jobs_json[key].push_back(
      {{"save", results.save_json}, {"load", std::move(out.json)}});
  if (job.last_load) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  return line;
}

// Row `row`'s record, with every repeat's seconds and jobs.
json CheckpointRowJson(const CheckpointRow& row, const Key& key,
                       CheckpointResults& results) {
  std::vector<double> save_seconds, load_seconds;
  for (const CheckpointMeasurement& m : results.saves[key]) {
    save_seconds.push_back(m.seconds);
  }
  for (const CheckpointMeasurement& m : results.loads[key]) {
    load_seconds.push_back(m.seconds);
  }
  json r = {{"model", row.model},
            {"variant", row.variant},
            {"framework", row.framework},
            {"torch_version", row.torch_version},
            {"save_np", row.save_np},
            {"load_np", row.load_np},
            {"save_seconds", save_seconds},
            {"load_seconds", load_seconds},
            {"save_seconds_median", row.save_seconds},
            {"load_seconds_median", row.load_seconds},
            {"bytes", row.bytes},
            {"files", row.files},
            {"load_peak_rss_bytes", row.load_peak_rss_bytes},
            {"runs", results.jobs_json[key]}};
  if (row.save_ratio) r["save_seconds_ratio_to_dcp"] = *row.save_ratio;
  if (row.load_ratio) r["load_seconds_ratio_to_dcp"] = *row.load_ratio;
  return r;
}

// The table, the variants that cannot run here and the closing lines;
// returns the record's rows.
json PrintCheckpointTable(const CheckpointPlan& plan,
                          CheckpointResults& results) {
  std::vector<CheckpointRow> rows;
  std::vector<Key> keys;
  for (const std::string& model : plan.models) {
    for (const CheckpointVariant& v : plan.variants) {
      if (!plan.RunsHere(v)) continue;
      for (int32_t save_np : plan.save_nps) {
        for (int32_t load_np : plan.load_nps) {
          const Key key{model, v.name, save_np, load_np};
          rows.push_back(SummarizeCheckpoint(model, v, save_np, load_np,
                                             results.saves[key],
                                             results.loads[key]));
          keys.push_back(key);
        }
      }
    }
  }
  CompareWithDcp(&rows);
  const Table table = CheckpointTable();
  PrintHeader(table);
  json out_rows = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    CheckpointRow& row = rows[i];
    fmt::print("{}\n", table.Row(CheckpointCells(row)));
    if (row.framework == kKolo || row.torch_version.empty()) {
      row.torch_version = row.framework == kKolo ? KoloTorchVersion()
                                                 : plan.peer.torch_version();
    }
    out_rows.push_back(CheckpointRowJson(row, keys[i], results));
  }
  for (const CheckpointVariant& v : plan.variants) {
    if (plan.RunsHere(v)) continue;
    const std::string& why = plan.missing.at(v.framework);
    fmt::print("{}\n", table.Row({"-", v.name, "-", "-", why}));
    out_rows.push_back(
        {{"variant", v.name}, {"framework", v.framework}, {"missing", why}});
  }
  fmt::print(
      "# kolo: ZeroOptimizer Save/Load (per-rank shards + manifest, "
      "resharded at load); torch-dcp: dcp.save/dcp.load of an FSDP2 model; "
      "both hold float32 weights and Adam's two moments\n");
  fmt::print("{}\n", TorchVersionsLine(plan.peer.python()));
  std::fflush(stdout);

  return out_rows;
}

}  // namespace

StatusOr<json> RunCheckpoint(const CheckpointFlags& f) {
  KOLO_ASSIGN_OR_RETURN(const CheckpointPlan plan, PlanCheckpoint(f));
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch,
                        ScratchDir::Create("checkpoint"));
  fmt::print(
      "# kolo-bench checkpoint: Adam's state after one step on {} synthetic "
      "3x{}x{} images per rank, saved at np {} and loaded at np {}, {} "
      "thread{} per rank, {} repeat{}\n",
      f.batch_size, f.image_size, f.image_size, f.save_np, f.load_np, f.threads,
      f.threads == 1 ? "" : "s", f.repeat, f.repeat == 1 ? "" : "s");
  std::fflush(stdout);
  const std::vector<CheckpointJob> jobs = CheckpointJobs(plan);
  std::vector<std::string> labels;
  for (const CheckpointJob& job : jobs) {
    labels.push_back(CheckpointJobLabel(job));
  }
  CheckpointResults results;
  KOLO_RETURN_IF_ERROR(RunRepeats(
      labels, f.repeat, [&](size_t i, int32_t r) -> StatusOr<std::string> {
        return MeasureCheckpointJob(f, plan, jobs[i], scratch, r, results);
      }));
  const json out_rows = PrintCheckpointTable(plan, results);
  std::vector<std::string> variant_names;
  for (const CheckpointVariant& v : plan.variants) {
    variant_names.push_back(v.name);
  }
  json record = {{"benchmark", "checkpoint"},
                 {"tool", "kolo-bench checkpoint"},
                 {"config",
                  {{"models", plan.models},
                   {"save_np", plan.save_nps},
                   {"load_np", plan.load_nps},
                   {"variants", variant_names},
                   {"optimizer", "adam"},
                   {"batch_size", f.batch_size},
                   {"image_size", f.image_size},
                   {"threads", f.threads},
                   {"repeat", f.repeat}}},
                 {"environment", RunEnvironment(plan.peer.python())},
                 {"rows", out_rows}};
  return FinishRecord(std::move(record), f.json_path);
}

}  // namespace kolo::bench
