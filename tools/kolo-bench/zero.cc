#include "zero.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>

#include "bench_common.h"
#include "json_file.h"
#include "list_flag.h"
#include "peer_python.h"
#include "progress_line.h"
#include "scratch_dir.h"
#include "statistics.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kKoloDdp = "kolo-ddp";

const std::vector<ZeroVariant>& AllVariants() {
  static const std::vector<ZeroVariant> kAll = {
      {kKoloDdp, kKolo, 0},         {"kolo-zero1", kKolo, 1},
      {"kolo-zero2", kKolo, 2},     {"torch-ddp", kTorchDdp, 0},
      {"torch-zero", kTorchDdp, 1}, {"torch-fsdp2", kTorchDdp, 3}};
  return kAll;
}

// Why `values`, the per-rank figure `name`, does not hold one figure for
// each of `np` ranks; Ok when it does.
Status CheckPerRank(const std::vector<int64_t>& values, const std::string& name,
                    int32_t np) {
  if (values.size() == static_cast<size_t>(np)) return Status::Ok();
  return Internal(fmt::format("{} is {}, not {} per-rank figure{}", name,
                              json(values).dump(), np, np == 1 ? "" : "s"));
}

std::string Optional(const std::optional<double>& value, int decimals) {
  return value ? FormatFixed(*value, decimals) : "-";
}

// The checks CLI11 does not make; kInvalidArgument naming the flag.
Status Validate(const ZeroFlags& f, const std::vector<ZeroVariant>& variants) {
  KOLO_RETURN_IF_ERROR(ValidateTimedJob(f, f.dataset));
  if (!(f.lr > 0)) {
    return InvalidArgument(fmt::format("--lr must be positive, got {}", f.lr));
  }
  if (SplitList(f.models).empty()) {
    return InvalidArgument("--models needs at least one model");
  }
  if (variants.empty()) {
    return InvalidArgument("--variants needs at least one variant");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<ZeroVariant>> ParseZeroVariants(const std::string& text) {
  return SelectByName(text, AllVariants(), "--variants",
                      "kolo-ddp, kolo-zero1, kolo-zero2, torch-ddp, "
                      "torch-zero or torch-fsdp2");
}

std::vector<std::string> ZeroCommand(const ZeroFlags& f,
                                     const ZeroVariant& variant,
                                     const std::string& model, int32_t np,
                                     const TrainTools& tools,
                                     const std::string& json_path) {
  TrainFlags t;
  static_cast<TimedJobFlags&>(t) = f;
  t.model = model;
  t.dataset = f.dataset;
  t.data_dir = f.data_dir;
  t.optimizer = f.optimizer;
  t.lr = f.lr;
  t.precision = f.precision;
  if (variant.framework == kKolo) {
    // Stage 0 explicitly too: a kolo-train without --zero-stage fails here
    // rather than measuring something else.
    t.kolo_train_args = {"--zero-stage", std::to_string(variant.zero_stage)};
  } else if (variant.zero_stage == 1) {
    t.ddp_args = {"--zero"};
  } else if (variant.zero_stage == 3) {
    t.ddp_args = {"--fsdp2"};
  }
  return TrainCommand(t, variant.framework, np, f.batch_size, tools, json_path);
}

StatusOr<ZeroMeasurement> ReadZeroMeasurement(const json& job,
                                              const std::string& output,
                                              const ZeroVariant& variant,
                                              int32_t np) {
  StatusOr<TrainResult> result = ReadTimedResult(job, output);
  if (!result.ok()) return result.status();
  ZeroMeasurement m;
  m.images_per_second = result->images_per_second;
  m.step_ms = *result->step_ms;
  if (!result->memory) {
    return JobError(
        output,
        "no result.memory (optimizer_state_bytes, gradient_bytes, "
        "master_weight_bytes per rank): does this kolo-train measure ZeRO's "
        "memory?");
  }
  const RankMemory& memory = *result->memory;
  struct PerRankFigure {
    const char* name;
    const std::optional<std::vector<int64_t>>& values;
    std::vector<int64_t>* out;
  };
  for (const PerRankFigure& figure :
       {PerRankFigure{"result.memory.optimizer_state_bytes",
                      memory.optimizer_state_bytes, &m.optimizer_state_bytes},
        PerRankFigure{"result.memory.gradient_bytes", memory.gradient_bytes,
                      &m.gradient_bytes},
        PerRankFigure{"result.memory.master_weight_bytes",
                      memory.master_weight_bytes, &m.master_weight_bytes},
        PerRankFigure{"result.peak_rss_bytes", result->peak_rss_bytes,
                      &m.peak_rss_bytes}}) {
    if (!figure.values)
      return JobError(output, fmt::format("no {}", figure.name));
    Status counted = CheckPerRank(*figure.values, figure.name, np);
    if (!counted.ok()) return JobError(output, counted.message());
    *figure.out = *figure.values;
  }
  const json& config = job.value("config", json::object());
  const auto stage = config.find("zero_stage");
  if (stage == config.end() || !stage->is_number_integer()) {
    return JobError(output, "no config.zero_stage in its JSON");
  }
  if (stage->get<int64_t>() != variant.zero_stage) {
    return JobError(output,
                    fmt::format("it ran ZeRO stage {}, not {}",
                                stage->get<int64_t>(), variant.zero_stage));
  }
  return m;
}

ZeroRow SummarizeZero(const std::string& model, int32_t np,
                      const std::string& variant,
                      const std::vector<ZeroMeasurement>& repeats) {
  ZeroRow row;
  row.model = model;
  row.np = np;
  row.variant = variant;
  using M = ZeroMeasurement;
  row.images_per_second = MedianOver(repeats, &M::images_per_second);
  row.step_ms = MedianOver(repeats, &M::step_ms);
  row.optimizer_state_bytes =
      MedianOfLargest(repeats, &M::optimizer_state_bytes);
  row.gradient_bytes = MedianOfLargest(repeats, &M::gradient_bytes);
  row.master_weight_bytes = MedianOfLargest(repeats, &M::master_weight_bytes);
  row.peak_rss_bytes = MedianOfLargest(repeats, &M::peak_rss_bytes);
  return row;
}

void CompareWithKoloDdp(std::vector<ZeroRow>* rows) {
  for (ZeroRow& row : *rows) {
    row.memory_fraction.reset();
    row.throughput_ratio.reset();
    const auto base =
        std::find_if(rows->begin(), rows->end(), [&](const ZeroRow& r) {
          return r.variant == kKoloDdp && r.model == row.model &&
                 r.np == row.np;
        });
    if (base == rows->end()) continue;
    const double base_memory =
        base->optimizer_state_bytes + base->gradient_bytes;
    if (base_memory > 0) {
      row.memory_fraction =
          (row.optimizer_state_bytes + row.gradient_bytes) / base_memory;
    }
    if (base->images_per_second > 0) {
      row.throughput_ratio = row.images_per_second / base->images_per_second;
    }
  }
}

Table ZeroTable() {
  return Table({TableColumn("model", "", 11, "", true),
                TableColumn("np", "", 3),
                TableColumn("variant", "", 11, "", true),
                TableColumn("images/s", "", 9), TableColumn("step", "(ms)", 8),
                TableColumn("opt state", "(MiB)", 9, "per rank, largest"),
                TableColumn("gradients", "(MiB)", 9, "per rank, largest"),
                TableColumn("state+grad", "÷ kolo-ddp", 10),
                TableColumn("peak RSS", "(MiB)", 8),
                TableColumn("images/s", "÷ kolo-ddp", 10)});
}

std::vector<std::string> ZeroCells(const ZeroRow& row) {
  return {
      row.model,
      std::to_string(row.np),
      row.variant,
      FormatFixed(row.images_per_second, row.images_per_second < 100 ? 1 : 0),
      FormatFixed(row.step_ms, 1),
      Mib(row.optimizer_state_bytes),
      Mib(row.gradient_bytes),
      Optional(row.memory_fraction, 3),
      FormatFixed(row.peak_rss_bytes / kMiB, 0),
      Optional(row.throughput_ratio, 2)};
}

CLI::App* AddZeroCommand(CLI::App& app, ZeroFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "zero",
      "ZeRO's memory and throughput: kolo's DistributedOptimizer (kolo-ddp), "
      "ZeRO stage 1 and 2 (kolo-zero1, kolo-zero2), PyTorch DDP with and "
      "without ZeroRedundancyOptimizer (torch-zero, torch-ddp) and FSDP2 "
      "(torch-fsdp2): per rank, the optimizer state and gradient bytes each "
      "job measures, its peak RSS, and images/s, against kolo-ddp at the "
      "same worker count. The torch variants' gradients are the .grad "
      "tensors (DDP's bucket copies are invisible from Python; FSDP2's are "
      "its local shards); kolo's include its communication buckets");
  AddModelsFlag(cmd, &f->models);
  AddNpFlag(cmd, &f->np);
  cmd->add_option("--variants", f->variants,
                  "kolo-ddp, kolo-zero1, kolo-zero2, torch-ddp, torch-zero, "
                  "torch-fsdp2 (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--optimizer", f->optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  cmd->add_option("--lr", f->lr, "learning rate of one worker")
      ->capture_default_str();
  cmd->add_option("--precision", f->precision,
                  "fp32, bf16 or fp16 (the torch variants: fp16 with a "
                  "torch 2.x)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  AddDatasetFlags(cmd, &f->dataset, &f->data_dir);
  cmd->add_option("--image-size", f->image_size,
                  "--dataset synthetic: the 3-channel images' height and width")
      ->capture_default_str();
  cmd->add_option("--batch-size", f->batch_size, "images per worker per step")
      ->capture_default_str();
  AddJobFlags(cmd, &f->threads, "worker", &f->warmup, &f->iters, &f->repeat,
              "jobs per configuration, interleaved (the table gives medians)");
  AddRecordFlag(cmd, &f->json_path);
  AddToolFlags(cmd, &f->kolorun, &f->kolo_train, &f->ddp_script, &f->python);
  return cmd;
}

namespace {

// One job: a variant of a model at a world size.
struct ZeroJob {
  std::string model;
  int32_t np;
  ZeroVariant variant;
};

std::string ZeroJobLabel(const ZeroJob& job) {
  return fmt::format("{} np {} {}", job.model, job.np, job.variant.name);
}

// What RunZero measures, decided before the first job: one repeat's jobs in
// order, and why the torch variants cannot run here, if they cannot.
struct ZeroPlan {
  std::vector<ZeroVariant> variants;
  std::vector<int32_t> nps;
  std::vector<std::string> models;
  TrainTools tools;
  TorchPeer peer;
  std::vector<ZeroJob> jobs;
};

StatusOr<ZeroPlan> PlanZero(const ZeroFlags& f) {
  ZeroPlan plan;
  KOLO_ASSIGN_OR_RETURN(plan.variants, ParseZeroVariants(f.variants));
  KOLO_ASSIGN_OR_RETURN(plan.nps, ParseNpList(f.np));
  KOLO_RETURN_IF_ERROR(Validate(f, plan.variants));
  plan.models = SplitList(f.models);
  KOLO_ASSIGN_OR_RETURN(plan.tools, FindTrainTools(f.kolorun, f.kolo_train,
                                                   f.ddp_script, f.python));
  for (const ZeroVariant& v : plan.variants) {
    if (v.framework != kTorchDdp) continue;
    const PeerPython& python =
        plan.peer.Probe(plan.tools.python, plan.tools.ddp_script);
    KOLO_RETURN_IF_ERROR(CheckPeerPrecision(f.precision, python, v.name));
  }
  for (const std::string& model : plan.models) {
    for (int32_t np : plan.nps) {
      for (const ZeroVariant& v : plan.variants) {
        if (v.framework == kTorchDdp && !plan.peer.missing().empty()) continue;
        plan.jobs.push_back({model, np, v});
      }
    }
  }
  return plan;
}

void PrintZeroHeader(const ZeroFlags& f) {
  fmt::print(
      "# kolo-bench zero: {}, lr {}, {}, {}, batch {} per worker, {} "
      "thread{} per worker, {} warm-up + {} timed steps, {} repeat{}\n",
      f.optimizer, f.lr, f.precision,
      f.dataset == "synthetic"
          ? fmt::format("synthetic 3x{}x{}", f.image_size, f.image_size)
          : f.dataset,
      f.batch_size, f.threads, f.threads == 1 ? "" : "s", f.warmup, f.iters,
      f.repeat, f.repeat == 1 ? "" : "s");
  std::fflush(stdout);
}

// Every repeat's measurements and JSON, by the index of the job in
// ZeroPlan::jobs.
struct ZeroResults {
  std::vector<std::vector<ZeroMeasurement>> measured;
  std::vector<json> runs;
};

// Job `i`'s record row, from its table row.
json ZeroRowJson(const ZeroPlan& plan, const ZeroResults& results, size_t i,
                 const ZeroRow& row) {
  const ZeroJob& job = plan.jobs[i];
  std::vector<double> rates;
  for (const ZeroMeasurement& m : results.measured[i]) {
    rates.push_back(m.images_per_second);
  }
  const ZeroMeasurement& last = results.measured[i].back();
  json r = {{"model", row.model},
            {"np", row.np},
            {"variant", row.variant},
            {"framework", job.variant.framework},
            {"torch_version", job.variant.framework == kTorchDdp
                                  ? JobTorchVersion(results.runs[i].front(),
                                                    plan.peer.torch_version())
                                  : KoloTorchVersion()},
            {"zero_stage", job.variant.zero_stage},
            {"images_per_second", rates},
            {"images_per_second_median", row.images_per_second},
            {"step_ms_median", row.step_ms},
            {"optimizer_state_bytes", row.optimizer_state_bytes},
            {"gradient_bytes", row.gradient_bytes},
            {"master_weight_bytes", row.master_weight_bytes},
            {"peak_rss_mib", row.peak_rss_bytes / kMiB},
            {"per_rank",
             {{"optimizer_state_bytes", last.optimizer_state_bytes},
              {"gradient_bytes", last.gradient_bytes},
              {"master_weight_bytes", last.master_weight_bytes},
              {"peak_rss_bytes", last.peak_rss_bytes}}},
            {"runs", results.runs[i]}};
  if (row.memory_fraction) r["memory_fraction"] = *row.memory_fraction;
  if (row.throughput_ratio) {
    r["images_per_second_ratio"] = *row.throughput_ratio;
  }
  return r;
}

// The table's closing lines: how the memory is counted, the torches, and
// the target where this run measured it.
void PrintZeroFooter(const ZeroPlan& plan, const std::vector<ZeroRow>& rows) {
  fmt::print(
      "# per rank: the rank holding the most; kolo's gradients include its "
      "communication buckets, torch's are the .grad tensors only (DDP's "
      "bucket copies are invisible from Python; FSDP2's are its shards)\n");
  fmt::print("{}\n", TorchVersionsLine(plan.peer.python()));
  // The target, where this run measured it.
  for (const ZeroRow& row : rows) {
    if (row.variant == "kolo-zero2" && row.np == 4 && row.memory_fraction) {
      fmt::print(
          "# {} at np 4: kolo-zero2 holds {:.3f} of kolo-ddp's optimizer "
          "state + gradients per rank (target at most 1/3: {})\n",
          row.model, *row.memory_fraction,
          *row.memory_fraction <= 1.0 / 3.0 ? "met" : "not met");
    }
  }
  std::fflush(stdout);
}

}  // namespace

StatusOr<json> RunZero(const ZeroFlags& f) {
  KOLO_ASSIGN_OR_RETURN(const ZeroPlan plan, PlanZero(f));
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch, ScratchDir::Create("zero"));
  PrintZeroHeader(f);
  ZeroResults results{
      std::vector<std::vector<ZeroMeasurement>>(plan.jobs.size()),
      std::vector<json>(plan.jobs.size(), json::array())};
  std::vector<std::string> labels;
  for (const ZeroJob& job : plan.jobs) labels.push_back(ZeroJobLabel(job));
  KOLO_RETURN_IF_ERROR(RunRepeats(
      labels, f.repeat, [&](size_t i, int32_t repeat) -> StatusOr<std::string> {
        const ZeroJob& job = plan.jobs[i];
        const fs::path json_path = scratch / "result.json";
        KOLO_ASSIGN_OR_RETURN(
            JobOutput out,
            RunJob(ZeroCommand(f, job.variant, job.model, job.np, plan.tools,
                               json_path.string()),
                   json_path.string(), (scratch / "log.txt").string()));
        KOLO_ASSIGN_OR_RETURN(
            ZeroMeasurement m,
            ReadZeroMeasurement(out.json, out.output, job.variant, job.np));
        std::string line = fmt::format(
            "#   repeat {}: {:<28} {:>8.1f} images/s, optimizer state {} "
            "MiB, gradients {} MiB (largest rank)",
            repeat + 1, labels[i], m.images_per_second,
            Mib(Largest(m.optimizer_state_bytes)),
            Mib(Largest(m.gradient_bytes)));
        results.measured[i].push_back(std::move(m));
        results.runs[i].push_back(std::move(out.json));
        return line;
      }));

  // One repeat's jobs, in order, are the table's rows.
  std::vector<ZeroRow> rows;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const ZeroJob& job = plan.jobs[i];
    rows.push_back(SummarizeZero(job.model, job.np, job.variant.name,
                                 results.measured[i]));
  }
  CompareWithKoloDdp(&rows);
  const Table table = ZeroTable();
  PrintHeader(table);
  json out_rows = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    fmt::print("{}\n", table.Row(ZeroCells(rows[i])));
    out_rows.push_back(ZeroRowJson(plan, results, i, rows[i]));
  }
  if (!plan.peer.missing().empty()) {
    for (const ZeroVariant& v : plan.variants) {
      if (v.framework != kTorchDdp) continue;
      fmt::print("{}\n", table.Row({"-", "-", v.name, plan.peer.missing()}));
      out_rows.push_back({{"variant", v.name},
                          {"framework", v.framework},
                          {"missing", plan.peer.missing()}});
    }
  }
  PrintZeroFooter(plan, rows);
  json record = {{"benchmark", "zero"},
                 {"tool", "kolo-bench zero"},
                 {"config",
                  {{"models", plan.models},
                   {"np", plan.nps},
                   {"variants", SplitList(f.variants)},
                   {"optimizer", f.optimizer},
                   {"lr", f.lr},
                   {"precision", f.precision},
                   {"dataset", f.dataset}}},
                 {"environment", RunEnvironment(plan.peer.python())},
                 {"rows", out_rows}};
  record["config"].update(TimedJobConfig(f));
  return FinishRecord(std::move(record), f.json_path);
}

}  // namespace kolo::bench
