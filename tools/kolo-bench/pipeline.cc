#include "pipeline.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <map>

#include "bench_common.h"
#include "json_file.h"
#include "kolo_internal/config.h"
#include "list_flag.h"
#include "peer_python.h"
#include "progress_line.h"
#include "scratch_dir.h"
#include "sibling_tools.h"
#include "statistics.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Table::Column Column(const char* title, const char* unit, int width,
                     bool left = false) {
  Table::Column c;
  c.title = title;
  c.unit = unit;
  c.width = width;
  c.left_align = left;
  return c;
}

// The per-rank figures of the first of `keys` found in result.pipeline,
// then in result.memory, then in result: kolo-train reports the pipeline's
// own figures under result.pipeline and the optimizer's beside ZeRO's. A
// single number under result.pipeline is rank 0's alone (kolo-train reports
// its first stage's statistics) and becomes a one-entry vector. Empty when
// none has it; an error when one has it in another shape than `np`
// non-negative numbers.
template <typename T>
StatusOr<std::vector<T>> PerRank(const json& result,
                                 std::initializer_list<const char*> keys,
                                 int32_t np) {
  for (const std::string where : {"pipeline", "memory", ""}) {
    const json* object = &result;
    if (!where.empty()) {
      const auto it = result.find(where);
      if (it == result.end() || !it->is_object()) continue;
      object = &*it;
    }
    for (const char* key : keys) {
      const auto it = object->find(key);
      if (it == object->end()) continue;
      const std::string name = where.empty()
                                   ? fmt::format("result.{}", key)
                                   : fmt::format("result.{}.{}", where, key);
      if (where == "pipeline" && it->is_number()) {
        if (it->get<double>() < 0) {
          return Internal(fmt::format("{} is {}: negative", name, it->dump()));
        }
        return std::vector<T>{it->get<T>()};
      }
      if (!it->is_array() || it->size() != static_cast<size_t>(np)) {
        return Internal(fmt::format("{} is {}, not {} per-rank figure{}", name,
                                    it->dump(), np, np == 1 ? "" : "s"));
      }
      std::vector<T> out;
      for (const json& value : *it) {
        if (!value.is_number() || value.get<double>() < 0) {
          return Internal(fmt::format("{} is {}: not all non-negative numbers",
                                      name, it->dump()));
        }
        out.push_back(value.get<T>());
      }
      return out;
    }
  }
  return std::vector<T>{};
}

// A per-rank figure's cell: "-" when the job did not report it.
template <typename T>
std::string Cell(const std::vector<T>& values, size_t rank, bool mib) {
  if (rank >= values.size()) return "-";
  const double v = static_cast<double>(values[rank]);
  return mib ? Mib(v) : FormatFixed(v, 0);
}

StatusOr<std::vector<int32_t>> Counts(const std::string& text, const char* flag,
                                      int64_t most) {
  std::vector<int32_t> out;
  for (const std::string& item : SplitList(text)) {
    KOLO_ASSIGN_OR_RETURN(int64_t n, ParseInt(item, 1, most, flag));
    out.push_back(static_cast<int32_t>(n));
  }
  if (out.empty()) {
    return InvalidArgument(fmt::format("{} needs at least one count", flag));
  }
  return out;
}

// The layers per stage the last of `runs` (one configuration's jobs) cut
// its model into: config.split, which kolo-train and torch_pipeline.py
// report; empty where a job does not.
std::vector<int64_t> ReportedSplit(const json& runs) {
  if (!runs.is_array() || runs.empty()) return {};
  const json& config = runs.back().value("config", json::object());
  const auto it = config.find("split");
  if (it == config.end() || !it->is_array()) return {};
  std::vector<int64_t> split;
  for (const json& n : *it) {
    if (!n.is_number_integer()) return {};
    split.push_back(n.get<int64_t>());
  }
  return split;
}

// --quick: lenet on 28x28 images, unsplit and in 2 stages, 4
// micro-batches on both schedules, one repeat: 3 jobs of 2 to 4 s.
PipelineFlags Quick(PipelineFlags f) {
  f.memory_models = "lenet";
  f.memory_stages = "1,2";
  f.memory_micro_batches = 4;
  f.memory_schedule = "1f1b";
  f.model = "lenet";
  f.stages = "2";
  f.micro_batches = "4";
  f.batch_size = 8;
  f.image_size = 28;
  f.warmup = 0;
  f.iters = 2;
  f.repeat = 1;
  return f;
}

// The checks CLI11 does not make; kInvalidArgument naming the flag.
Status Validate(const PipelineFlags& f) {
  if (f.iters < 1 || f.warmup < 0 || f.repeat < 1 || f.threads < 1 ||
      f.batch_size < 1 || f.image_size < 1 || f.memory_micro_batches < 1) {
    return InvalidArgument(
        "--iters, --repeat, --threads, --batch-size, --image-size and "
        "--memory-micro-batches must be at least 1, --warmup at least 0");
  }
  for (const std::string& s : SplitList(f.schedules)) {
    if (s != "gpipe" && s != "1f1b") {
      return InvalidArgument(fmt::format(
          "--schedules: unknown schedule '{}' (expected gpipe or 1f1b)", s));
    }
  }
  if (SplitList(f.schedules).empty()) {
    return InvalidArgument("--schedules needs at least one schedule");
  }
  return Status::Ok();
}

}  // namespace

std::string PipelineJobLabel(const PipelineJob& job) {
  if (job.stages == 1) return job.model + " unsplit";
  return fmt::format("{} p {} m {} {}{}", job.model, job.stages,
                     job.micro_batches, job.schedule,
                     job.framework == kKolo ? "" : " " + job.framework);
}

StatusOr<std::vector<std::string>> ParsePipelinePeers(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& item : SplitList(text)) {
    if (item != kTorchPipelining) {
      return InvalidArgument(
          "--peer must be torch-pipelining (or empty for none), got '" + item +
          "'");
    }
    if (out.empty()) out.push_back(item);
  }
  return out;
}

std::vector<std::string> PipelineCommand(const PipelineFlags& f,
                                         const PipelineJob& job,
                                         const TrainTools& tools,
                                         const std::string& json_path) {
  TrainFlags t;
  static_cast<TimedJobFlags&>(t) = f;
  t.model = job.model;
  t.dataset = "synthetic";
  // The timed steps cycle through these; generating 60,000 synthetic
  // images would take longer than the steps.
  t.train_subset = 4 * f.batch_size;
  if (job.stages > 1) {
    t.kolo_train_args = {"--pipeline-stages", std::to_string(job.stages),
                         "--micro-batches",   std::to_string(job.micro_batches),
                         "--schedule",        job.schedule,
                         "--balance",         f.balance};
  }
  return TrainCommand(t, "kolo", job.stages, f.batch_size, tools, json_path);
}

std::vector<std::string> PipelinePeerCommand(const PipelineFlags& f,
                                             const PipelineJob& job,
                                             const std::string& python,
                                             const std::string& script,
                                             const std::vector<int64_t>& split,
                                             const std::string& json_path) {
  std::vector<std::string> c = {python,    script,       "--model",
                                job.model, "--schedule", job.schedule,
                                "--json",  json_path};
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"--stages", job.stages},
        {"--micro-batches", job.micro_batches},
        {"--batch-size", f.batch_size},
        {"--image-size", f.image_size},
        {"--threads", f.threads},
        {"--warmup", f.warmup},
        {"--iters", f.iters}}) {
    c.insert(c.end(), {flag, std::to_string(value)});
  }
  if (!split.empty()) {
    std::string layers;
    for (int64_t n : split) {
      layers += (layers.empty() ? "" : ",") + std::to_string(n);
    }
    c.insert(c.end(), {"--split", layers});
  }
  return c;
}

StatusOr<PipelineMeasurement> ReadPipelineMeasurement(const json& job_json,
                                                      const std::string& output,
                                                      const PipelineJob& job) {
  StatusOr<TrainResult> timed = ReadTimedResult(job_json, output);
  if (!timed.ok()) return timed.status();
  // The pipeline's per-stage figures, under "pipeline" or "memory" or
  // beside the rest, as kolo-train and the peer write them.
  const json& result = job_json["result"];
  PipelineMeasurement m;
  m.images_per_second = timed->images_per_second;
  m.step_ms = *timed->step_ms;
  const int32_t np = job.stages;
  struct Field {
    std::initializer_list<const char*> keys;
    std::vector<int64_t>* out;
  };
  for (const Field& field :
       {Field{{"peak_rss_bytes"}, &m.peak_rss_bytes},
        Field{{"parameter_bytes"}, &m.parameter_bytes},
        Field{{"optimizer_state_bytes"}, &m.optimizer_state_bytes},
        Field{{"peak_activations", "max_peak_activations"},
              &m.peak_activations},
        Field{{"peak_activation_bytes"}, &m.peak_activation_bytes}}) {
    StatusOr<std::vector<int64_t>> values =
        PerRank<int64_t>(result, field.keys, np);
    if (!values.ok()) return JobError(output, values.status().message());
    *field.out = *std::move(values);
  }
  if (m.peak_rss_bytes.size() != static_cast<size_t>(np)) {
    return JobError(output, "no result.peak_rss_bytes (one figure per rank)");
  }
  for (auto [key, out] : {std::pair<const char*, std::vector<double>*>{
                              "busy_seconds", &m.busy_seconds},
                          {"idle_seconds", &m.idle_seconds}}) {
    StatusOr<std::vector<double>> values = PerRank<double>(result, {key}, np);
    if (!values.ok()) return JobError(output, values.status().message());
    *out = *std::move(values);
  }
  // The whole model's parameters in float32, where a job reports no bytes
  // per rank: exact for the unsplit model, which holds them all.
  const json& config = job_json.value("config", json::object());
  if (m.parameter_bytes.empty() && job.stages == 1 &&
      config.contains("parameters") && config["parameters"].is_number()) {
    m.parameter_bytes = {4 * config["parameters"].get<int64_t>()};
  }
  if (job.stages == 1) return m;

  // A pipelined job: it must have run the pipeline asked for, and say how
  // its stages spent their time.
  auto config_int = [&](const char* key) -> std::optional<int64_t> {
    const auto it = config.find(key);
    if (it == config.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  const std::optional<int64_t> stages = config_int("pipeline_stages");
  const std::optional<int64_t> micro = config_int("micro_batches");
  const std::string schedule = config.value("schedule", std::string());
  if (!stages || !micro || schedule.empty()) {
    return JobError(output,
                    "no config.pipeline_stages, config.micro_batches and "
                    "config.schedule in its JSON: does this kolo-train have "
                    "--pipeline-stages?");
  }
  if (*stages != job.stages || *micro != job.micro_batches ||
      schedule != job.schedule) {
    return JobError(
        output, fmt::format("it ran {} stages, {} micro-batches, {}; not {}",
                            *stages, *micro, schedule, PipelineJobLabel(job)));
  }
  if (m.busy_seconds.empty() || m.idle_seconds.empty()) {
    return JobError(
        output,
        "no result.pipeline.busy_seconds and idle_seconds (rank 0's, or one "
        "figure per stage)");
  }
  return m;
}

double IdealBubble(int32_t stages, int32_t micro_batches) {
  return static_cast<double>(stages - 1) /
         static_cast<double>(micro_batches + stages - 1);
}

std::vector<double> StageBubbles(const PipelineMeasurement& m) {
  std::vector<double> out;
  for (size_t s = 0; s < m.busy_seconds.size() && s < m.idle_seconds.size();
       ++s) {
    const double total = m.busy_seconds[s] + m.idle_seconds[s];
    out.push_back(total > 0 ? m.idle_seconds[s] / total : 0);
  }
  return out;
}

PipelineThroughputRow SummarizePipelineThroughput(
    const PipelineJob& job, const std::vector<PipelineMeasurement>& repeats) {
  PipelineThroughputRow row;
  row.job = job;
  row.ideal_bubble = IdealBubble(job.stages, job.micro_batches);
  using M = PipelineMeasurement;
  row.images_per_second = MedianOver(repeats, &M::images_per_second);
  row.step_ms = MedianOver(repeats, &M::step_ms);
  row.bubble = MedianOver(repeats, [](const M& m) {
    const std::vector<double> stages = StageBubbles(m);
    double sum = 0;
    for (double b : stages) sum += b;
    return stages.empty() ? 0 : sum / stages.size();
  });
  row.bubble_max =
      MedianOver(repeats, [](const M& m) { return Largest(StageBubbles(m)); });
  row.peak_rss_bytes = MedianOfLargest(repeats, &M::peak_rss_bytes);
  for (const M& m : repeats) {
    row.peak_activations =
        std::max(row.peak_activations,
                 static_cast<int64_t>(Largest(m.peak_activations)));
  }
  return row;
}

Table PipelineMemoryTable() {
  return Table({Column("model", "", 9, true), Column("stages", "", 6),
                Column("rank", "", 4), Column("params", "(MiB)", 8),
                Column("opt state", "(MiB)", 9),
                Column("peak act", "(m-batch)", 9),
                Column("act bytes", "(MiB)", 9), Column("peak RSS", "(MiB)", 8),
                Column("RSS", "÷ unsplit", 9)});
}

Table PipelineThroughputTable() {
  return Table(
      {Column("model", "", 9, true), Column("p", "", 2), Column("m", "", 3),
       Column("schedule", "", 8, true), Column("framework", "", 16, true),
       Column("images/s", "median", 9), Column("step", "(ms)", 8),
       Column("bubble", "measured", 8), Column("bubble", "max stage", 9),
       Column("bubble", "(p-1)/(m+p-1)", 13),
       Column("peak act", "(m-batch)", 9), Column("peak RSS", "(MiB)", 8),
       Column("kolo ÷", "this", 6)});
}

CLI::App* AddPipelineCommand(CLI::App& app, PipelineFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "pipeline",
      "pipeline parallelism: per-rank memory of a model unsplit and cut into "
      "stages (parameters, optimizer state, peak activations, peak RSS), and "
      "images/s and the measured bubble of GPipe and 1F1B at each number of "
      "micro-batches beside the ideal (p-1)/(m+p-1); every job is kolorun -np "
      "P kolo-train --pipeline-stages P on synthetic images");
  cmd->add_option("--memory-models", f->memory_models,
                  "models of the memory table, comma-separated")
      ->capture_default_str();
  cmd->add_option("--memory-stages", f->memory_stages,
                  "stage counts of the memory table (1: unsplit)")
      ->capture_default_str();
  cmd->add_option("--memory-schedule", f->memory_schedule,
                  "the memory table's schedule")
      ->check(CLI::IsMember({"gpipe", "1f1b"}))
      ->capture_default_str();
  cmd->add_option("--memory-micro-batches", f->memory_micro_batches,
                  "the memory table's micro-batches")
      ->capture_default_str();
  cmd->add_option("--model", f->model, "the throughput table's model")
      ->capture_default_str();
  cmd->add_option("--stages", f->stages,
                  "the throughput table's stage counts, comma-separated")
      ->capture_default_str();
  cmd->add_option("--micro-batches", f->micro_batches,
                  "the throughput table's micro-batch counts")
      ->capture_default_str();
  cmd->add_option("--schedules", f->schedules, "gpipe, 1f1b (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--balance", f->balance,
                  "how kolo-train splits the layers: parameters (count) or "
                  "time (each layer's measured forward time)")
      ->check(CLI::IsMember({"parameters", "time"}))
      ->capture_default_str();
  cmd->add_option("--batch-size", f->batch_size, "images per step")
      ->capture_default_str();
  AddImageSizeFlag(cmd, &f->image_size);
  AddJobFlags(cmd, &f->threads, "rank", &f->warmup, &f->iters, &f->repeat,
              "jobs per configuration, interleaved (the tables give medians)");
  cmd->add_flag("--quick", f->quick,
                "lenet, tiny sizes, one repeat: checks the plumbing, measures "
                "nothing worth reporting");
  cmd->add_option("--peer", f->peers,
                  "torch-pipelining: PyTorch's torch.distributed.pipelining "
                  "on each throughput configuration, cut where kolo cuts; "
                  "empty: kolo alone")
      ->capture_default_str();
  AddRecordFlag(cmd, &f->json_path);
  AddToolFlags(cmd, &f->kolorun, &f->kolo_train, nullptr, &f->python);
  return cmd;
}

namespace {

// What RunPipeline measures, decided before the first job: the memory
// table's jobs, the throughput table's, and one repeat's jobs in order (a
// configuration in both tables runs once); why the torch-pipelining peer
// cannot run here, if it cannot.
struct PipelinePlan {
  std::vector<int32_t> memory_stages;
  std::vector<int32_t> stages;
  std::vector<int32_t> micro;
  std::vector<std::string> peers;
  TrainTools tools;
  TorchPeer peer;
  std::string peer_script;
  std::vector<PipelineJob> memory_jobs;
  std::vector<PipelineJob> throughput_jobs;
  std::vector<PipelineJob> jobs;
};

StatusOr<PipelinePlan> PlanPipeline(const PipelineFlags& f) {
  PipelinePlan plan;
  KOLO_RETURN_IF_ERROR(Validate(f));
  KOLO_ASSIGN_OR_RETURN(plan.memory_stages,
                        Counts(f.memory_stages, "--memory-stages", 64));
  KOLO_ASSIGN_OR_RETURN(plan.stages, Counts(f.stages, "--stages", 64));
  KOLO_ASSIGN_OR_RETURN(plan.micro,
                        Counts(f.micro_batches, "--micro-batches", 1024));
  for (int32_t p : plan.stages) {
    if (p < 2) {
      return InvalidArgument(
          "--stages: the throughput table pipelines, so every count must be "
          "at least 2");
    }
  }
  KOLO_ASSIGN_OR_RETURN(plan.peers, ParsePipelinePeers(f.peers));
  KOLO_ASSIGN_OR_RETURN(plan.tools,
                        FindTrainTools(f.kolorun, f.kolo_train, "", f.python));
  plan.peer_script = FindPeerScript("torch_pipeline.py");
  if (!plan.peers.empty()) {
    plan.peer.Probe(plan.tools.python, plan.peer_script);
  }
  const bool run_peer = plan.peer.runs();

  // The memory jobs, then the throughput jobs; a configuration in both is
  // run once.
  auto add = [&](const PipelineJob& job) {
    const std::string label = PipelineJobLabel(job);
    for (const PipelineJob& j : plan.jobs) {
      if (PipelineJobLabel(j) == label) return;
    }
    plan.jobs.push_back(job);
  };
  for (const std::string& model : SplitList(f.memory_models)) {
    for (int32_t p : plan.memory_stages) {
      PipelineJob job{model, p, 1, ""};
      if (p > 1) {
        job.micro_batches = static_cast<int32_t>(f.memory_micro_batches);
        job.schedule = f.memory_schedule;
      }
      plan.memory_jobs.push_back(job);
      add(job);
    }
  }
  for (int32_t p : plan.stages) {
    for (int32_t m : plan.micro) {
      for (const std::string& schedule : SplitList(f.schedules)) {
        plan.throughput_jobs.push_back({f.model, p, m, schedule, kKolo});
        add(plan.throughput_jobs.back());
        // Right after kolo's: it takes the cut kolo's job reports.
        if (run_peer) {
          plan.throughput_jobs.push_back(
              {f.model, p, m, schedule, kTorchPipelining});
          add(plan.throughput_jobs.back());
        }
      }
    }
  }

  return plan;
}

// Every repeat's measurements and JSON, by PipelineJobLabel.
struct PipelineResults {
  std::map<std::string, std::vector<PipelineMeasurement>> measured;
  std::map<std::string, json> runs;
};

// One job of `job`; its measurement and JSON go into `results`, the line
// that reports it is returned.
StatusOr<std::string> MeasurePipelineJob(const PipelineFlags& f,
                                         const PipelinePlan& plan,
                                         const PipelineJob& job,
                                         const ScratchDir& scratch, int32_t r,
                                         PipelineResults& results) {
  const std::string label = PipelineJobLabel(job);
  const fs::path json_path = scratch / "result.json";
  std::vector<std::string> command;
  if (job.framework == kKolo) {
    command = PipelineCommand(f, job, plan.tools, json_path.string());
  } else {
    PipelineJob kolo_job = job;
    kolo_job.framework = kKolo;
    command = PipelinePeerCommand(
        f, job, plan.tools.python, plan.peer_script,
        ReportedSplit(results.runs[PipelineJobLabel(kolo_job)]),
        json_path.string());
  }
  KOLO_ASSIGN_OR_RETURN(JobOutput out, RunJob(command, json_path.string(),
                                              (scratch / "log.txt").string()));
  KOLO_ASSIGN_OR_RETURN(PipelineMeasurement m,
                        ReadPipelineMeasurement(out.json, out.output, job));
  for (double b : StageBubbles(m)) {
    if (!(b >= 0 && b <= 1)) {
      return JobError(out.output,
                      fmt::format("a stage's bubble is {}, not in [0, 1]", b));
    }
  }
  std::string line = fmt::format(
      "#   repeat {}: {:<24} {:>8.1f} images/s, peak RSS {} MiB (largest "
      "rank)",
      r + 1, label, m.images_per_second,
      FormatFixed(Largest(m.peak_rss_bytes) / kMiB, 0));
  results.measured[label].push_back(std::move(m));
  results.runs[label].push_back(std::move(out.json));
  return line;
}

// The memory table: one row per rank of the last repeat's job (the byte
// counts are the same in every repeat), RSS as the median over the
// repeats. Returns its record rows.
json PrintPipelineMemory(const PipelineFlags& f, const PipelinePlan& plan,
                         PipelineResults& results) {
  std::map<std::string, std::vector<PipelineMeasurement>>& measured =
      results.measured;
  fmt::print("\n# memory per rank ({} m {} for the split rows)\n",
             f.memory_schedule, f.memory_micro_batches);
  const Table memory_table = PipelineMemoryTable();
  PrintHeader(memory_table);
  json memory_rows = json::array();
  std::map<std::string, double> unsplit_rss;  // by model
  for (const PipelineJob& job : plan.memory_jobs) {
    const std::vector<PipelineMeasurement>& repeats =
        measured[PipelineJobLabel(job)];
    const PipelineMeasurement& last = repeats.back();
    for (int32_t rank = 0; rank < job.stages; ++rank) {
      std::vector<double> rss;
      for (const PipelineMeasurement& m : repeats) {
        rss.push_back(static_cast<double>(m.peak_rss_bytes[rank]));
      }
      const double median_rss = SpreadOf(rss).median;
      if (job.stages == 1) unsplit_rss[job.model] = median_rss;
      const auto base = unsplit_rss.find(job.model);
      std::optional<double> ratio;
      if (base != unsplit_rss.end() && base->second > 0) {
        ratio = median_rss / base->second;
      }
      const size_t r = static_cast<size_t>(rank);
      fmt::print("{}\n",
                 memory_table.Row({job.model, std::to_string(job.stages),
                                   std::to_string(rank),
                                   Cell(last.parameter_bytes, r, true),
                                   Cell(last.optimizer_state_bytes, r, true),
                                   Cell(last.peak_activations, r, false),
                                   Cell(last.peak_activation_bytes, r, true),
                                   FormatFixed(median_rss / kMiB, 0),
                                   ratio ? FormatFixed(*ratio, 2) : "-"}));
      json row = {{"model", job.model},
                  {"stages", job.stages},
                  {"rank", rank},
                  {"framework", kKolo},
                  {"torch_version", KoloTorchVersion()},
                  {"schedule", job.schedule},
                  {"micro_batches", job.micro_batches},
                  {"peak_rss_bytes", median_rss}};
      if (ratio) row["peak_rss_ratio_to_unsplit"] = *ratio;
      auto put = [&](const char* key, const std::vector<int64_t>& values) {
        if (r < values.size()) row[key] = values[r];
      };
      put("parameter_bytes", last.parameter_bytes);
      put("optimizer_state_bytes", last.optimizer_state_bytes);
      put("peak_activations", last.peak_activations);
      put("peak_activation_bytes", last.peak_activation_bytes);
      memory_rows.push_back(std::move(row));
    }
  }

  return memory_rows;
}

// The throughput table, with the peer's rows and the closing lines.
// Returns its record rows.
json PrintPipelineThroughput(const PipelineFlags& f, const PipelinePlan& plan,
                             PipelineResults& results) {
  std::map<std::string, std::vector<PipelineMeasurement>>& measured =
      results.measured;
  std::map<std::string, json>& runs = results.runs;
  fmt::print(
      "\n# throughput: {} on synthetic 3x{}x{}, batch {} per step; bubble = "
      "a stage's waiting over its step time, the mean over the stages\n",
      f.model, f.image_size, f.image_size, f.batch_size);
  const Table throughput_table = PipelineThroughputTable();
  PrintHeader(throughput_table);
  json throughput_rows = json::array();
  bool first_stage_only = false;
  std::optional<double> kolo_rate;  // the last kolo row's, for its peer row
  for (const PipelineJob& job : plan.throughput_jobs) {
    const std::string label = PipelineJobLabel(job);
    const bool kolo = job.framework == kKolo;
    const bool one_stage = StageBubbles(measured[label].back()).size() < 2;
    first_stage_only |= one_stage;
    const PipelineThroughputRow row =
        SummarizePipelineThroughput(job, measured[label]);
    std::optional<double> kolo_ratio;
    if (kolo) {
      kolo_rate = row.images_per_second;
    } else if (kolo_rate && row.images_per_second > 0) {
      kolo_ratio = *kolo_rate / row.images_per_second;
    }
    fmt::print(
        "{}\n",
        throughput_table.Row(
            {job.model, std::to_string(job.stages),
             std::to_string(job.micro_batches), job.schedule, job.framework,
             FormatFixed(row.images_per_second,
                         row.images_per_second < 100 ? 1 : 0),
             FormatFixed(row.step_ms, 1), FormatFixed(row.bubble, 3),
             one_stage ? "-" : FormatFixed(row.bubble_max, 3),
             FormatFixed(row.ideal_bubble, 3),
             // The torch peer counts no activations.
             kolo ? std::to_string(row.peak_activations) : "-",
             FormatFixed(row.peak_rss_bytes / kMiB, 0),
             kolo_ratio ? FormatFixed(*kolo_ratio, 2) : ""}));
    std::vector<double> rates;
    for (const PipelineMeasurement& m : measured[label]) {
      rates.push_back(m.images_per_second);
    }
    json r = {
        {"model", job.model},
        {"stages", job.stages},
        {"micro_batches", job.micro_batches},
        {"schedule", job.schedule},
        {"framework", job.framework},
        {"torch_version",
         kolo ? KoloTorchVersion()
              : JobTorchVersion(runs[label].back(), plan.peer.torch_version())},
        {"split", ReportedSplit(runs[label])},
        {"images_per_second", rates},
        {"images_per_second_median", row.images_per_second},
        {"step_ms_median", row.step_ms},
        {"bubble", row.bubble},
        {"bubble_max_stage", row.bubble_max},
        {"stage_bubbles", StageBubbles(measured[label].back())},
        {"ideal_bubble", row.ideal_bubble},
        {"peak_rss_bytes", row.peak_rss_bytes}};
    if (kolo) r["peak_activations"] = row.peak_activations;
    if (kolo_ratio) r["kolo_ratio"] = *kolo_ratio;
    throughput_rows.push_back(std::move(r));
  }
  if (!plan.peer.missing().empty()) {
    fmt::print("{}\n",
               throughput_table.Row({f.model, "-", "-", "-", kTorchPipelining,
                                     plan.peer.missing()}));
    throughput_rows.push_back(
        {{"framework", kTorchPipelining}, {"missing", plan.peer.missing()}});
  }
  if (first_stage_only) {
    fmt::print(
        "# measured: stage 0's idle fraction alone where kolo-train reports "
        "only its first stage's statistics (no max over the stages then)\n");
  }
  if (plan.peer.python() != nullptr) {
    fmt::print(
        "# torch-pipelining: the same cut, batch and schedule in PyTorch's "
        "torch.distributed.pipelining; its bubble is each stage's time in "
        "the schedule's waits; it counts no activations\n");
  }
  fmt::print("{}\n", TorchVersionsLine(plan.peer.python()));
  std::fflush(stdout);

  return throughput_rows;
}

}  // namespace

StatusOr<json> RunPipeline(const PipelineFlags& given) {
  const PipelineFlags f = given.quick ? Quick(given) : given;
  KOLO_ASSIGN_OR_RETURN(const PipelinePlan plan, PlanPipeline(f));
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch,
                        ScratchDir::Create("pipeline"));
  fmt::print(
      "# kolo-bench pipeline{}: synthetic 3x{}x{}, batch {} per step, {} "
      "thread{} per rank, {} warm-up + {} timed steps, {} repeat{}\n",
      f.quick ? " --quick" : "", f.image_size, f.image_size, f.batch_size,
      f.threads, f.threads == 1 ? "" : "s", f.warmup, f.iters, f.repeat,
      f.repeat == 1 ? "" : "s");
  std::fflush(stdout);
  PipelineResults results;
  std::vector<std::string> labels;
  for (const PipelineJob& job : plan.jobs) {
    labels.push_back(PipelineJobLabel(job));
  }
  KOLO_RETURN_IF_ERROR(RunRepeats(
      labels, f.repeat, [&](size_t i, int32_t r) -> StatusOr<std::string> {
        return MeasurePipelineJob(f, plan, plan.jobs[i], scratch, r, results);
      }));
  const json memory_rows = PrintPipelineMemory(f, plan, results);
  const json throughput_rows = PrintPipelineThroughput(f, plan, results);
  const std::map<std::string, json>& runs = results.runs;
  json all_runs = json::array();
  for (const PipelineJob& job : plan.jobs) {
    all_runs.push_back({{"job", PipelineJobLabel(job)},
                        {"runs", runs.at(PipelineJobLabel(job))}});
  }
  json record = {{"benchmark", "pipeline"},
                 {"tool", "kolo-bench pipeline"},
                 {"config",
                  {{"quick", f.quick},
                   {"memory_models", SplitList(f.memory_models)},
                   {"memory_stages", plan.memory_stages},
                   {"memory_schedule", f.memory_schedule},
                   {"memory_micro_batches", f.memory_micro_batches},
                   {"model", f.model},
                   {"stages", plan.stages},
                   {"micro_batches", plan.micro},
                   {"schedules", SplitList(f.schedules)},
                   {"peers", plan.peers},
                   {"balance", f.balance},
                   {"dataset", "synthetic"}}},
                 {"environment", RunEnvironment(plan.peer.python())},
                 {"memory_rows", memory_rows},
                 {"throughput_rows", throughput_rows},
                 {"jobs", all_runs}};
  record["config"].update(TimedJobConfig(f));
  return FinishRecord(std::move(record), f.json_path);
}

}  // namespace kolo::bench
