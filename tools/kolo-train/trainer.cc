#include "trainer.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "config_file.h"
#include "engine.h"
#include "json_file.h"
#include "kolo/data.h"
#include "kolo/kolo.h"
#include "kolo/metrics.h"
#include "kolo/models.h"
#include "kolo/runtime.h"
#include "kolo/torch.h"
#include "kolo/training_config.h"
#include "measure.h"
#include "model_parallel.h"
#include "plan.h"
#include "progress_line.h"
#include "setup.h"
#include "table.h"
#include "train_result.h"

namespace kolo::train {
namespace {

using bench::ProgressLine;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// What this rank's runtime moved so far (zeros without kolo): how the
// communication options show in a run's JSON (fp16 halves the bytes, more
// passes per step or larger buckets mean fewer operations).
json RuntimeTraffic() {
  const RuntimeStats stats = GetRuntimeStats();
  return {{"operations", stats.operations},
          {"bytes", stats.bytes},
          {"collectives", stats.collectives},
          {"fused_batches", stats.fused_batches}};
}

void PrintError(const Status& status) {
  std::string message = status.message();
  if (message.empty()) message = status.ToString();
  fmt::print(stderr, "kolo-train: {}\n", message);
  std::fflush(stderr);
}

// ---------------------------------------------------------------- summary

bench::Table::Column Column(const char* title, const char* unit, int width) {
  bench::Table::Column column;
  column.title = title;
  column.unit = unit;
  column.width = width;
  return column;
}

// Every rank's optimizer memory, on every rank.
StatusOr<std::vector<EngineMemory>> GatherMemory(
    const kolo::torch::TrainingStrategy& strategy, int32_t size) {
  const EngineMemory mine = strategy.Memory();
  const int64_t local[3] = {mine.optimizer_state_bytes, mine.gradient_bytes,
                            mine.master_weight_bytes};
  std::vector<int64_t> all(static_cast<size_t>(3 * size));
  if (size == 1) {
    all.assign(local, local + 3);
  } else {
    KOLO_RETURN_IF_ERROR(Allgather(local, all.data(), 3, DataType::kInt64));
  }
  std::vector<EngineMemory> memory(static_cast<size_t>(size));
  for (int32_t r = 0; r < size; ++r) {
    memory[r].optimizer_state_bytes = all[3 * r];
    memory[r].gradient_bytes = all[3 * r + 1];
    memory[r].master_weight_bytes = all[3 * r + 2];
  }
  return memory;
}

// The config keys both reports write: the run's shape and its engine.
json SharedConfig(const Flags& f, const Setup& s, int32_t size,
                  int32_t threads) {
  return {{"model", f.model},
          {"parameters", models::CountParameters(*s.model)},
          {"dataset", f.dataset},
          {"workers", size},
          {"batch_size", f.batch_size},
          {"threads", threads},
          {"optimizer", f.optimizer},
          {"zero_stage", f.zero_stage},
          {"precision", f.precision},
          {"gradient_clipping", f.gradient_clipping},
          {"config_file", f.config_path},
          {"compression", f.compression},
          {"bucket_kib", f.bucket_kib},
          {"seed", f.seed}};
}

// Per rank, as kolo-bench zero and the PyTorch peer report them, in the
// result schema's terms.
bench::RankMemory RankMemoryOf(const std::vector<EngineMemory>& memory) {
  std::vector<int64_t> state, gradients, masters;
  for (const EngineMemory& m : memory) {
    state.push_back(m.optimizer_state_bytes);
    gradients.push_back(m.gradient_bytes);
    masters.push_back(m.master_weight_bytes);
  }
  bench::RankMemory out;
  out.optimizer_state_bytes = std::move(state);
  out.gradient_bytes = std::move(gradients);
  out.master_weight_bytes = std::move(masters);
  return out;
}

// What a finished run reports, besides its flags and setup.
struct Outcome {
  int64_t resumed_after_epoch = 0;  // 0: a fresh run
  int32_t threads = 1;
  double scaled_lr = 0;
  int64_t warmup_epochs = 0;   // 0 when no warm-up ran
  json history;                // one record per epoch, resumed ones included
  Evaluation evaluation;       // of the final model
  double train_loss = 0;       // of the last epoch
  double wall_seconds = 0;     // from joining the job to the end of training
  double train_seconds = 0;    // in training loops, without evaluation
  int64_t images_trained = 0;  // by all ranks, in this process's epochs
  std::vector<int64_t> peak_rss_bytes;  // per rank
  uint64_t checksum = 0;                // ParameterChecksum(), every rank's
  std::vector<EngineMemory> memory;     // per rank
  int64_t skipped_steps = 0;            // float16 overflows
  double loss_scale = 1;                // at the end (float16)
};

// Rank 0's summary table and --json file. Images per second count the
// images all ranks trained on (sampler padding included) over the time
// spent in training loops.
Status Report(const Flags& f, const Setup& s, int32_t size, const Outcome& o) {
  const double rate =
      o.train_seconds > 0
          ? static_cast<double>(o.images_trained) / o.train_seconds
          : 0;
  const std::string checksum_text = fmt::format("{:#018x}", o.checksum);
  bench::Table table(
      {Column("wall", "(s)", 8), Column("train", "(s)", 8),
       Column("images/s", "(total)", 10), Column("images/s", "(worker)", 10),
       Column("test acc", "(%)", 8), Column("train loss", "", 10)});
  fmt::print(
      "# kolo-train: {} on {}, {} worker{}, {} epoch{}, batch {} per worker\n",
      f.model, f.dataset, size, size == 1 ? "" : "s", f.epochs,
      f.epochs == 1 ? "" : "s", f.batch_size);
  for (const std::string& line : table.HeaderLines()) fmt::print("{}\n", line);
  fmt::print("{}\n",
             table.Row({bench::FormatFixed(o.wall_seconds, 1),
                        bench::FormatFixed(o.train_seconds, 1),
                        bench::FormatFixed(rate, 1),
                        bench::FormatFixed(rate / size, 1),
                        bench::FormatFixed(100.0 * o.evaluation.accuracy(), 2),
                        bench::FormatFixed(o.train_loss, 4)}));
  bench::Table memory({Column("rank", "", 6), Column("peak RSS", "(MiB)", 10),
                       Column("opt state", "(MiB)", 10),
                       Column("gradients", "(MiB)", 10),
                       Column("masters", "(MiB)", 10)});
  for (const std::string& line : memory.HeaderLines()) fmt::print("{}\n", line);
  for (int32_t r = 0; r < size; ++r) {
    fmt::print(
        "{}\n",
        memory.Row(
            {std::to_string(r),
             bench::FormatFixed(o.peak_rss_bytes[r] / 1048576.0, 1),
             bench::FormatFixed(o.memory[r].optimizer_state_bytes / 1048576.0,
                                2),
             bench::FormatFixed(o.memory[r].gradient_bytes / 1048576.0, 2),
             bench::FormatFixed(o.memory[r].master_weight_bytes / 1048576.0,
                                2)}));
  }
  if (f.precision == "fp16") {
    fmt::print("# float16: {} step{} skipped for overflows, loss scale {}\n",
               o.skipped_steps, o.skipped_steps == 1 ? "" : "s", o.loss_scale);
  }
  fmt::print("# parameter checksum {} (equal on all ranks)\n", checksum_text);
  std::fflush(stdout);

  if (f.json_path.empty()) return Status::Ok();
  json out;
  out["tool"] = "kolo-train";
  out["config"] = SharedConfig(f, s, size, o.threads);
  out["config"].update(json{
      {"backend", BackendName(ActiveBackend())},
      {"data", s.data.source},
      {"train_images", s.data.train.size()},
      {"test_images", s.data.test.size()},
      {"epochs", f.epochs},
      {"global_batch_size", f.batch_size * size * f.backward_passes_per_step},
      {"lr", f.lr},
      {"scaled_lr", o.scaled_lr},
      {"warmup_epochs", o.warmup_epochs},
      {"lr_schedule", f.lr_schedule},
      {"momentum", f.momentum},
      {"nesterov", f.nesterov},
      {"weight_decay", f.weight_decay},
      {"backward_passes_per_step", f.backward_passes_per_step},
      {"resumed_after_epoch", o.resumed_after_epoch}});
  out["history"] = o.history;
  // The schema kolo-bench reads the result back through.
  bench::TrainResult result;
  result.test_accuracy = o.evaluation.accuracy();
  result.test_correct = o.evaluation.correct;
  result.test_total = o.evaluation.total;
  result.train_loss = o.train_loss;
  result.wall_seconds = o.wall_seconds;
  result.train_seconds = o.train_seconds;
  result.images_trained = o.images_trained;
  result.images_per_second = rate;
  result.images_per_second_per_worker = rate / size;
  result.peak_rss_bytes = o.peak_rss_bytes;
  result.memory = RankMemoryOf(o.memory);
  result.skipped_steps = o.skipped_steps;
  result.loss_scale = o.loss_scale;
  result.parameter_checksum = checksum_text;
  out["result"] = bench::ToJson(result);
  out["runtime"] = RuntimeTraffic();
  return bench::WriteJsonFile(f.json_path, out);
}

// ---------------------------------------------------------------- training

// This rank's shard of the training set, and the loader over it.
StatusOr<data::DistributedSampler> TrainSampler(const Flags& f, const Data& d,
                                                int32_t rank, int32_t size) {
  data::DistributedSampler::Options options;
  options.rank = rank;
  options.world_size = size;
  options.seed = f.seed;
  return data::DistributedSampler::Create(d.train.size(), options);
}

data::LoaderOptions TrainLoaderOptions(const Flags& f, const Data& d) {
  data::LoaderOptions options;
  options.batch_size = f.batch_size;
  options.num_workers = kLoaderWorkers;
  options.augmentation = d.augmentation;
  options.augmentation_seed = f.seed;
  return options;
}

// The rate of one step: the --config file's schedule, which counts optimizer
// steps, or plan.h's, which counts batches. A --config file's rate is the
// global batch's (config_file.h), so it is never scaled.
struct RunLearningRate {
  bool from_file = false;
  LinearScalingSchedule plan;
  int64_t warmup_epochs = 0;  // 0 when no warm-up runs

  double At(const Flags& f, const kolo::torch::StepPosition& p) const {
    if (from_file)
      return LearningRateAt(f.config->scheduler, f.lr, p.steps_taken);
    return LearningRate(plan, p.iteration);
  }
};

RunLearningRate MakeLearningRate(const Flags& f, int32_t size,
                                 int64_t batches_per_epoch) {
  RunLearningRate rate;
  rate.from_file = FileDrivesLearningRate(f);
  rate.plan =
      ScheduleOf(f, f.no_lr_scaling || rate.from_file ? f.lr : f.lr * size,
                 batches_per_epoch);
  rate.warmup_epochs = rate.plan.warmup_iterations > 0 ? f.warmup_epochs : 0;
  return rate;
}

// The optimizer and its rate, as rank 0's second line says them.
std::string LearningRateText(const Flags& f, const RunLearningRate& rate,
                             bool zero) {
  std::string text = fmt::format("{} lr {}", f.optimizer, f.lr);
  if (rate.plan.scaled_lr != f.lr)
    text += fmt::format(" scaled to {}", rate.plan.scaled_lr);
  if (rate.warmup_epochs > 0) {
    text += fmt::format(" with {} warm-up epoch{}", f.warmup_epochs,
                        f.warmup_epochs == 1 ? "" : "s");
  }
  text += rate.from_file ? ", the --config file's schedule"
                         : fmt::format(", {} schedule", f.lr_schedule);
  if (zero) {
    text += fmt::format("; ZeRO stage {}, {}", f.zero_stage, f.precision);
    if (f.gradient_clipping > 0)
      text +=
          fmt::format(", gradients clipped to norm {}", f.gradient_clipping);
  }
  return text;
}

// What the epoch loop's hooks share on one rank.
struct TrainState {
  TrainState(const Flags& flags, const Setup& setup, int32_t rank_,
             int32_t size_, int32_t threads_)
      : f(flags),
        s(setup),
        rank(rank_),
        size(size_),
        threads(threads_),
        progress(stdout, {rank_ == 0 && bench::DrawsInPlace(stdout)}) {}

  const Flags& f;
  const Setup& s;
  int32_t rank = 0;
  int32_t size = 1;
  int32_t threads = 1;
  RunStrategy strategy;
  RunLearningRate rate;
  int64_t batches_per_epoch = 0;
  int64_t epochs_done = 0;  // when the run started
  // Rank 0's epoch in flight, redrawn in place on a terminal (kolorun gives
  // rank 0 one when its own output is a terminal); elsewhere, only the line
  // per epoch.
  ProgressLine progress;
  json history;
  int64_t skipped_steps = 0;
};

// Rank 0's lines before the first epoch: the model and data, the job's
// shape and rate, a resume, and a checkpoint that cannot resume exactly.
void PrintHeader(const TrainState& t) {
  const Flags& f = t.f;
  fmt::print(
      "kolo-train: {} ({} parameters) on {} ({}: {} training, {} test "
      "images)\n",
      f.model, models::CountParameters(*t.s.model), f.dataset, t.s.data.source,
      t.s.data.train.size(), t.s.data.test.size());
  const int64_t steps = t.batches_per_epoch / f.backward_passes_per_step;
  fmt::print(
      "kolo-train: {} workers x batch {} (global {}), {} LibTorch "
      "thread{} per worker; {}; {} step{} per epoch\n",
      t.size, f.batch_size, f.batch_size * t.size * f.backward_passes_per_step,
      t.threads, t.threads == 1 ? "" : "s",
      LearningRateText(f, t.rate, t.strategy.zero != nullptr), steps,
      steps == 1 ? "" : "s");
  if (!t.s.resumed_from.empty()) {
    fmt::print("kolo-train: resumed from {} after epoch {}\n", t.s.resumed_from,
               t.epochs_done);
  }
  if (!f.checkpoint_dir.empty() &&
      t.batches_per_epoch % f.backward_passes_per_step != 0) {
    fmt::print(
        "kolo-train: warning: {} batches per epoch do not divide by "
        "--backward-passes-per-step {}; a resumed run will not match an "
        "uninterrupted one exactly\n",
        t.batches_per_epoch, f.backward_passes_per_step);
  }
  std::fflush(stdout);
}

// Rank 0's lines about single steps: a float16 overflow at the minimum loss
// scale (the step was skipped; training may be diverging), and, with a
// --config file, DeepSpeed's progress line every steps_per_print steps.
// Both go above the progress line.
void ReportStep(TrainState& t, const kolo::torch::StepReport& r) {
  const Flags& f = t.f;
  const kolo::torch::StepOutcome& outcome = r.outcome;
  if (outcome.overflow_at_minimum_scale) {
    t.progress.Print(fmt::format(
        "kolo-train: warning: step {} overflowed at the minimum loss scale "
        "{}; skipped",
        r.steps_taken + r.skipped_steps, outcome.loss_scale));
  }
  if (!f.config || !outcome.stepped || f.config->steps_per_print <= 0 ||
      r.steps_taken % f.config->steps_per_print != 0) {
    return;
  }
  std::string line = fmt::format("kolo-train: step {}  loss {:.4f}  lr {:.4g}",
                                 r.steps_taken, r.loss, r.lr);
  if (outcome.gradient_norm > 0)
    line += fmt::format("  grad norm {:.4g}", outcome.gradient_norm);
  if (f.precision == "fp16")
    line += fmt::format("  loss scale {}  skipped {}", outcome.loss_scale,
                        r.skipped_steps);
  t.progress.Print(line);
}

// Rank 0's progress line of the epoch in flight.
void ShowProgress(TrainState& t, const kolo::torch::StepReport& r) {
  t.progress.Update(ProgressText(r, t.f.epochs, t.size),
                    /*force=*/r.batch + 1 == r.batches_per_epoch);
}

void RecordEpoch(TrainState& t, const kolo::torch::EpochReport& e) {
  const EpochFigures figures = FiguresOf(e, t.f.epochs);
  t.history.push_back(EpochRecord(figures));
  if (t.rank == 0) t.progress.Finish(EpochLine(figures));
}

// Every rank takes rank 0's epoch count; ZeroOptimizer's shards load at
// any number of workers.
StatusOr<int64_t> Resume(TrainState& t) {
  KOLO_RETURN_IF_ERROR(
      Broadcast(&t.epochs_done, &t.epochs_done, 1, DataType::kInt64, 0));
  if (t.strategy.zero == nullptr || !t.f.resume) return t.epochs_done;
  Status loaded = t.strategy.zero->zero()->Load(t.f.checkpoint_dir + "/zero");
  if (loaded.code() == StatusCode::kNotFound && t.epochs_done > 0) {
    return InvalidArgument("--resume: " + CheckpointPath(t.f.checkpoint_dir) +
                           " holds " + std::to_string(t.epochs_done) +
                           " epochs but " + loaded.message());
  }
  if (!loaded.ok() && loaded.code() != StatusCode::kNotFound) return loaded;
  return t.epochs_done;
}

// Rank 0 alone writes the checkpoint, and the others must not train on if
// it failed; then every rank writes its own shard of a ZeroOptimizer.
Status Checkpoint(TrainState& t, int64_t epochs_done) {
  Status saved;
  if (t.rank == 0) {
    saved =
        SaveCheckpoint(t.f.checkpoint_dir, *t.s.model, *t.s.optimizer,
                       CheckpointInfoAfter(t.f, epochs_done, t.history.dump()));
  }
  KOLO_RETURN_IF_ERROR(kolo::torch::AgreeAcrossRanks(saved));
  if (t.strategy.zero == nullptr) return Status::Ok();
  return t.strategy.zero->zero()->Save(t.f.checkpoint_dir + "/zero");
}

void SetHooks(TrainState& t, kolo::torch::TrainerHooks& hooks) {
  hooks.learning_rate = [&t](const kolo::torch::StepPosition& p) {
    return t.rate.At(t.f, p);
  };
  if (t.rate.from_file) {
    hooks.momentum = [&t](const kolo::torch::StepPosition& p) {
      return MomentumAt(t.f.config->scheduler, p.steps_taken);
    };
  }
  hooks.resume = [&t] { return Resume(t); };
  hooks.on_start = [&t](int64_t start, int64_t) {
    t.epochs_done = start;
    if (t.rank == 0) PrintHeader(t);
  };
  hooks.on_step = [&t](const kolo::torch::StepReport& r) {
    t.skipped_steps = r.skipped_steps;
    if (t.rank != 0) return;
    ReportStep(t, r);
    ShowProgress(t, r);
  };
  hooks.on_epoch = [&t](const kolo::torch::EpochReport& e) {
    RecordEpoch(t, e);
  };
  if (!t.f.checkpoint_dir.empty()) {
    hooks.checkpoint = [&t](int64_t done) { return Checkpoint(t, done); };
  }
}

// What the report needs besides the Trainer's result: gathered from every
// rank, kept on rank 0.
Status FillOutcome(const TrainState& t, const kolo::torch::FitResult& fit,
                   Outcome& o) {
  const int64_t peak_rss = PeakRssBytes();
  o.peak_rss_bytes.resize(static_cast<size_t>(t.size));
  KOLO_RETURN_IF_ERROR(
      Allgather(&peak_rss, o.peak_rss_bytes.data(), 1, DataType::kInt64));
  KOLO_ASSIGN_OR_RETURN(o.memory, GatherMemory(*t.strategy.strategy, t.size));
  o.resumed_after_epoch = fit.start_epoch;
  o.threads = t.threads;
  o.scaled_lr = t.rate.plan.scaled_lr;
  o.warmup_epochs = t.rate.warmup_epochs;
  o.history = t.history;
  o.evaluation = fit.eval;
  o.train_loss =
      fit.epochs.empty()
          ? (t.history.empty() ? 0.0
                               : t.history.back().value("train_loss", 0.0))
          : fit.epochs.back().train_loss;
  o.train_seconds = fit.train_seconds;
  o.images_trained = fit.images_trained;
  o.checksum = fit.parameter_checksum;
  o.skipped_steps = t.skipped_steps;
  if (t.strategy.zero != nullptr)
    o.loss_scale = t.strategy.zero->zero()->loss_scaler().scale();
  return Status::Ok();
}

// The epochs on the library's Trainer; the flags become its options and
// hooks, and rank 0 reports.
Status Train(const Flags& f, int32_t rank, int32_t size, int32_t threads,
             Clock::time_point start, Setup& s) {
  if (f.precision == "bf16") s.model->to(::torch::kBFloat16);
  TrainState t(f, s, rank, size, threads);
  t.strategy = MakeStrategy(f, *s.model, *s.optimizer);
  t.epochs_done = s.epochs_done;
  t.history = s.history;
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        TrainSampler(f, s.data, rank, size));
  t.batches_per_epoch =
      (sampler.num_samples() + f.batch_size - 1) / f.batch_size;
  t.rate = MakeLearningRate(f, size, t.batches_per_epoch);
  kolo::torch::Trainer trainer(*s.model, *t.strategy.strategy,
                               TrainerOptionsOf(f, s.data));
  SetHooks(t, trainer.hooks());
  KOLO_ASSIGN_OR_RETURN(kolo::torch::FitResult fit,
                        trainer.Fit(s.data.train, s.data.test));
  Outcome outcome;
  outcome.wall_seconds = Seconds(Clock::now() - start);
  KOLO_RETURN_IF_ERROR(FillOutcome(t, fit, outcome));
  if (rank != 0) return Status::Ok();
  return Report(f, s, size, outcome);
}

// ------------------------------------------------------------- benchmark

// --no-kolo's strategy: the bare optimizer in one process, nothing shared.
class BareOptimizer : public kolo::torch::TrainingStrategy {
 public:
  explicit BareOptimizer(::torch::optim::Optimizer& optimizer)
      : optimizer_(optimizer) {}
  Status Start() override { return Status::Ok(); }
  void ZeroGrad() override { optimizer_.zero_grad(); }
  void Backward(const ::torch::Tensor& loss) override { loss.backward(); }
  StatusOr<kolo::torch::StepOutcome> Step() override {
    optimizer_.step();
    kolo::torch::StepOutcome outcome;
    outcome.stepped = true;
    return outcome;
  }
  void SetLearningRate(double) override {}
  void SetMomentum(double) override {}
  EngineMemory Memory() const override {
    EngineMemory memory;
    memory.optimizer_state_bytes = kolo::torch::OptimizerStateBytes(optimizer_);
    return memory;
  }
  void ResetPeakMemory() override {}

 private:
  ::torch::optim::Optimizer& optimizer_;
};

// What the timed steps measured on this rank.
struct BenchmarkOutcome {
  int64_t timed_images = 0;
  double loss = 0;  // of the last step
  double seconds = 0;
  RuntimeStats stats_before, stats;
  double wait_before = 0, wait = 0;
  // Seconds per phase over the timed steps: where a step's time goes.
  double data_s = 0, forward_s = 0, backward_s = 0, step_s = 0;
  std::vector<int64_t> peak_rss_all, images_all;
  std::vector<EngineMemory> memory;
};

// At the end of the warm-up: every rank starts the clock together, and the
// counters restart.
Status StartTiming(bool distributed, kolo::torch::TrainingStrategy& strategy,
                   BenchmarkOutcome& o) {
  if (distributed) {
    KOLO_RETURN_IF_ERROR(Barrier());
    o.stats_before = GetRuntimeStats();
    o.wait_before = strategy.wait_seconds();
    strategy.ResetPeakMemory();
  }
  return Status::Ok();
}

// --benchmark-warmup untimed steps, then --benchmark-steps timed ones,
// epoch after epoch as long as it takes.
Status RunBenchmarkSteps(const Flags& f, int32_t rank, Setup& s,
                         const data::DistributedSampler& sampler,
                         kolo::torch::TrainingStrategy& strategy,
                         BenchmarkOutcome& o) {
  const bool distributed = !f.no_kolo;
  const int64_t total = f.benchmark_warmup + f.benchmark_steps;
  const data::LoaderOptions loader_options = TrainLoaderOptions(f, s.data);
  int64_t steps = 0;
  Clock::time_point timed_start = Clock::now();
  s.model->train();
  for (int64_t epoch = 0; steps < total; ++epoch) {
    ::torch::manual_seed(EpochSeed(f.seed, epoch, rank));
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<data::DataLoader> loader,
        data::DataLoader::Create(s.data.train, sampler, epoch, loader_options));
    while (steps < total) {
      if (steps == f.benchmark_warmup) {
        KOLO_RETURN_IF_ERROR(StartTiming(distributed, strategy, o));
        timed_start = Clock::now();
      }
      const Clock::time_point t0 = Clock::now();
      KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      strategy.ZeroGrad();
      const Clock::time_point t1 = Clock::now();
      ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
          s.model->forward(ModelInput(*s.model, batch->images))
              .to(::torch::kFloat32),
          batch->labels);
      const Clock::time_point t2 = Clock::now();
      strategy.Backward(loss);
      const Clock::time_point t3 = Clock::now();
      StatusOr<kolo::torch::StepOutcome> outcome = strategy.Step();
      if (!outcome.ok()) {
        return outcome.status().WithContext(
            fmt::format("benchmark step {}", steps + 1));
      }
      if (steps >= f.benchmark_warmup) {
        o.timed_images += batch->labels.size(0);
        o.data_s += Seconds(t1 - t0);
        o.forward_s += Seconds(t2 - t1);
        o.backward_s += Seconds(t3 - t2);
        o.step_s += Seconds(Clock::now() - t3);
      }
      ++steps;
      o.loss = loss.item<double>();
    }
  }
  if (distributed) KOLO_RETURN_IF_ERROR(Barrier());
  o.seconds = Seconds(Clock::now() - timed_start);
  return Status::Ok();
}

// Every rank's images, peak RSS and memory, on rank 0.
Status GatherBenchmark(bool distributed, int32_t size,
                       const kolo::torch::TrainingStrategy& strategy,
                       BenchmarkOutcome& o) {
  o.stats = distributed ? GetRuntimeStats() : RuntimeStats{};
  o.wait = distributed ? strategy.wait_seconds() - o.wait_before : 0.0;
  const int64_t peak_rss = PeakRssBytes();
  o.peak_rss_all.assign(static_cast<size_t>(size), peak_rss);
  o.images_all.assign(static_cast<size_t>(size), o.timed_images);
  if (!distributed) {
    o.memory = {strategy.Memory()};
    return Status::Ok();
  }
  KOLO_RETURN_IF_ERROR(
      Allgather(&peak_rss, o.peak_rss_all.data(), 1, DataType::kInt64));
  KOLO_RETURN_IF_ERROR(
      Allgather(&o.timed_images, o.images_all.data(), 1, DataType::kInt64));
  KOLO_ASSIGN_OR_RETURN(o.memory, GatherMemory(strategy, size));
  return Status::Ok();
}

// Rank 0's benchmark lines and --json file.
Status ReportBenchmark(const Flags& f, const Setup& s, int32_t size,
                       int32_t threads, const BenchmarkOutcome& o) {
  const bool distributed = !f.no_kolo;
  int64_t images = 0;
  for (int64_t n : o.images_all) images += n;
  const double rate = static_cast<double>(images) / o.seconds;
  const double step_ms =
      1000.0 * o.seconds /
      static_cast<double>(std::max<int64_t>(f.benchmark_steps, 1));
  const double communication =
      o.stats.collective_seconds - o.stats_before.collective_seconds;
  const double negotiation =
      o.stats.negotiation_seconds - o.stats_before.negotiation_seconds;
  const double waiting = o.wait;
  const double per_step_ms =
      1000.0 / static_cast<double>(std::max<int64_t>(f.benchmark_steps, 1));
  fmt::print(
      "kolo-train benchmark: {} on {}, {} {} x batch {}, {} thread{}: {} "
      "steps in {:.3f} s, {:.1f} ms/step, {:.0f} images/s ({:.0f} per "
      "worker)\n",
      f.model, f.dataset, size,
      distributed ? "kolo workers" : "plain LibTorch process", f.batch_size,
      threads, threads == 1 ? "" : "s", f.benchmark_steps, o.seconds, step_ms,
      rate, rate / size);
  fmt::print(
      "kolo-train benchmark: rank 0 per step: data {:.2f} ms, forward {:.2f} "
      "ms, "
      "backward {:.2f} ms, step {:.2f} ms (of which waiting for allreduces "
      "{:.2f} ms)\n",
      o.data_s * per_step_ms, o.forward_s * per_step_ms,
      o.backward_s * per_step_ms, o.step_s * per_step_ms,
      waiting * per_step_ms);
  fmt::print(
      "kolo-train benchmark: rank 0 holds {:.2f} MiB of optimizer state, "
      "{:.2f} MiB of gradients at most, {:.2f} MiB of master weights\n",
      o.memory[0].optimizer_state_bytes / 1048576.0,
      o.memory[0].gradient_bytes / 1048576.0,
      o.memory[0].master_weight_bytes / 1048576.0);
  std::fflush(stdout);
  if (f.json_path.empty()) return Status::Ok();
  json out;
  out["tool"] = "kolo-train";
  out["config"] = SharedConfig(f, s, size, threads);
  out["config"].update(
      json{{"mode", "benchmark"},
           {"framework", distributed ? "kolo" : "libtorch"},
           {"backend", distributed ? BackendName(ActiveBackend()) : "none"},
           {"warmup_steps", f.benchmark_warmup},
           {"steps", f.benchmark_steps}});
  bench::TrainResult result;
  result.images_per_second = rate;
  result.images_per_second_per_worker = rate / size;
  result.seconds = o.seconds;
  result.step_ms = step_ms;
  result.communication_seconds = communication;
  result.negotiation_seconds = negotiation;
  // The training thread blocked on allreduces in Step().
  result.waiting_seconds = waiting;
  // Rank 0's mean per timed step; "step" includes the waiting.
  result.phase_ms =
      bench::StepPhases{o.data_s * per_step_ms, o.forward_s * per_step_ms,
                        o.backward_s * per_step_ms, o.step_s * per_step_ms};
  result.final_loss = o.loss;
  result.peak_rss_bytes = o.peak_rss_all;
  result.memory = RankMemoryOf(o.memory);
  out["result"] = bench::ToJson(result);
  out["runtime"] = RuntimeTraffic();
  return bench::WriteJsonFile(f.json_path, out);
}

// --benchmark-steps: the throughput of the training loop alone. Every rank
// runs --benchmark-warmup untimed steps (allocator, caches, the runtime's
// response cache), meets the others at a barrier, runs the timed steps and
// meets them again, so all ranks time the same window. With --no-kolo the
// same loop runs on the bare optimizer in one process.
Status Benchmark(const Flags& f, int32_t rank, int32_t size, int32_t threads,
                 Setup& s) {
  const bool distributed = !f.no_kolo;
  ::torch::optim::Optimizer& inner = *s.optimizer;
  if (f.precision == "bf16") s.model->to(::torch::kBFloat16);
  std::unique_ptr<kolo::torch::TrainingStrategy> strategy =
      distributed ? MakeStrategy(f, *s.model, inner).strategy
                  : std::make_unique<BareOptimizer>(inner);
  KOLO_RETURN_IF_ERROR(strategy->Start());
  const double lr =
      f.no_lr_scaling || FileDrivesLearningRate(f) ? f.lr : f.lr * size;
  for (auto& group : inner.param_groups()) group.options().set_lr(lr);
  strategy->SetLearningRate(lr);
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        TrainSampler(f, s.data, rank, size));
  BenchmarkOutcome outcome;
  KOLO_RETURN_IF_ERROR(
      RunBenchmarkSteps(f, rank, s, sampler, *strategy, outcome));
  KOLO_RETURN_IF_ERROR(GatherBenchmark(distributed, size, *strategy, outcome));
  if (rank != 0) return Status::Ok();
  return ReportBenchmark(f, s, size, threads, outcome);
}

}  // namespace

int RunTraining(const Flags& f) {
  const Clock::time_point start = Clock::now();
  const int32_t rank = Rank();
  const int32_t size = Size();
  const int32_t threads =
      f.threads > 0
          ? f.threads
          : std::max<int32_t>(
                1, static_cast<int32_t>(std::thread::hardware_concurrency()) /
                       LocalSize());
  ::torch::set_num_threads(threads);

  Setup setup;
  // The job's shape against the flags first: every rank sees the same
  // world, so rank 0 alone says what is wrong.
  Status status =
      kolo::torch::AgreeAcrossRanks(CheckModelParallelWorld(f, size));
  if (status.ok()) {
    Status prepared;
    try {
      prepared = Prepare(f, rank, &setup);
    } catch (const std::exception& e) {
      // Still agree below: the other ranks must not wait for this one.
      std::string message = e.what();
      prepared = Internal(message.substr(0, message.find('\n')));
    }
    status = kolo::torch::AgreeAcrossRanks(prepared);
  }
  if (status.ok()) {
    switch (ModeOf(f)) {
      case TrainingMode::kDataParallel:
      case TrainingMode::kZero:
        status = f.benchmark_steps > 0
                     ? Benchmark(f, rank, size, threads, setup)
                     : Train(f, rank, size, threads, start, setup);
        break;
      case TrainingMode::kPipeline:
        status = RunPipeline(f, rank, size, threads, setup.data);
        break;
      case TrainingMode::kParameterServers:
        status = RunParameterServers(f, rank, size, threads, setup);
        break;
      case TrainingMode::kElastic:
        // main() runs it before any job is joined: its workers join rounds.
        status = Internal("--elastic reached the one-job trainer");
        break;
    }
  }
  if (status.ok()) return 0;
  if (status.code() != StatusCode::kAborted ||
      status.message() != kolo::torch::kReportedByAnotherRank) {
    PrintError(status);
  }
  return 1;
}

}  // namespace kolo::train
