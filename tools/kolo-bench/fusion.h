// kolo-bench fusion: what the runtime's tensor fusion and response cache buy
// on a realistic gradient set, the 161 parameter tensors of ResNet-50
// (torchvision's layout, 25,557,032 floats, about 102 MB).
//
// A step is what data-parallel training does after backprop: every rank
// allreduces every gradient, in reverse parameter order (the order backprop
// produces them), and waits for all of them. Each mode runs the same steps a
// different way:
//
//   runtime             EnqueueAllreduce (average) per tensor under stable
//                       names, then wait on every handle; fusion and cache
//                       as the job was started (the defaults unless
//                       KOLO_FUSION_THRESHOLD or KOLO_CACHE_CAPACITY is set)
//   no-fusion-no-cache  the same with KOLO_FUSION_THRESHOLD=0 (every tensor
//                       its own engine call) and KOLO_CACHE_CAPACITY=0
//                       (every tensor negotiated by its full spec)
//   raw                 no runtime: one Backend::Allreduce per tensor on a
//                       backend of the bench's own, of the job's kind, run
//                       after kolo::Shutdown() so no runtime thread is
//                       about. It sums instead of averaging (a backend
//                       never averages); the division is one pass over the
//                       data and does not change what is being compared.
//
// Settings are fixed when the runtime starts, so every mode of every repeat
// gets a fresh one: every rank sets the variables, calls kolo::Init(), runs
// the warmup and timed steps and calls kolo::Shutdown(), all in the same
// order, so the ranks' settings agree. Repeats cycle through all modes in
// turn, so drift on a noisy machine spreads over every mode alike.
//
// Timing. Before each step the ranks fill their gradients and meet at a
// barrier (neither is timed); a step's time is the slowest rank's, since the
// step is not done until every rank is. The table reports the median and
// range over every timed step of every repeat. The runtime's counters
// (engine calls, cache hits) are read as differences of GetRuntimeStats()
// around each timed step, after the runtime has published the step's tick.
//
// Checking. Rank r fills tensor i before step s with Base(i, s) + r, where
// Base is 1..8; the average is then Base + (n-1)/2 and the sum n * Base +
// n(n-1)/2, both exact in float32. Every element of every step is compared;
// a wrong value makes the command exit 2.
#ifndef KOLO_TOOLS_KOLO_BENCH_FUSION_H_
#define KOLO_TOOLS_KOLO_BENCH_FUSION_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/kolo.h"
#include "statistics.h"
#include "table.h"

namespace kolo::bench {

// One parameter of a model, named the way torchvision's state_dict names it.
struct ParameterShape {
  std::string name;  // "layer1.0.conv1.weight"
  std::vector<int64_t> dims;

  int64_t Elements() const;
};

// ResNet-50's parameters in definition order: the stem (conv1, bn1), four
// stages of [3, 4, 6, 3] bottlenecks (1x1, 3x3, 1x1 convolutions with a
// batch norm after each; widths 64, 128, 256, 512, expansion 4; the first
// block of each stage adds a 1x1 convolution and batch norm on its
// shortcut), then fc. Batch norms contribute weight and bias (their running
// statistics are buffers, not parameters); convolutions have no bias.
std::vector<ParameterShape> ResNet50Parameters();

// How a mode moves the gradients.
enum class FusionEngine : int32_t { kRuntime = 0, kRawBackend };

struct FusionMode {
  const char* name;
  FusionEngine engine;
  // KOLO_FUSION_THRESHOLD and KOLO_CACHE_CAPACITY for this mode's runtime;
  // nullptr keeps the value the job was started with.
  const char* fusion_threshold;
  const char* cache_capacity;
  ReduceOp op;
};

// runtime, no-fusion-no-cache, raw, runtime-sum, raw-sum; the first is the
// ratios' baseline.
const std::vector<FusionMode>& AllFusionModes();

// The value rank `rank` puts in every element of tensor `tensor` before
// step `step`, and the value every rank must find there after the step.
float FusionInput(int64_t tensor, int64_t step, int32_t rank);
float FusionExpected(ReduceOp op, int64_t tensor, int64_t step,
                     int32_t world_size);

// Every tensor of a model in one contiguous buffer.
class GradientBuffer {
 public:
  explicit GradientBuffer(std::vector<ParameterShape> shapes);

  const std::vector<ParameterShape>& shapes() const { return shapes_; }
  size_t size() const { return shapes_.size(); }
  int64_t elements() const { return static_cast<int64_t>(data_.size()); }
  float* tensor(size_t i) { return data_.data() + offsets_[i]; }
  const float* tensor(size_t i) const { return data_.data() + offsets_[i]; }
  int64_t count(size_t i) const { return shapes_[i].Elements(); }

  // Writes FusionInput into every tensor.
  void Fill(int64_t step, int32_t rank);
  // How many elements differ from FusionExpected.
  int64_t CountWrong(ReduceOp op, int64_t step, int32_t world_size) const;

 private:
  std::vector<ParameterShape> shapes_;
  std::vector<int64_t> offsets_;
  std::vector<float> data_;
};

// Flags exactly as typed; ParseFusionFlags validates them.
struct FusionFlags {
  int32_t steps = 10;
  int32_t warmup = 2;
  int32_t repeat = 3;
  std::string json_path;
};

// Errors name the flag and its bad value.
Status ParseFusionFlags(const FusionFlags& flags);

// What one mode measured over every repeat.
struct ModeResult {
  const FusionMode* mode = nullptr;
  // The settings its runtime ran with ("134217728", "0"); empty for raw.
  std::string fusion_threshold;
  std::string cache_capacity;
  // Slowest rank's seconds per timed step, one vector per repeat.
  std::vector<std::vector<double>> step_seconds;
  // Summed over the timed steps: engine calls that moved gradients, and the
  // runtime's cache hits (every rank's announcements; empty for raw).
  int64_t collectives = 0;
  std::optional<int64_t> cache_hits;
  int64_t wrong = 0;  // summed over ranks, steps and repeats
  // The runtime's accounting summed over the timed steps, each the mean
  // over ranks: ticks, seconds in the readiness exchange and in engine
  // calls (all zero for raw).
  double cycles = 0;
  double negotiation_seconds = 0;
  double engine_seconds = 0;
  double enqueue_seconds = 0;  // in the runner's enqueue calls

  int64_t TimedSteps() const;
  Spread StepMilliseconds() const;
  double MeanStepMilliseconds() const;
};

// The raw mode that reduces as `runtime` does (raw for runtime, raw-sum for
// runtime-sum), or nullptr.
const ModeResult* RawPeerOf(const ModeResult& runtime,
                            const std::vector<ModeResult>& results);

// Where a runtime mode's step goes: ticks, enqueue, negotiate, engine and rest per
// step, and its median step over its raw peer's (n/a without one).
Table BreakdownTable();
std::vector<std::string> BreakdownRowCells(const ModeResult& runtime,
                                           const ModeResult* raw);

// The result table's columns, and one mode's cells under them; the ratio
// divides this mode's median by `baseline_median_ms`.
Table FusionTable();
std::vector<std::string> FusionRowCells(const ModeResult& result,
                                        double baseline_median_ms);

// The configuration and every mode, for --json.
nlohmann::json FusionResultsToJson(const FusionFlags& flags,
                                   BackendKind backend, int32_t world_size,
                                   const GradientBuffer& gradients,
                                   const std::vector<ModeResult>& results);

// Registers `fusion` and its flags under `parent`; the flags land in
// `flags`, which must outlive parsing.
CLI::App* AddFusionCommand(CLI::App& parent, FusionFlags* flags);
// Runs every mode (each with its own kolo::Init and Shutdown), prints on
// rank 0. Returns the process exit status: 0 when every value was right, 1
// on a kolo error (printed as "kolo-bench: <status>"), 2 on wrong values.
int RunFusionCommand(const FusionFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_FUSION_H_
