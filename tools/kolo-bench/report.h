// kolo-bench report: one self-contained HTML page drawn from the JSON that
// `kolo-bench train --json`, `kolo-bench collectives --json` and
// `kolo-bench zero --json` write.
//
//   kolo-bench report train.json collectives.json [-o report.html]
//
// Reading. Each file holds one record or an array of them (the benchmarks
// append). A record is a training record (tool "kolo-bench train"), a
// collectives record (benchmark "collectives"), a ZeRO record (benchmark
// "zero") or a pipeline record (benchmark "pipeline"); anything else in a
// file (a fusion run, a hand-written note) is passed over, but a file with no
// record of either kind is an error, as are a missing file and a file that
// is not JSON. Optional fields (a study name, test accuracy, wall time,
// epochs; raw-engine peers and a memcpy line beside collectives) are used
// when present.
//
// Merging. Records are taken in the order given, files first to last and
// each array from its start, so a later figure replaces an earlier one for
// the same configuration, framework and worker count (training), or the
// same collective, type, world size, series and message size (collectives):
// re-running a benchmark into the same file updates the page; ZeRO figures
// are replaced per configuration, model, worker count and variant. Speedups,
// efficiencies and kolo's ratios are computed from the merged means, so
// they always agree with the figures beside them.
//
// The page. Sections for training throughput against workers, scaling
// efficiency against workers (with the ideal 100% line), test accuracy,
// and collective bus bandwidth against message size (log2 axis), each
// chart followed by a table of its figures and kolo's ratio to each peer;
// ZeRO's optimizer state plus gradients per rank, as bars per worker count
// and variant, with a table of its figures and their ratios to kolo-ddp;
// kolo-bench pipeline's measured bubble against micro-batches beside
// (p-1)/(m+p-1), with its throughput and per-rank memory tables (every
// pipeline record, in the order read); then the environments the figures were measured in. A section without
// data says so. Charts are inline SVG (svg_chart.h); the page has no
// script and no address, and is written atomically.
#ifndef KOLO_TOOLS_KOLO_BENCH_REPORT_H_
#define KOLO_TOOLS_KOLO_BENCH_REPORT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "svg_chart.h"

namespace kolo::bench {

// ---- What the result files hold, as the report needs it.

// One row of a training record: a framework at a worker count.
struct TrainRow {
  std::string framework;  // "kolo", "torch-ddp", "libtorch"
  int32_t np = 0;
  std::optional<int64_t> batch_per_worker;
  std::optional<double> images_per_second;  // mean over the repeats
  std::optional<double> images_per_second_ci95;
  std::optional<double> step_ms;
  std::optional<double> communication_ms_per_step;
  std::optional<double> peak_rss_mib;
  std::optional<double> test_accuracy;  // percent, 0 to 100
  std::optional<double> wall_seconds;
  std::optional<double> epochs;
};

// What makes two training figures comparable. Threads are part of it:
// figures at different LibTorch thread counts do not belong on one line.
struct TrainConfig {
  std::string study;  // empty unless a study preset produced the record
  std::string model;
  std::string dataset;
  int64_t batch_size = 0;
  std::string scaling;
  int32_t threads = 0;

  bool operator<(const TrainConfig& other) const;
  bool operator==(const TrainConfig& other) const;
  // "lenet on fashion-mnist, batch 128, weak scaling, 1 thread", with
  // "study: " before it when there is one.
  std::string Label() const;
};

struct TrainRecord {
  std::string source;  // the file it came from
  TrainConfig config;
  std::vector<TrainRow> rows;
  std::vector<std::pair<std::string, std::string>> missing;  // framework, why
  int environment = -1;  // index into Results::environments, -1: none
};

// One message size of one collective: the out-of-place bus bandwidth is
// the one plotted; the in-place one is tabled.
struct BandwidthRow {
  std::string collective;
  std::string type;
  int64_t bytes = 0;
  double busbw_gbps = 0;
  std::optional<double> in_place_busbw_gbps;
  int64_t wrong = 0;  // over both calls; 0 when unchecked
};

// kolo on one backend, or one engine called directly (a raw peer).
struct BandwidthRun {
  std::string name;  // "kolo gloo", "raw mpi"
  bool kolo = false;
  std::vector<BandwidthRow> rows;
};

struct CollectivesRecord {
  std::string source;
  int32_t np = 0;
  std::vector<BandwidthRun> runs;  // kolo first, then the peers
  std::vector<std::pair<int64_t, double>> memcpy_gbps;  // bytes, GB/s
  int environment = -1;
};

// One row of a kolo-bench zero record: a variant of a model at a worker
// count, the largest rank's figures.
struct ZeroReportRow {
  std::string model;
  int32_t np = 0;
  std::string variant;  // "kolo-ddp", "kolo-zero2", "torch-zero", ...
  std::optional<double> images_per_second;  // median over the repeats
  std::optional<double> step_ms;
  std::optional<double> optimizer_state_bytes;
  std::optional<double> gradient_bytes;
  std::optional<double> peak_rss_mib;
};

// What makes two ZeRO figures comparable.
struct ZeroBenchConfig {
  std::string optimizer;
  std::string precision;
  std::string dataset;
  int64_t image_size = 0;
  int64_t batch_size = 0;
  int32_t threads = 0;

  bool operator==(const ZeroBenchConfig& other) const;
  // "adam, fp32, synthetic 3x32x32, batch 32 per worker, 1 thread"
  std::string Label() const;
};

struct ZeroRecord {
  std::string source;
  ZeroBenchConfig config;
  std::vector<ZeroReportRow> rows;
  std::vector<std::pair<std::string, std::string>> missing;  // variant, why
  int environment = -1;
};

// A kolo-bench pipeline record ({"benchmark": "pipeline"}): its memory
// rows (one per model, stage count and rank) and throughput rows (one per
// stage count, micro-batch count and schedule), as the benchmark wrote
// them.
struct PipelineRecord {
  std::string source;
  nlohmann::json config;
  nlohmann::json memory_rows;      // an array
  nlohmann::json throughput_rows;  // an array
  int environment = -1;
};

// A kolo-bench checkpoint record ({"benchmark": "checkpoint"}): its rows
// (one per model, variant, save np and load np, or a variant that could
// not run), as the benchmark wrote them.
struct CheckpointRecord {
  std::string source;
  nlohmann::json rows;  // an array
  int environment = -1;
};

// A machine the figures were measured on, and the files that say so.
struct Environment {
  nlohmann::json fields;  // cpu_model, cores, kernel, kolo_commit, ...
  std::vector<std::string> sources;
};

struct Results {
  std::vector<std::string> sources;
  std::vector<TrainRecord> train;
  std::vector<CollectivesRecord> collectives;
  std::vector<ZeroRecord> zero;
  std::vector<PipelineRecord> pipeline;
  std::vector<CheckpointRecord> checkpoint;
  std::vector<Environment> environments;  // distinct, as first seen
};

// Adds the records in `value` (one record or an array) to `results`.
// kInvalidArgument naming `source` when none is recognised.
Status AddResults(const nlohmann::json& value, const std::string& source,
                  Results* results);
// Reads every file in order. Errors name the file: missing, not a regular
// file, not JSON (with the parser's position), or no records.
StatusOr<Results> ReadResults(const std::vector<std::string>& paths);

// ---- The figures the page shows, merged across records.

// One training configuration: the latest row for each framework and worker
// count, and the frameworks a run could not measure.
struct TrainConfigView {
  TrainConfig config;
  // framework -> np -> row; frameworks in FrameworkLess order.
  std::vector<std::pair<std::string, std::map<int32_t, TrainRow>>> frameworks;
  std::map<std::string, std::string> missing;
  std::vector<int> environments;
};

// kolo first, then torch-ddp, libtorch, then any other by name.
bool FrameworkLess(const std::string& a, const std::string& b);

std::vector<TrainConfigView> GroupTrain(const Results& results);

// Images/s against workers, one series per framework.
std::vector<ChartSeries> ThroughputSeries(const TrainConfigView& view);
// Efficiency in percent (images/s at np over np times images/s at np 1,
// same framework) for frameworks measured at np 1 and at least one more
// count; empty when there is none.
std::vector<ChartSeries> EfficiencySeries(const TrainConfigView& view);

// One bandwidth chart: a collective in one type at one world size.
struct BandwidthView {
  std::string collective;
  std::string type;
  int32_t np = 0;
  // series name -> bytes -> busbw; kolo's series first, then raw peers.
  std::vector<std::pair<std::string, std::map<int64_t, double>>> series;
  std::vector<bool> kolo;  // per series
  std::map<int64_t, double> memcpy_gbps;
  int64_t wrong = 0;
};

std::vector<BandwidthView> GroupCollectives(const Results& results);

// One ZeRO configuration: the latest row for each model, worker count and
// variant, ordered by model, then worker count, then variant (kolo-ddp,
// kolo-zero1, kolo-zero2, torch-ddp, torch-zero, then others by name).
struct ZeroView {
  ZeroBenchConfig config;
  std::vector<ZeroReportRow> rows;
  std::map<std::string, std::string> missing;  // variant -> why
  std::vector<int> environments;
};

std::vector<ZeroView> GroupZero(const Results& results);

// A row's (optimizer state + gradients) over the kolo-ddp row's of the same
// model and worker count in `view`, and its images/s over kolo-ddp's; empty
// without a kolo-ddp row or a figure.
std::optional<double> ZeroMemoryFraction(const ZeroView& view,
                                         const ZeroReportRow& row);
std::optional<double> ZeroThroughputRatio(const ZeroView& view,
                                          const ZeroReportRow& row);

// The whole page.
std::string RenderReport(const Results& results);

// ---- The subcommand.

struct ReportFlags {
  std::vector<std::string> inputs;
  std::string output = "report.html";
};

CLI::App* AddReportCommand(CLI::App& app, ReportFlags* flags);
// 0 when the page was written; 1 with "kolo-bench report: <error>".
int RunReportCommand(const ReportFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_REPORT_H_
