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
  auto fail = [&](const std::string& what) {
    return Internal(
        fmt::format("{}; the job's output ends:{}", what, OutputTail(output)));
  };
  if (!job.is_object() || !job.contains("result") ||
      !job["result"].is_object()) {
    return fail("no result in its JSON");
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
    if (!value.ok()) return fail(value.status().message());
    *field.out = *value;
  }
  m.bytes = static_cast<int64_t>(bytes);
  m.files = static_cast<int64_t>(files);
  const auto rss = result.find("peak_rss_bytes");
  if (rss == result.end() || !rss->is_array() ||
      rss->size() != static_cast<size_t>(np)) {
    return fail(fmt::format(
        "result.peak_rss_bytes is {}, not {} per-rank "
        "figure{}",
        rss == result.end() ? "missing" : rss->dump(), np, np == 1 ? "" : "s"));
  }
  for (const json& v : *rss) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return fail(fmt::format(
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
  std::vector<double> save_seconds, load_seconds, bytes, files, rss;
  for (const CheckpointMeasurement& m : saves) {
    save_seconds.push_back(m.seconds);
    bytes.push_back(static_cast<double>(m.bytes));
    files.push_back(static_cast<double>(m.files));
  }
  for (const CheckpointMeasurement& m : loads) {
    load_seconds.push_back(m.seconds);
    rss.push_back(Largest(m.peak_rss_bytes));
  }
  row.save_seconds = SpreadOf(save_seconds).median;
  row.load_seconds = SpreadOf(load_seconds).median;
  row.bytes = SpreadOf(bytes).median;
  row.files = SpreadOf(files).median;
  row.load_peak_rss_bytes = SpreadOf(rss).median;
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
  cmd->add_option("--models", f->models, "model zoo networks, comma-separated")
      ->capture_default_str();
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
  cmd->add_option("--image-size", f->image_size,
                  "the synthetic 3-channel images' height and width")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "LibTorch threads per rank")
      ->capture_default_str();
  cmd->add_option("--repeat", f->repeat,
                  "saves and loads per configuration, interleaved (the table "
                  "gives medians)")
      ->capture_default_str();
  cmd->add_option("--json", f->json_path,
                  "append the record (every figure, every job's JSON) here");
  cmd->add_option("--kolorun", f->kolorun, "kolorun to start kolo's jobs with");
  cmd->add_option("--worker", f->worker,
                  "kolo-bench-checkpoint-worker to run kolo's side with");
  AddPythonFlag(cmd, &f->python);
  return cmd;
}

int RunCheckpointCommand(const CheckpointFlags& f) {
  StatusOr<json> record = RunCheckpoint(f);
  if (!record.ok()) {
    fmt::print(stderr, "kolo-bench checkpoint: {}\n",
               record.status().message());
    return 1;
  }
  return 0;
}

StatusOr<json> RunCheckpoint(const CheckpointFlags& f) {
  KOLO_RETURN_IF_ERROR(Validate(f));
  KOLO_ASSIGN_OR_RETURN(std::vector<CheckpointVariant> variants,
                        ParseCheckpointVariants(f.variants));
  KOLO_ASSIGN_OR_RETURN(std::vector<int32_t> save_nps, ParseNpList(f.save_np));
  KOLO_ASSIGN_OR_RETURN(std::vector<int32_t> load_nps, ParseNpList(f.load_np));
  const std::vector<std::string> models = SplitList(f.models);
  CheckpointTools tools;
  tools.kolorun = f.kolorun.empty() ? FindTool("kolorun") : f.kolorun;
  tools.worker = f.worker.empty() ? FindTool(kWorker) : f.worker;
  tools.python = FindPython(f.python);
  tools.script = FindPeerScript("torch_checkpoint.py");

  // Why a side cannot run here, by framework; such variants get a row
  // saying so.
  std::map<std::string, std::string> missing;
  std::optional<PeerPython> peer;
  for (const CheckpointVariant& v : variants) {
    if (v.framework == kKolo) {
      if (access(tools.kolorun.c_str(), X_OK) != 0) {
        return NotFound(tools.kolorun +
                        " is not an executable (see --kolorun)");
      }
      if (access(tools.worker.c_str(), X_OK) != 0) {
        missing[kKolo] = "not built (" + tools.worker +
                         " is built with LibTorch, KOLO_WITH_TORCH=ON; see "
                         "--worker)";
      }
    } else if (!peer) {
      peer = ProbePeerPython(tools.python);
      missing[kTorchDcp] = peer->Missing();
      if (missing[kTorchDcp].empty() && !fs::exists(tools.script)) {
        missing[kTorchDcp] = "script not found: " + tools.script;
      }
    }
  }
  auto runs_here = [&](const CheckpointVariant& v) {
    const auto it = missing.find(v.framework);
    return it == missing.end() || it->second.empty();
  };

  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch,
                        ScratchDir::Create("checkpoint"));

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
  std::map<Key, std::vector<CheckpointMeasurement>> saves, loads;
  std::map<Key, json> jobs_json;
  int64_t jobs_per_repeat = 0;
  for (const CheckpointVariant& v : variants) {
    if (runs_here(v)) {
      jobs_per_repeat += static_cast<int64_t>(models.size() * save_nps.size() *
                                              (1 + load_nps.size()));
    }
  }

  fmt::print(
      "# kolo-bench checkpoint: Adam's state after one step on {} synthetic "
      "3x{}x{} images per rank, saved at np {} and loaded at np {}, {} "
      "thread{} per rank, {} repeat{}\n",
      f.batch_size, f.image_size, f.image_size, f.save_np, f.load_np, f.threads,
      f.threads == 1 ? "" : "s", f.repeat, f.repeat == 1 ? "" : "s");
  std::fflush(stdout);
  RunsProgress progress(jobs_per_repeat * f.repeat);
  const fs::path json_path = scratch.path() / "result.json";
  const std::string log = (scratch.path() / "log.txt").string();
  for (int32_t r = 0; r < f.repeat; ++r) {
    for (const std::string& model : models) {
      for (const CheckpointVariant& v : variants) {
        if (!runs_here(v)) continue;
        for (int32_t save_np : save_nps) {
          const fs::path dir = scratch.path() / fmt::format("{}-{}-np{}", model,
                                                            v.name, save_np);
          const std::string save_label =
              fmt::format("{} {} save np {}", model, v.name, save_np);
          progress.Start(fmt::format("{} repeat {}", save_label, r + 1));
          StatusOr<JobOutput> saved =
              RunJob(CheckpointCommand(f, v, model, true, save_np, dir.string(),
                                       tools, json_path.string()),
                     json_path.string(), log);
          if (!saved.ok()) return saved.status().WithContext(save_label);
          StatusOr<CheckpointMeasurement> save =
              ReadCheckpointMeasurement(saved->json, saved->output, save_np);
          if (!save.ok()) return save.status().WithContext(save_label);
          progress.Print(fmt::format(
              "#   repeat {}: {:<36} {:>8.3f} s, {} MiB in {} files", r + 1,
              save_label, save->seconds, Mib(static_cast<double>(save->bytes)),
              save->files));
          for (int32_t load_np : load_nps) {
            const Key key{model, v.name, save_np, load_np};
            const std::string label = fmt::format("{} {} np {} -> np {}", model,
                                                  v.name, save_np, load_np);
            progress.Start(fmt::format("{} repeat {}", label, r + 1));
            StatusOr<JobOutput> loaded = RunJob(
                CheckpointCommand(f, v, model, false, load_np, dir.string(),
                                  tools, json_path.string()),
                json_path.string(), log);
            if (!loaded.ok()) return loaded.status().WithContext(label);
            StatusOr<CheckpointMeasurement> load = ReadCheckpointMeasurement(
                loaded->json, loaded->output, load_np);
            if (!load.ok()) return load.status().WithContext(label);
            KOLO_RETURN_IF_ERROR(CheckRestored(*save, *load, label));
            progress.Print(fmt::format(
                "#   repeat {}: {:<36} {:>8.3f} s, weights and moments as "
                "saved",
                r + 1, label, load->seconds));
            saves[key].push_back(*save);
            loads[key].push_back(*std::move(load));
            jobs_json[key].push_back(
                {{"save", saved->json}, {"load", loaded->json}});
          }
          std::error_code ignored;
          fs::remove_all(dir, ignored);
        }
      }
    }
  }
  progress.Finish();

  std::vector<CheckpointRow> rows;
  std::vector<Key> keys;
  for (const std::string& model : models) {
    for (const CheckpointVariant& v : variants) {
      if (!runs_here(v)) continue;
      for (int32_t save_np : save_nps) {
        for (int32_t load_np : load_nps) {
          const Key key{model, v.name, save_np, load_np};
          rows.push_back(SummarizeCheckpoint(model, v, save_np, load_np,
                                             saves[key], loads[key]));
          keys.push_back(key);
        }
      }
    }
  }
  CompareWithDcp(&rows);
  const Table table = CheckpointTable();
  for (const std::string& line : table.HeaderLines()) fmt::print("{}\n", line);
  json out_rows = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    CheckpointRow& row = rows[i];
    fmt::print("{}\n", table.Row(CheckpointCells(row)));
    if (row.framework == kKolo || row.torch_version.empty()) {
      row.torch_version = row.framework == kKolo
                              ? KoloTorchVersion()
                              : (peer ? peer->torch_version : "");
    }
    std::vector<double> save_seconds, load_seconds;
    for (const CheckpointMeasurement& m : saves[keys[i]]) {
      save_seconds.push_back(m.seconds);
    }
    for (const CheckpointMeasurement& m : loads[keys[i]]) {
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
              {"runs", jobs_json[keys[i]]}};
    if (row.save_ratio) r["save_seconds_ratio_to_dcp"] = *row.save_ratio;
    if (row.load_ratio) r["load_seconds_ratio_to_dcp"] = *row.load_ratio;
    out_rows.push_back(std::move(r));
  }
  for (const CheckpointVariant& v : variants) {
    if (runs_here(v)) continue;
    const std::string& why = missing[v.framework];
    fmt::print("{}\n", table.Row({"-", v.name, "-", "-", why}));
    out_rows.push_back(
        {{"variant", v.name}, {"framework", v.framework}, {"missing", why}});
  }
  fmt::print(
      "# kolo: ZeroOptimizer Save/Load (per-rank shards + manifest, "
      "resharded at load); torch-dcp: dcp.save/dcp.load of an FSDP2 model; "
      "both hold float32 weights and Adam's two moments\n");
  fmt::print("{}\n", TorchVersionsLine(peer ? &*peer : nullptr));
  std::fflush(stdout);

  std::vector<std::string> variant_names;
  for (const CheckpointVariant& v : variants) variant_names.push_back(v.name);
  json record = {{"benchmark", "checkpoint"},
                 {"tool", "kolo-bench checkpoint"},
                 {"config",
                  {{"models", models},
                   {"save_np", save_nps},
                   {"load_np", load_nps},
                   {"variants", variant_names},
                   {"optimizer", "adam"},
                   {"batch_size", f.batch_size},
                   {"image_size", f.image_size},
                   {"threads", f.threads},
                   {"repeat", f.repeat}}},
                 {"environment", RunEnvironment(peer ? &*peer : nullptr)},
                 {"rows", out_rows}};
  if (!f.json_path.empty()) {
    KOLO_RETURN_IF_ERROR(AppendJsonRecord(f.json_path, record));
  }
  return record;
}

}  // namespace kolo::bench
