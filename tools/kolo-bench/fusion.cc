#include "fusion.h"
#include "bench_common.h"
#include "json_file.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "kolo/runtime.h"
#include "kolo_internal/backend.h"
#include "kolo_internal/config.h"
#include "raw_backend.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

// ---- ResNet-50 --------------------------------------------------------------

void AddConv(std::vector<ParameterShape>* params, const std::string& name,
             int64_t out_channels, int64_t in_channels, int64_t kernel) {
  params->push_back(
      {name + ".weight", {out_channels, in_channels, kernel, kernel}});
}

void AddBatchNorm(std::vector<ParameterShape>* params, const std::string& name,
                  int64_t channels) {
  params->push_back({name + ".weight", {channels}});
  params->push_back({name + ".bias", {channels}});
}

// ---- Steps ------------------------------------------------------------------

// 1..8, shifted by the step so that a step that writes nothing leaves the
// previous step's values, which are wrong for this one.
int64_t Base(int64_t tensor, int64_t step) { return (tensor + step) % 8 + 1; }

struct StepCounters {
  int64_t collectives = 0;
  std::optional<int64_t> cache_hits;  // empty without a runtime
  // The runtime's own accounting (RuntimeStats); zero without a runtime.
  int64_t cycles = 0;
  double negotiation_seconds = 0;
  double engine_seconds = 0;
  double enqueue_seconds = 0;  // in the runner's enqueue calls
};

// One way of running a step. Every rank makes the same calls in the same
// order; Step allreduces every tensor of the buffer in place, last to first.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual Status Barrier() = 0;
  virtual Status Step(GradientBuffer* gradients) = 0;
  // Counters since the runner started, including every completed call.
  virtual StatusOr<StepCounters> Counters() = 0;
  // In place, for the bench's own results (step times, wrong values),
  // outside the timed steps.
  virtual Status AllreduceResults(void* data, int64_t count, DataType type,
                                  ReduceOp op) = 0;
};

// Through kolo's runtime: enqueue everything, then wait for everything, as
// a framework adapter does with the gradients of one backward pass.
class RuntimeRunner : public StepRunner {
 public:
  RuntimeRunner(const GradientBuffer& gradients, ReduceOp op) : op_(op) {
    for (const ParameterShape& shape : gradients.shapes()) {
      names_.push_back(shape.name + ".grad");
    }
  }

  Status Barrier() override {
    ++operations_;
    return ::kolo::Barrier();
  }

  Status Step(GradientBuffer* gradients) override {
    handles_.clear();
    const Clock::time_point began = Clock::now();
    for (size_t i = gradients->size(); i-- > 0;) {
      StatusOr<Handle> handle = EnqueueAllreduce(
          names_[i], gradients->tensor(i), gradients->tensor(i),
          gradients->count(i), DataType::kFloat32, op_);
      if (!handle.ok()) {
        return handle.status().WithContext("enqueueing " + names_[i]);
      }
      handles_.push_back(std::move(handle).value());
    }
    enqueue_seconds_ +=
        std::chrono::duration<double>(Clock::now() - began).count();
    operations_ += static_cast<int64_t>(gradients->size());
    for (const Handle& handle : handles_) {
      Status done = handle.Wait();
      if (!done.ok()) return done.WithContext("allreduce of " + handle.name());
    }
    return Status::Ok();
  }

  // The runtime completes handles before its tick publishes the tick's
  // statistics, so wait until they count every operation this runner
  // completed (the runtime is fresh: nothing else ran on it).
  StatusOr<StepCounters> Counters() override {
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      const RuntimeStats stats = GetRuntimeStats();
      if (stats.operations >= operations_) {
        StepCounters counters;
        counters.collectives = stats.collectives;
        counters.cache_hits = stats.cache_hits;
        counters.cycles = stats.cycles;
        counters.negotiation_seconds = stats.negotiation_seconds;
        counters.engine_seconds = stats.collective_seconds;
        counters.enqueue_seconds = enqueue_seconds_;
        return counters;
      }
      if (Clock::now() > deadline) {
        return Internal(fmt::format(
            "the runtime's statistics count {} completed operations after 30 "
            "s, expected {}",
            stats.operations, operations_));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Status AllreduceResults(void* data, int64_t count, DataType type,
                          ReduceOp op) override {
    return Allreduce(data, data, count, type, op);
  }

 private:
  const ReduceOp op_;
  std::vector<std::string> names_;  // stable across steps, so cacheable
  std::vector<Handle> handles_;
  int64_t operations_ = 0;  // completed through this runner
  double enqueue_seconds_ = 0;
};

// Straight to a backend, one call per tensor: what the runtime's
// negotiation, fusion copies and completion cost on top of the engine. An
// average is the engine's own (Backend::AllreduceAndDivide), as the
// runtime's lone tensors use it. It needs neither kolo nor the store once
// built.
class RawRunner : public StepRunner {
 public:
  // `backend` may be null only in a one-rank world, where the sum of one
  // rank is its own data; `owned` (may be null) is released with the runner.
  // `world_size` divides an average: the runner runs after Shutdown(),
  // when kolo reports a one-rank world.
  RawRunner(Backend* backend, std::unique_ptr<Backend> owned, ReduceOp op,
            int32_t world_size)
      : backend_(backend),
        owned_(std::move(owned)),
        op_(op),
        world_size_(world_size) {}

  Status Barrier() override {
    return backend_ ? backend_->Barrier() : Status::Ok();
  }

  Status Step(GradientBuffer* gradients) override {
    if (backend_ == nullptr) return Status::Ok();
    for (size_t i = gradients->size(); i-- > 0;) {
      float* tensor = gradients->tensor(i);
      const int64_t count = gradients->count(i);
      Status done =
          op_ == ReduceOp::kAverage
              ? backend_->AllreduceAndDivide(tensor, tensor, count,
                                             DataType::kFloat32, world_size_)
              : backend_->Allreduce(tensor, tensor, count, DataType::kFloat32,
                                    op_);
      ++calls_;
      if (!done.ok()) {
        return done.WithContext("raw allreduce of " +
                                gradients->shapes()[i].name);
      }
    }
    return Status::Ok();
  }

  StatusOr<StepCounters> Counters() override {
    StepCounters counters;
    counters.collectives = calls_;
    return counters;
  }

  Status AllreduceResults(void* data, int64_t count, DataType type,
                          ReduceOp op) override {
    if (backend_ == nullptr || count == 0) return Status::Ok();
    return backend_->Allreduce(data, data, count, type, op);
  }

 private:
  Backend* const backend_;
  std::unique_ptr<Backend> owned_;
  const ReduceOp op_;
  const int32_t world_size_;
  int64_t calls_ = 0;
};

// The backends the raw mode runs on, kept across modes.
struct RawBackends {
  // Under the mpi backend in a multi-rank world: created before the first
  // kolo::Init() (see raw_backend.h).
  std::unique_ptr<Backend> mpi;
  // Gloo or shm backends created so far; each gets its own store namespace.
  int32_t gloo_created = 0;
};

// A raw runner over this job's kind of backend; kolo must be initialized.
StatusOr<std::unique_ptr<StepRunner>> MakeRawRunner(const FusionMode& mode,
                                                    RawBackends* raw) {
  if (Size() == 1) {
    return std::unique_ptr<StepRunner>(
        new RawRunner(nullptr, nullptr, mode.op, 1));
  }
  if (ActiveBackend() == BackendKind::kMpi) {
    if (!raw->mpi) return Internal("the raw mode has no MPI backend");
    return std::unique_ptr<StepRunner>(
        new RawRunner(raw->mpi.get(), nullptr, mode.op, Size()));
  }
  StatusOr<std::unique_ptr<Backend>> backend = CreateRawStoreBackend(
      ActiveBackend(), fmt::format("bench/raw{}", raw->gloo_created++));
  if (!backend.ok()) return backend.status().WithContext("raw mode");
  Backend* engine = backend->get();
  return std::unique_ptr<StepRunner>(
      new RawRunner(engine, std::move(backend).value(), mode.op, Size()));
}

StatusOr<std::unique_ptr<StepRunner>> MakeRunner(
    const FusionMode& mode, const GradientBuffer& gradients, RawBackends* raw) {
  switch (mode.engine) {
    case FusionEngine::kRuntime:
      return std::unique_ptr<StepRunner>(new RuntimeRunner(gradients, mode.op));
    case FusionEngine::kRawBackend: return MakeRawRunner(mode, raw);
  }
  return Internal(fmt::format("mode {} has no engine", mode.name));
}

// ---- Settings ---------------------------------------------------------------

// The options each mode starts kolo with: the job's own (from the
// environment), with the mode's fusion threshold and cache capacity where
// it sets them. The modes that do not keep the job's.
StatusOr<InitOptions> ModeOptions(const FusionMode& mode,
                                  const InitOptions& job) {
  InitOptions options = job;
  if (mode.fusion_threshold) {
    KOLO_ASSIGN_OR_RETURN(
        options.runtime.fusion_threshold_bytes,
        ParseByteSize(mode.fusion_threshold, "fusion threshold"));
  }
  if (mode.cache_capacity) {
    KOLO_ASSIGN_OR_RETURN(
        int64_t capacity,
        ParseInt(mode.cache_capacity, 0, 1 << 20, "cache capacity"));
    options.runtime.cache_capacity = static_cast<int32_t>(capacity);
  }
  return options;
}

// ---- Running ----------------------------------------------------------------

// Where this process sits, captured while kolo is initialized (World()
// reports a one-rank world after Shutdown()).
struct Job {
  int32_t rank = 0;
  int32_t size = 1;
  BackendKind backend = BackendKind::kGloo;
};

// One repeat of one mode: warmup and timed steps, each checked. Appends the
// slowest rank's step times and the counters.
Status RunRepeat(const FusionMode& mode, const FusionFlags& flags,
                 const Job& job, StepRunner* runner, GradientBuffer* gradients,
                 ModeResult* result) {
  std::vector<double> seconds;
  int64_t wrong = 0;
  // This rank's runtime accounting over the timed steps: ticks, then
  // negotiation, engine and enqueue seconds.
  double breakdown[4] = {0, 0, 0, 0};
  for (int32_t step = 0; step < flags.warmup + flags.steps; ++step) {
    gradients->Fill(step, job.rank);
    KOLO_RETURN_IF_ERROR(runner->Barrier());
    KOLO_ASSIGN_OR_RETURN(StepCounters before, runner->Counters());
    const Clock::time_point start = Clock::now();
    KOLO_RETURN_IF_ERROR(runner->Step(gradients));
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    KOLO_ASSIGN_OR_RETURN(StepCounters after, runner->Counters());
    wrong += gradients->CountWrong(mode.op, step, job.size);
    if (step < flags.warmup) continue;
    seconds.push_back(elapsed);
    result->collectives += after.collectives - before.collectives;
    breakdown[0] += static_cast<double>(after.cycles - before.cycles);
    breakdown[1] += after.negotiation_seconds - before.negotiation_seconds;
    breakdown[2] += after.engine_seconds - before.engine_seconds;
    breakdown[3] += after.enqueue_seconds - before.enqueue_seconds;
    if (after.cache_hits) {
      result->cache_hits = result->cache_hits.value_or(0) + *after.cache_hits -
                           before.cache_hits.value_or(0);
    }
  }
  KOLO_RETURN_IF_ERROR(runner->AllreduceResults(
      seconds.data(), static_cast<int64_t>(seconds.size()), DataType::kFloat64,
      ReduceOp::kMax));
  KOLO_RETURN_IF_ERROR(
      runner->AllreduceResults(&wrong, 1, DataType::kInt64, ReduceOp::kSum));
  KOLO_RETURN_IF_ERROR(runner->AllreduceResults(
      breakdown, 4, DataType::kFloat64, ReduceOp::kSum));
  result->cycles += breakdown[0] / job.size;
  result->negotiation_seconds += breakdown[1] / job.size;
  result->engine_seconds += breakdown[2] / job.size;
  result->enqueue_seconds += breakdown[3] / job.size;
  result->step_seconds.push_back(std::move(seconds));
  result->wrong += wrong;
  return Status::Ok();
}

std::string ModeContext(const FusionMode& mode, int32_t repeat) {
  return fmt::format("mode {} (repeat {})", mode.name, repeat + 1);
}

// Starts kolo with the mode's settings, runs one repeat and shuts down.
// Fills in `job` and the settings the runtime got. The raw mode builds its
// backend while kolo is up (Gloo's rendezvous needs the store, which rank 0
// hosts when kolorun does not) and runs after Shutdown(), so that no idle
// runtime thread competes with it: an idle runtime still ticks every 100 ms
// with an allgather on its own engine.
Status RunModeOnce(const FusionMode& mode, int32_t repeat,
                   const FusionFlags& flags, const InitOptions& job_options,
                   GradientBuffer* gradients, RawBackends* raw,
                   ModeResult* result, Job* job) {
  KOLO_ASSIGN_OR_RETURN(InitOptions options, ModeOptions(mode, job_options));
  if (mode.engine == FusionEngine::kRuntime) {
    result->fusion_threshold =
        std::to_string(options.runtime.fusion_threshold_bytes);
    result->cache_capacity = std::to_string(options.runtime.cache_capacity);
  }
  Status init = Init(options);
  if (!init.ok()) return init.WithContext(ModeContext(mode, repeat));
  job->rank = Rank();
  job->size = Size();
  job->backend = ActiveBackend();
  StatusOr<std::unique_ptr<StepRunner>> runner =
      MakeRunner(mode, *gradients, raw);
  // Shut down after an error too, so the job still ends cleanly; the first
  // error is the one worth reporting.
  const bool uses_runtime =
      runner.ok() && mode.engine == FusionEngine::kRuntime;
  Status shutdown = uses_runtime ? Status::Ok() : Shutdown();
  Status run = runner.ok() ? RunRepeat(mode, flags, *job, runner->get(),
                                       gradients, result)
                           : runner.status();
  if (runner.ok()) runner->reset();
  if (uses_runtime) shutdown = Shutdown();
  if (!run.ok()) return run.WithContext(ModeContext(mode, repeat));
  if (!shutdown.ok()) return shutdown.WithContext(ModeContext(mode, repeat));
  return Status::Ok();
}

void PrintReport(const FusionFlags& flags, const Job& job,
                 const GradientBuffer& gradients,
                 const std::vector<ModeResult>& results) {
  fmt::print(
      "# kolo-bench fusion: backend {}, np {}, steps {}, warmup {}, repeat "
      "{}\n",
      BackendName(job.backend), job.size, flags.steps, flags.warmup,
      flags.repeat);
  fmt::print(
      "# gradients: ResNet-50, {} float32 tensors, {} elements ({:.1f} MB), "
      "allreduced last to first every step\n",
      gradients.size(), gradients.elements(), gradients.elements() * 4 / 1e6);
  fmt::print(
      "# time: the slowest rank's step; median, min and max over {} steps "
      "({} x {} repeats)\n",
      flags.steps * flags.repeat, flags.steps, flags.repeat);
  fmt::print(
      "# calls: engine calls that moved gradients; hits: the runtime's cache "
      "hits, counted over every rank's announcements; ratio: median / "
      "{}'s median\n",
      AllFusionModes().front().name);
  fmt::print(
      "# runtime and raw average, runtime-sum and raw-sum sum; raw makes one "
      "engine call per tensor (Backend::AllreduceAndDivide or Allreduce) with "
      "kolo shut down\n#\n");
  const Table table = FusionTable();
  for (const std::string& line : table.HeaderLines()) {
    fmt::print("{}\n", line);
  }
  const double baseline = results.front().StepMilliseconds().median;
  int64_t wrong = 0;
  for (const ModeResult& result : results) {
    fmt::print("{}\n", table.Row(FusionRowCells(result, baseline)));
    wrong += result.wrong;
  }
  fmt::print("# Out of bounds values : {} {}\n#\n", wrong,
             wrong == 0 ? "OK" : "FAILED");
  fmt::print(
      "# where a runtime step's time goes, per step, mean over ranks: ticks "
      "(negotiation rounds), enqueue (in the 161 enqueue calls), negotiate "
      "(the readiness exchange), engine (inside engine calls), rest (the "
      "mean step less those: fusion copies, "
      "completion, hand-offs between threads); vs raw: the median step over "
      "raw's (runtime-sum over raw-sum)\n");
  const Table breakdown = BreakdownTable();
  for (const std::string& line : breakdown.HeaderLines()) {
    fmt::print("{}\n", line);
  }
  for (const ModeResult& result : results) {
    if (result.mode->engine != FusionEngine::kRuntime) continue;
    const ModeResult* raw = RawPeerOf(result, results);
    fmt::print("{}\n", breakdown.Row(BreakdownRowCells(result, raw)));
  }
  fmt::print("#\n");
  std::fflush(stdout);
}

// Every repeat of every mode; rank 0 prints. Returns whether every value
// was right.
StatusOr<bool> RunFusion(const FusionFlags& flags, RawBackends* raw) {
  KOLO_ASSIGN_OR_RETURN(const InitOptions job_options,
                        InitOptions::FromEnvironment());
  GradientBuffer gradients(ResNet50Parameters());
  std::vector<ModeResult> results;
  for (const FusionMode& mode : AllFusionModes()) {
    results.emplace_back();
    results.back().mode = &mode;
  }
  Job job;
  Status run;
  for (int32_t repeat = 0; repeat < flags.repeat && run.ok(); ++repeat) {
    for (ModeResult& result : results) {
      run = RunModeOnce(*result.mode, repeat, flags, job_options, &gradients,
                        raw, &result, &job);
      if (!run.ok()) break;
    }
  }
  KOLO_RETURN_IF_ERROR(run);

  int64_t wrong = 0;
  for (const ModeResult& result : results) wrong += result.wrong;
  if (job.rank == 0) {
    PrintReport(flags, job, gradients, results);
    for (const ModeResult& result : results) {
      if (result.wrong == 0) continue;
      fmt::print(stderr, "kolo-bench: {} wrong values in mode {}\n",
                 result.wrong, result.mode->name);
    }
    if (!flags.json_path.empty()) {
      KOLO_RETURN_IF_ERROR(WriteJsonFile(
          flags.json_path, FusionResultsToJson(flags, job.backend, job.size,
                                               gradients, results)));
    }
  }
  return wrong == 0;
}

}  // namespace

// ---- Public pieces ----------------------------------------------------------

int64_t ParameterShape::Elements() const {
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;
  return elements;
}

std::vector<ParameterShape> ResNet50Parameters() {
  constexpr int64_t kExpansion = 4;
  constexpr int32_t kStages = 4;
  constexpr int32_t kBlocks[kStages] = {3, 4, 6, 3};
  constexpr int64_t kWidths[kStages] = {64, 128, 256, 512};
  constexpr int64_t kClasses = 1000;

  std::vector<ParameterShape> params;
  AddConv(&params, "conv1", 64, 3, 7);
  AddBatchNorm(&params, "bn1", 64);
  int64_t in_channels = 64;
  for (int32_t stage = 0; stage < kStages; ++stage) {
    const int64_t width = kWidths[stage];
    const int64_t out_channels = width * kExpansion;
    for (int32_t block = 0; block < kBlocks[stage]; ++block) {
      const std::string prefix = fmt::format("layer{}.{}", stage + 1, block);
      AddConv(&params, prefix + ".conv1", width, in_channels, 1);
      AddBatchNorm(&params, prefix + ".bn1", width);
      AddConv(&params, prefix + ".conv2", width, width, 3);
      AddBatchNorm(&params, prefix + ".bn2", width);
      AddConv(&params, prefix + ".conv3", out_channels, width, 1);
      AddBatchNorm(&params, prefix + ".bn3", out_channels);
      if (block == 0) {
        AddConv(&params, prefix + ".downsample.0", out_channels, in_channels,
                1);
        AddBatchNorm(&params, prefix + ".downsample.1", out_channels);
      }
      in_channels = out_channels;
    }
  }
  params.push_back({"fc.weight", {kClasses, in_channels}});
  params.push_back({"fc.bias", {kClasses}});
  return params;
}

const std::vector<FusionMode>& AllFusionModes() {
  static const std::vector<FusionMode> kModes = {
      {"runtime", FusionEngine::kRuntime, nullptr, nullptr, ReduceOp::kAverage},
      {"no-fusion-no-cache", FusionEngine::kRuntime, "0", "0",
       ReduceOp::kAverage},
      {"raw", FusionEngine::kRawBackend, nullptr, nullptr, ReduceOp::kAverage},
      {"runtime-sum", FusionEngine::kRuntime, nullptr, nullptr, ReduceOp::kSum},
      {"raw-sum", FusionEngine::kRawBackend, nullptr, nullptr, ReduceOp::kSum},
  };
  return kModes;
}

float FusionInput(int64_t tensor, int64_t step, int32_t rank) {
  return static_cast<float>(Base(tensor, step) + rank);
}

float FusionExpected(ReduceOp op, int64_t tensor, int64_t step,
                     int32_t world_size) {
  const double n = world_size;
  const double sum = n * Base(tensor, step) + n * (n - 1) / 2;
  switch (op) {
    case ReduceOp::kSum: return static_cast<float>(sum);
    case ReduceOp::kAverage: return static_cast<float>(sum / n);
    default:
      // The modes only sum and average; no value matches this.
      return std::nanf("");
  }
}

GradientBuffer::GradientBuffer(std::vector<ParameterShape> shapes)
    : shapes_(std::move(shapes)) {
  int64_t total = 0;
  for (const ParameterShape& shape : shapes_) {
    offsets_.push_back(total);
    total += shape.Elements();
  }
  data_.resize(total);
}

void GradientBuffer::Fill(int64_t step, int32_t rank) {
  for (size_t i = 0; i < size(); ++i) {
    std::fill_n(tensor(i), count(i), FusionInput(i, step, rank));
  }
}

int64_t GradientBuffer::CountWrong(ReduceOp op, int64_t step,
                                   int32_t world_size) const {
  int64_t wrong = 0;
  for (size_t i = 0; i < size(); ++i) {
    const float expected = FusionExpected(op, i, step, world_size);
    const float* values = tensor(i);
    // Exact comparison: every expected value is a small integer or half.
    wrong += std::count_if(values, values + count(i),
                           [expected](float v) { return v != expected; });
  }
  return wrong;
}

Status ParseFusionFlags(const FusionFlags& flags) {
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--steps", flags.steps, 1));
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--warmup", flags.warmup, 0));
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--repeat", flags.repeat, 1));
  return Status::Ok();
}

int64_t ModeResult::TimedSteps() const {
  int64_t steps = 0;
  for (const std::vector<double>& repeat : step_seconds) {
    steps += static_cast<int64_t>(repeat.size());
  }
  return steps;
}

Spread ModeResult::StepMilliseconds() const {
  std::vector<double> ms;
  for (const std::vector<double>& repeat : step_seconds) {
    for (double s : repeat) ms.push_back(s * 1e3);
  }
  return SpreadOf(std::move(ms));
}

double ModeResult::MeanStepMilliseconds() const {
  double total = 0;
  for (const std::vector<double>& repeat : step_seconds) {
    for (double s : repeat) total += s * 1e3;
  }
  const int64_t steps = TimedSteps();
  return steps > 0 ? total / static_cast<double>(steps) : 0;
}

const ModeResult* RawPeerOf(const ModeResult& runtime,
                            const std::vector<ModeResult>& results) {
  for (const ModeResult& result : results) {
    if (result.mode->engine == FusionEngine::kRawBackend &&
        result.mode->op == runtime.mode->op) {
      return &result;
    }
  }
  return nullptr;
}

Table BreakdownTable() {
  return Table({
      {"mode", "", 18, "", true},
      {"ticks", "", 7, "per step", false},
      {"enqueue", "(ms)", 9, "per step", false},
      {"negotiate", "(ms)", 9, "per step", false},
      {"engine", "(ms)", 9, "per step", false},
      {"rest", "(ms)", 9, "per step", false},
      {"step", "(ms)", 9, "mean", false},
      {"vs raw", "", 6, "", false},
  });
}

std::vector<std::string> BreakdownRowCells(const ModeResult& runtime,
                                           const ModeResult* raw) {
  const int64_t steps = runtime.TimedSteps();
  if (steps == 0) {
    return {
        runtime.mode->name, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"};
  }
  const double n = static_cast<double>(steps);
  const double step_ms = runtime.MeanStepMilliseconds();
  const double negotiate_ms = runtime.negotiation_seconds * 1e3 / n;
  const double engine_ms = runtime.engine_seconds * 1e3 / n;
  const double enqueue_ms = runtime.enqueue_seconds * 1e3 / n;
  const double raw_ms = raw ? raw->StepMilliseconds().median : 0;
  return {
      runtime.mode->name,
      FormatFixed(runtime.cycles / n, 1),
      FormatFixed(enqueue_ms, 2),
      FormatFixed(negotiate_ms, 2),
      FormatFixed(engine_ms, 2),
      FormatFixed(step_ms - enqueue_ms - negotiate_ms - engine_ms, 2),
      FormatFixed(step_ms, 2),
      raw_ms > 0 ? FormatFixed(runtime.StepMilliseconds().median / raw_ms, 2)
                 : "n/a",
  };
}

Table FusionTable() {
  return Table({
      {"mode", "", 18, "", true},
      {"fusion", "(B)", 10, "settings", false},
      {"cache", "", 6, "settings", false},
      {"median", "(ms)", 9, "step time", false},
      {"min", "(ms)", 9, "step time", false},
      {"max", "(ms)", 9, "step time", false},
      {"calls", "", 7, "per step", false},
      {"hits", "", 7, "per step", false},
      {"ratio", "", 6, "", false},
      {"#wrong", "", 6, "", false},
  });
}

std::vector<std::string> FusionRowCells(const ModeResult& result,
                                        double baseline_median_ms) {
  const Spread ms = result.StepMilliseconds();
  const int64_t steps = result.TimedSteps();
  auto per_step = [steps](int64_t total) {
    return steps > 0 ? FormatFixed(static_cast<double>(total) / steps, 1)
                     : std::string("n/a");
  };
  const bool runtime = !result.fusion_threshold.empty();
  return {
      result.mode->name,
      runtime ? result.fusion_threshold : "-",
      runtime ? result.cache_capacity : "-",
      FormatFixed(ms.median, 2),
      FormatFixed(ms.min, 2),
      FormatFixed(ms.max, 2),
      per_step(result.collectives),
      result.cache_hits ? per_step(*result.cache_hits) : "-",
      baseline_median_ms > 0 ? FormatFixed(ms.median / baseline_median_ms, 2)
                             : "n/a",
      std::to_string(result.wrong),
  };
}

nlohmann::json FusionResultsToJson(const FusionFlags& flags,
                                   BackendKind backend, int32_t world_size,
                                   const GradientBuffer& gradients,
                                   const std::vector<ModeResult>& results) {
  const double baseline =
      results.empty() ? 0 : results.front().StepMilliseconds().median;
  nlohmann::json modes = nlohmann::json::array();
  int64_t wrong = 0;
  for (const ModeResult& result : results) {
    const Spread ms = result.StepMilliseconds();
    const double steps = static_cast<double>(result.TimedSteps());
    nlohmann::json step_ms = nlohmann::json::array();
    for (const std::vector<double>& repeat : result.step_seconds) {
      nlohmann::json one = nlohmann::json::array();
      for (double s : repeat) one.push_back(s * 1e3);
      step_ms.push_back(std::move(one));
    }
    nlohmann::json mode = {
        {"mode", result.mode->name},
        {"engine",
         result.mode->engine == FusionEngine::kRuntime ? "runtime" : "backend"},
        {"redop", ReduceOpName(result.mode->op)},
        {"fusion_threshold_bytes", nullptr},
        {"cache_capacity", nullptr},
        {"step_ms", std::move(step_ms)},
        {"median_ms", ms.median},
        {"min_ms", ms.min},
        {"max_ms", ms.max},
        {"collectives_per_step", steps > 0 ? result.collectives / steps : 0},
        {"cache_hits_per_step", nullptr},
        {"ratio", baseline > 0 ? ms.median / baseline : 0},
        {"mean_ms", result.MeanStepMilliseconds()},
        {"ticks_per_step", steps > 0 ? result.cycles / steps : 0},
        {"negotiation_ms_per_step",
         steps > 0 ? result.negotiation_seconds * 1e3 / steps : 0},
        {"engine_ms_per_step",
         steps > 0 ? result.engine_seconds * 1e3 / steps : 0},
        {"enqueue_ms_per_step",
         steps > 0 ? result.enqueue_seconds * 1e3 / steps : 0},
        {"wrong", result.wrong},
    };
    if (!result.fusion_threshold.empty()) {
      mode["fusion_threshold_bytes"] = std::stoll(result.fusion_threshold);
      mode["cache_capacity"] = std::stoll(result.cache_capacity);
    }
    if (result.cache_hits && steps > 0) {
      mode["cache_hits_per_step"] = *result.cache_hits / steps;
    }
    modes.push_back(std::move(mode));
    wrong += result.wrong;
  }
  return {
      {"benchmark", "fusion"},
      {"backend", BackendName(backend)},
      {"np", world_size},
      {"config",
       {{"steps", flags.steps},
        {"warmup", flags.warmup},
        {"repeat", flags.repeat}}},
      {"model",
       {{"name", "resnet50"},
        {"tensors", gradients.size()},
        {"elements", gradients.elements()},
        {"bytes", gradients.elements() * 4}}},
      {"modes", std::move(modes)},
      {"out_of_bounds", wrong},
  };
}

CLI::App* AddFusionCommand(CLI::App& parent, FusionFlags* flags) {
  CLI::App* command = parent.add_subcommand(
      "fusion",
      "Time a training step's gradient allreduces (ResNet-50's 161 tensors) "
      "through the runtime, with fusion and cache off, and straight on a "
      "backend. Exit status: 0 all right, 1 error, 2 wrong results.");
  command
      ->add_option("--steps", flags->steps, "Timed steps per mode and repeat")
      ->capture_default_str();
  command
      ->add_option("--warmup", flags->warmup,
                   "Untimed steps before them (they also fill the cache)")
      ->capture_default_str();
  command
      ->add_option("--repeat", flags->repeat,
                   "Rounds through every mode, each with a fresh runtime")
      ->capture_default_str();
  command->add_option("--json", flags->json_path,
                      "Also write the results as JSON to this file (rank 0)");
  return command;
}

int RunFusionCommand(const FusionFlags& flags) {
  Status parsed = ParseFusionFlags(flags);
  if (!parsed.ok()) return Fail(parsed);
  StatusOr<InitOptions> options = InitOptions::FromEnvironment();
  if (!options.ok()) return Fail(options.status());
  RawBackends raw;
  if (options->engine.backend == BackendKind::kMpi &&
      options->world.ranks.size > 1) {
    StatusOr<std::unique_ptr<Backend>> mpi = CreateRawMpiBackend();
    if (!mpi.ok()) return Fail(mpi.status().WithContext("raw mode"));
    raw.mpi = std::move(mpi).value();
  }
  StatusOr<bool> all_right = RunFusion(flags, &raw);
  raw.mpi.reset();
  if (!all_right.ok()) return Fail(all_right.status());
  return *all_right ? 0 : 2;
}

}  // namespace kolo::bench
