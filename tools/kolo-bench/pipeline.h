// kolo-bench pipeline: what cutting a model into pipeline stages saves per
// rank, and what the GPipe and 1F1B schedules cost in throughput and idle
// time at each number of micro-batches.
//
//   kolo-bench pipeline [--memory-models vgg16,resnet50] [--memory-stages
//       1,2,4] [--model vgg16] [--stages 2,4] [--micro-batches 1,2,4,8]
//       [--schedules gpipe,1f1b] [--batch-size 32] [--image-size 32]
//       [--warmup 1] [--iters 3] [--repeat 3] [--peer torch-pipelining]
//       [--python PYTHON] [--json FILE] [--quick]
//
// Every measurement is a job started the way a user would, kolo-bench
// train's TrainCommand plus the pipeline's flags:
//
//   kolorun -np P kolo-train --benchmark-steps I --pipeline-stages P
//       --micro-batches M --schedule gpipe|1f1b ...
//
// with P = 1 run as plain `kolorun -np 1 kolo-train` (the unsplit model,
// no pipeline flags), so the memory table's first row is what one process
// needs for the whole model.
//
// The torch-pipelining peer (--peer, on by default) runs each throughput
// configuration right after kolo's, as PyTorch's own pipeline parallelism
// (torch.distributed.pipelining's ScheduleGPipe and Schedule1F1B, torch 2.4
// and later) in the project's Python (peer_python.h):
//
//   PYTHON bench/peers/torch_pipeline.py --stages P --micro-batches M
//       --schedule gpipe|1f1b --split S ...
//
// the same model laid out as kolo's layer sequence and cut where kolo-train
// cut it (S: the split kolo's job of the same repeat reported), the same
// batch, micro-batches, optimizer and timing window. Its bubble is the time
// each stage spent in the schedules' waits for receives and sends, as
// kolo's; it reports no activation counts. Each torch row gives kolo's
// images/s over its own; the table's last line names both torches.
//
// Memory (per model, per stage count, one row per rank = stage): the
// parameter bytes and optimizer state bytes each rank holds, the most
// micro-batches whose activations it held at once (and their bytes where
// kolo-train reports them), and the rank's peak RSS: the operating
// system's high-water mark of its resident memory (getrusage's ru_maxrss,
// which kolo-train gathers from every rank as result.peak_rss_bytes). RSS
// is the honest measure of what a rank needs: it includes LibTorch's own
// footprint (about 300 MiB on this machine, the same in every row) and the
// allocator's slack, which the parameter and state columns do not.
//
// Throughput (one model; per stage count, micro-batch count and schedule):
// images/s over the timed steps (median over the repeats), the step time,
// and the bubble: the fraction of its step time a stage spent waiting
// (receives, sends) rather than computing, from the pipeline's statistics
// (PipelineStatistics::BubbleFraction, kolo/torch_pipeline.h), averaged
// over the stages, beside the ideal schedule's (p - 1) / (m + p - 1) for
// stages of equal cost and free transfers. With more stages than cores the
// stages also wait for a core, which shows up as compute, not as bubble.
//
// Checks: a job that fails, whose JSON lacks images/s or per-rank peak RSS,
// that ran another pipeline than the one asked for, or whose bubble is not
// in [0, 1] is an error quoting the job's output, and kolo-bench exits 1.
//
// --json FILE appends one record ({"benchmark": "pipeline", ...}: the
// configuration, the environment, the memory rows, the throughput rows,
// every job's JSON) for kolo-bench report. --quick runs lenet on tiny
// sizes, for tests: it proves the plumbing, not the figures.
#ifndef KOLO_TOOLS_KOLO_BENCH_PIPELINE_H_
#define KOLO_TOOLS_KOLO_BENCH_PIPELINE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "table.h"
#include "train.h"

namespace kolo::bench {

// Both tables' jobs: batch_size images per pipeline per step, synthetic
// 3 x image_size x image_size images.
struct PipelineFlags : TimedJobFlags {
  PipelineFlags() {
    warmup = 1;
    iters = 3;
  }
  // Memory.
  std::string memory_models = "vgg16";
  std::string memory_stages = "1,2,4";
  std::string memory_schedule = "1f1b";
  int64_t memory_micro_batches = 4;
  // Throughput.
  std::string model = "vgg16";
  std::string stages = "2,4";
  std::string micro_batches = "1,2,4,8";
  std::string schedules = "gpipe,1f1b";
  // Both. How kolo-train splits the layers: "parameters" or "time".
  std::string balance = "parameters";
  bool quick = false;
  std::string peers = "torch-pipelining";  // empty: kolo alone
  std::string json_path;
  std::string kolorun;     // empty: found next to kolo-bench
  std::string kolo_train;  // empty: found next to kolo-bench
  std::string python;      // empty: FindPython's default (peer_python.h)
};

inline constexpr const char* kTorchPipelining = "torch-pipelining";

// One job: `model` cut into `stages` (1: unsplit, no pipeline flags) with
// `micro_batches` micro-batches on `schedule`, by kolo or the torch peer.
struct PipelineJob {
  std::string model;
  int32_t stages = 1;
  int32_t micro_batches = 1;
  std::string schedule;            // "gpipe" or "1f1b"; empty when stages == 1
  std::string framework = "kolo";  // or kTorchPipelining
};

// "vgg16 p 2 m 4 1f1b", "vgg16 unsplit", "vgg16 p 2 m 4 1f1b
// torch-pipelining"
std::string PipelineJobLabel(const PipelineJob& job);

// The --peer list: empty or torch-pipelining; kInvalidArgument naming
// --peer and the first other item.
StatusOr<std::vector<std::string>> ParsePipelinePeers(const std::string& text);

// The command line of kolo's `job`, writing its JSON to `json_path`.
std::vector<std::string> PipelineCommand(const PipelineFlags& flags,
                                         const PipelineJob& job,
                                         const TrainTools& tools,
                                         const std::string& json_path);

// The torch-pipelining peer's command line for `job`: `python` running
// `script` (torch_pipeline.py), cut into `split` layers per stage (kolo's
// cut; empty: the script balances by parameters as kolo-train does).
std::vector<std::string> PipelinePeerCommand(const PipelineFlags& flags,
                                             const PipelineJob& job,
                                             const std::string& python,
                                             const std::string& script,
                                             const std::vector<int64_t>& split,
                                             const std::string& json_path);

// What one job measured; per-rank vectors have one entry per stage, empty
// where kolo-train did not report the figure.
struct PipelineMeasurement {
  double images_per_second = 0;
  double step_ms = 0;
  std::vector<int64_t> peak_rss_bytes;
  std::vector<int64_t> parameter_bytes;
  std::vector<int64_t> optimizer_state_bytes;
  std::vector<int64_t> peak_activations;  // micro-batches
  std::vector<int64_t> peak_activation_bytes;
  std::vector<double> busy_seconds;
  std::vector<double> idle_seconds;
};

// Reads one job's JSON. kInternal naming the field and quoting the end of
// `output` when images/s, step_ms or per-rank peak RSS is missing, when a
// pipelined job's config says other stages, micro-batches or schedule than
// `job`, or lacks busy and idle seconds per stage, or when a figure is
// negative.
StatusOr<PipelineMeasurement> ReadPipelineMeasurement(
    const nlohmann::json& result_json, const std::string& output,
    const PipelineJob& job);

// The ideal bubble, (p - 1) / (m + p - 1).
double IdealBubble(int32_t stages, int32_t micro_batches);

// Idle over busy + idle for each stage; 0 for a stage that did neither.
std::vector<double> StageBubbles(const PipelineMeasurement& m);

// One throughput row: medians over the repeats.
struct PipelineThroughputRow {
  PipelineJob job;
  double images_per_second = 0;
  double step_ms = 0;
  double bubble = 0;  // mean over the stages
  double bubble_max = 0;
  double ideal_bubble = 0;
  int64_t peak_activations = 0;  // the most any stage held
  double peak_rss_bytes = 0;     // the largest rank's
};
PipelineThroughputRow SummarizePipelineThroughput(
    const PipelineJob& job, const std::vector<PipelineMeasurement>& repeats);

Table PipelineMemoryTable();
Table PipelineThroughputTable();

CLI::App* AddPipelineCommand(CLI::App& app, PipelineFlags* flags);

// What `kolo-bench pipeline` runs: every job, both tables, the record
// appended to flags.json_path (when set), which it returns.
StatusOr<nlohmann::json> RunPipeline(const PipelineFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_PIPELINE_H_
