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

using bench::FormatDuration;
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

// The message of an error that another rank has printed already (see
// AgreeAcrossRanks); RunTraining exits with it silently.
constexpr char kReportedByAnotherRank[] = "reported by another rank";

void PrintError(const Status& status) {
  std::string message = status.message();
  if (message.empty()) message = status.ToString();
  fmt::print(stderr, "kolo-train: {}\n", message);
  std::fflush(stderr);
}

// Every rank learns whether `status` failed on any rank, so that no rank
// goes on into a collective that a failed rank will never join. The first
// failed rank gets its own error back and prints it; the other ranks, failed
// or not, get kReportedByAnotherRank: under the same flags on one host the
// ranks fail alike, and one line says it.
Status AgreeAcrossRanks(const Status& status, int32_t rank, int32_t size) {
  if (size == 1) return status;
  const int32_t failed = status.ok() ? 0 : 1;
  std::vector<int32_t> all(static_cast<size_t>(size), 0);
  Status gathered = Allgather(&failed, all.data(), 1, DataType::kInt32);
  if (!gathered.ok()) {
    return status.ok() ? gathered.WithContext("agreeing on setup") : status;
  }
  const auto first = std::find(all.begin(), all.end(), 1);
  if (first == all.end()) return Status::Ok();
  if (first - all.begin() == rank) return status;
  return Aborted(kReportedByAnotherRank);
}

// ---------------------------------------------------------------- summary

// FNV-1a over the bytes of every parameter, in named_parameters() order:
// equal on two ranks (or two runs) only when the weights are bit-identical.
uint64_t ParameterChecksum(models::Model& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& item : model.named_parameters()) {
    ::torch::Tensor t = item.value().detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
    for (size_t i = 0; i < n; ++i) {
      hash ^= bytes[i];
      hash *= 0x100000001b3ULL;
    }
  }
  return hash;
}

bench::Table::Column Column(const char* title, const char* unit, int width) {
  bench::Table::Column column;
  column.title = title;
  column.unit = unit;
  column.width = width;
  return column;
}

// Every rank's optimizer memory, on every rank.
StatusOr<std::vector<EngineMemory>> GatherMemory(const Engine& engine,
                                                 int32_t size) {
  const EngineMemory mine = engine.Memory();
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

// Per rank, as kolo-bench zero and the PyTorch peer report it.
json MemoryJson(const std::vector<EngineMemory>& memory) {
  json state = json::array(), gradients = json::array(),
       masters = json::array();
  for (const EngineMemory& m : memory) {
    state.push_back(m.optimizer_state_bytes);
    gradients.push_back(m.gradient_bytes);
    masters.push_back(m.master_weight_bytes);
  }
  return {{"optimizer_state_bytes", state},
          {"gradient_bytes", gradients},
          {"master_weight_bytes", masters}};
}

// The same per rank figures in the result schema's terms.
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
  out["config"] = {
      {"model", f.model},
      {"parameters", models::CountParameters(*s.model)},
      {"dataset", f.dataset},
      {"data", s.data.source},
      {"train_images", s.data.train.size()},
      {"test_images", s.data.test.size()},
      {"workers", size},
      {"epochs", f.epochs},
      {"batch_size", f.batch_size},
      {"global_batch_size", f.batch_size * size * f.backward_passes_per_step},
      {"lr", f.lr},
      {"scaled_lr", o.scaled_lr},
      {"warmup_epochs", o.warmup_epochs},
      {"lr_schedule", f.lr_schedule},
      {"optimizer", f.optimizer},
      {"zero_stage", f.zero_stage},
      {"precision", f.precision},
      {"gradient_clipping", f.gradient_clipping},
      {"config_file", f.config_path},
      {"momentum", f.momentum},
      {"nesterov", f.nesterov},
      {"weight_decay", f.weight_decay},
      {"compression", f.compression},
      {"backward_passes_per_step", f.backward_passes_per_step},
      {"bucket_kib", f.bucket_kib},
      {"threads", o.threads},
      {"seed", f.seed},
      {"resumed_after_epoch", o.resumed_after_epoch}};
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

// Rank 0's lines about single steps: a float16 overflow at the minimum loss
// scale (the step was skipped; training may be diverging), and, with a
// --config file, DeepSpeed's progress line every steps_per_print steps.
// Both go above the progress line.
void ReportStep(const Flags& f, const Engine& engine,
                const kolo::torch::StepOutcome& outcome, double loss, double lr,
                ProgressLine* progress) {
  if (outcome.overflow_at_minimum_scale) {
    progress->Print(fmt::format(
        "kolo-train: warning: step {} overflowed at the minimum loss scale "
        "{}; skipped",
        engine.steps_taken() + engine.skipped_steps(), outcome.loss_scale));
  }
  if (!f.config || !outcome.stepped || f.config->steps_per_print <= 0 ||
      engine.steps_taken() % f.config->steps_per_print != 0) {
    return;
  }
  std::string line = fmt::format("kolo-train: step {}  loss {:.4f}  lr {:.4g}",
                                 engine.steps_taken(), loss, lr);
  if (outcome.gradient_norm > 0)
    line += fmt::format("  grad norm {:.4g}", outcome.gradient_norm);
  if (f.precision == "fp16")
    line += fmt::format("  loss scale {}  skipped {}", outcome.loss_scale,
                        engine.skipped_steps());
  progress->Print(line);
}

Status Train(const Flags& f, int32_t rank, int32_t size, int32_t threads,
             Clock::time_point start, Setup& s) {
  models::Model& model = *s.model;
  ::torch::optim::Optimizer& inner = *s.optimizer;
  const data::Dataset& train = s.data.train;
  const data::Dataset& test = s.data.test;

  // Every rank starts from rank 0's weights, optimizer state and epoch.
  if (f.precision == "bf16") model.to(::torch::kBFloat16);
  KOLO_RETURN_IF_ERROR(kolo::torch::BroadcastParameters(model, 0));
  KOLO_RETURN_IF_ERROR(kolo::torch::BroadcastOptimizerState(inner, 0));
  int64_t epochs_done = s.epochs_done;
  KOLO_RETURN_IF_ERROR(
      Broadcast(&epochs_done, &epochs_done, 1, DataType::kInt64, 0));

  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                        Engine::Create(f, model, inner));
  const std::string zero_dir = f.checkpoint_dir + "/zero";
  if (engine->zero() != nullptr && f.resume) {
    // ZeroOptimizer's shards load at any number of workers.
    Status loaded = engine->zero()->Load(zero_dir);
    if (loaded.code() == StatusCode::kNotFound && epochs_done > 0) {
      return InvalidArgument("--resume: " + CheckpointPath(f.checkpoint_dir) +
                             " holds " + std::to_string(epochs_done) +
                             " epochs but " + loaded.message());
    }
    if (!loaded.ok() && loaded.code() != StatusCode::kNotFound) return loaded;
  }
  const bool file_lr = FileDrivesLearningRate(f);
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        TrainSampler(f, s.data, rank, size));
  const data::LoaderOptions loader_options = TrainLoaderOptions(f, s.data);
  const int64_t batches_per_epoch =
      (sampler.num_samples() + f.batch_size - 1) / f.batch_size;
  const int64_t images_per_epoch = sampler.num_samples() * size;

  // A --config file's rate is the global batch's (config_file.h).
  const double scaled_lr = f.no_lr_scaling || file_lr ? f.lr : f.lr * size;
  const int64_t warmup_iterations =
      scaled_lr == f.lr ? 0 : f.warmup_epochs * batches_per_epoch;
  LrPlan lr_plan;
  lr_plan.base_lr = f.lr;
  lr_plan.scaled_lr = scaled_lr;
  lr_plan.warmup_iterations = warmup_iterations;
  lr_plan.total_iterations = f.epochs * batches_per_epoch;
  lr_plan.schedule =
      f.lr_schedule == "constant" ? LrSchedule::kConstant : LrSchedule::kCosine;
  const bool has_buffers = !model.buffers().empty();

  if (rank == 0) {
    fmt::print(
        "kolo-train: {} ({} parameters) on {} ({}: {} training, {} test "
        "images)\n",
        f.model, models::CountParameters(model), f.dataset, s.data.source,
        train.size(), test.size());
    std::string lr_text = fmt::format("{} lr {}", f.optimizer, f.lr);
    if (scaled_lr != f.lr) lr_text += fmt::format(" scaled to {}", scaled_lr);
    if (warmup_iterations > 0) {
      lr_text += fmt::format(" with {} warm-up epoch{}", f.warmup_epochs,
                             f.warmup_epochs == 1 ? "" : "s");
    }
    lr_text += file_lr ? ", the --config file's schedule"
                       : fmt::format(", {} schedule", f.lr_schedule);
    if (engine->zero() != nullptr) {
      lr_text += fmt::format("; ZeRO stage {}, {}", f.zero_stage, f.precision);
      if (f.gradient_clipping > 0)
        lr_text +=
            fmt::format(", gradients clipped to norm {}", f.gradient_clipping);
    }
    const int64_t steps = batches_per_epoch / f.backward_passes_per_step;
    fmt::print(
        "kolo-train: {} workers x batch {} (global {}), {} LibTorch "
        "thread{} per worker; {}; {} step{} per epoch\n",
        size, f.batch_size, f.batch_size * size * f.backward_passes_per_step,
        threads, threads == 1 ? "" : "s", lr_text, steps,
        steps == 1 ? "" : "s");
    if (!s.resumed_from.empty()) {
      fmt::print("kolo-train: resumed from {} after epoch {}\n", s.resumed_from,
                 epochs_done);
    }
    if (!f.checkpoint_dir.empty() &&
        batches_per_epoch % f.backward_passes_per_step != 0) {
      fmt::print(
          "kolo-train: warning: {} batches per epoch do not divide by "
          "--backward-passes-per-step {}; a resumed run will not match an "
          "uninterrupted one exactly\n",
          batches_per_epoch, f.backward_passes_per_step);
    }
    std::fflush(stdout);
  }

  // Rank 0's epoch in flight, redrawn in place on a terminal (kolorun gives
  // rank 0 one when its own output is a terminal); elsewhere, only the line
  // per epoch.
  ProgressLine progress(stdout, {rank == 0 && bench::DrawsInPlace(stdout)});
  json history = s.history;
  double train_seconds = 0;
  int64_t images_trained = 0;
  int64_t passes = 0;  // backward passes in this process
  std::optional<Evaluation> last_eval;
  double last_loss =
      history.empty() ? 0.0 : history.back().value("train_loss", 0.0);

  for (int64_t epoch = epochs_done; epoch < f.epochs; ++epoch) {
    ::torch::manual_seed(EpochSeed(f.seed, epoch, rank));
    model.train();
    kolo::metrics::SetEpoch(epoch + 1);
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<data::DataLoader> loader,
        data::DataLoader::Create(train, sampler, epoch, loader_options));
    const Clock::time_point epoch_start = Clock::now();
    double loss_sum = 0;
    int64_t seen = 0;
    double lr = f.lr;
    while (true) {
      KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      const Clock::time_point step_start = Clock::now();
      const int64_t iteration = epoch * batches_per_epoch + batch->number;
      if (file_lr) {
        const LrScheduleConfig& schedule = f.config->scheduler;
        lr = LearningRateAt(schedule, f.lr, engine->steps_taken());
        if (std::optional<double> momentum =
                MomentumAt(schedule, engine->steps_taken())) {
          engine->SetMomentum(*momentum);
        }
      } else {
        lr = LearningRate(lr_plan, iteration);
      }
      engine->SetLearningRate(lr);
      if (passes % f.backward_passes_per_step == 0) engine->ZeroGrad();
      ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
          model.forward(ModelInput(model, batch->images)).to(::torch::kFloat32),
          batch->labels);
      engine->Backward(loss);
      ++passes;
      StatusOr<kolo::torch::StepOutcome> outcome = engine->Step();
      if (!outcome.ok()) {
        return outcome.status().WithContext(
            fmt::format("epoch {} batch {}", epoch + 1, batch->number + 1));
      }
      const double step_loss = loss.item<double>();
      const int64_t n = batch->labels.size(0);
      kolo::metrics::RecordTrainingStep(n, step_loss,
                                        Seconds(Clock::now() - step_start));
      kolo::metrics::SetLearningRate(lr);
      if (rank == 0) ReportStep(f, *engine, *outcome, step_loss, lr, &progress);
      loss_sum += step_loss * static_cast<double>(n);
      seen += n;

      if (rank == 0) {
        const double elapsed = Seconds(Clock::now() - epoch_start);
        const double rate = static_cast<double>(seen) * size / elapsed;
        const int64_t done = batch->number + 1;
        const double per_batch = elapsed / static_cast<double>(done);
        const int64_t left = (batches_per_epoch - done) +
                             (f.epochs - epoch - 1) * batches_per_epoch;
        progress.Update(
            fmt::format(
                "epoch {}/{}  step {}/{}  loss {:.4f}  {:.0f} images/s  ETA {}",
                epoch + 1, f.epochs, done, batches_per_epoch,
                loss_sum / static_cast<double>(seen), rate,
                FormatDuration(per_batch * static_cast<double>(left))),
            /*force=*/done == batches_per_epoch);
      }
    }
    const double epoch_seconds = Seconds(Clock::now() - epoch_start);
    train_seconds += epoch_seconds;
    images_trained += images_per_epoch;

    // Batch-norm statistics follow each rank's own batches; rank 0's become
    // everyone's, so that every rank evaluates (and a resumed run continues
    // from) the model rank 0 checkpoints.
    if (has_buffers) {
      KOLO_RETURN_IF_ERROR(kolo::torch::BroadcastParameters(model, 0));
    }
    KOLO_ASSIGN_OR_RETURN(Evaluation eval, Evaluate(model, test, rank, size));
    kolo::metrics::SetTestAccuracy(eval.accuracy());
    KOLO_ASSIGN_OR_RETURN(
        last_loss,
        kolo::torch::AverageMetric(
            loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)),
            "kolo-train.train_loss"));
    last_eval = eval;
    const double rate = static_cast<double>(images_per_epoch) / epoch_seconds;
    EpochFigures figures;
    figures.epoch = epoch + 1;
    figures.epochs = f.epochs;
    figures.lr = lr;
    figures.train_loss = last_loss;
    figures.eval = eval;
    figures.seconds = epoch_seconds;
    figures.images_per_second = rate;
    history.push_back(EpochRecord(figures));
    if (rank == 0) progress.Finish(EpochLine(figures));

    Status saved;
    if (rank == 0 && !f.checkpoint_dir.empty()) {
      saved = SaveCheckpoint(f.checkpoint_dir, model, inner,
                             CheckpointInfoAfter(f, epoch + 1, history.dump()));
    }
    // Rank 0 alone writes; the others must not train on if it failed.
    if (!f.checkpoint_dir.empty()) {
      KOLO_RETURN_IF_ERROR(AgreeAcrossRanks(saved, rank, size));
      // Every rank writes its own shard of a ZeroOptimizer's state.
      if (engine->zero() != nullptr)
        KOLO_RETURN_IF_ERROR(engine->zero()->Save(zero_dir));
    }
  }
  if (!last_eval) {
    // The checkpoint already held every epoch: report the model it holds.
    KOLO_ASSIGN_OR_RETURN(Evaluation eval, Evaluate(model, test, rank, size));
    last_eval = eval;
  }
  const double wall_seconds = Seconds(Clock::now() - start);

  // Bit-identical parameters on every rank is what data parallelism
  // promises; check it rather than assume it.
  const uint64_t checksum = ParameterChecksum(model);
  std::vector<uint64_t> checksums(static_cast<size_t>(size));
  KOLO_RETURN_IF_ERROR(
      Allgather(&checksum, checksums.data(), 1, DataType::kInt64));
  const int64_t peak_rss = PeakRssBytes();
  std::vector<int64_t> peak_rss_all(static_cast<size_t>(size));
  KOLO_RETURN_IF_ERROR(
      Allgather(&peak_rss, peak_rss_all.data(), 1, DataType::kInt64));
  KOLO_ASSIGN_OR_RETURN(std::vector<EngineMemory> memory,
                        GatherMemory(*engine, size));
  for (int32_t r = 1; r < size; ++r) {
    if (checksums[r] != checksums[0]) {
      return Internal(
          fmt::format("the ranks ended with different parameters: rank 0 "
                      "checksum {:#018x}, rank {} {:#018x}",
                      checksums[0], r, checksums[r]));
    }
  }
  if (rank != 0) return Status::Ok();

  Outcome outcome;
  outcome.resumed_after_epoch = epochs_done;
  outcome.threads = threads;
  outcome.scaled_lr = scaled_lr;
  outcome.warmup_epochs = warmup_iterations > 0 ? f.warmup_epochs : 0;
  outcome.history = std::move(history);
  outcome.evaluation = *last_eval;
  outcome.train_loss = last_loss;
  outcome.wall_seconds = wall_seconds;
  outcome.train_seconds = train_seconds;
  outcome.images_trained = images_trained;
  outcome.peak_rss_bytes = std::move(peak_rss_all);
  outcome.checksum = checksum;
  outcome.memory = std::move(memory);
  outcome.skipped_steps = engine->skipped_steps();
  if (engine->zero() != nullptr)
    outcome.loss_scale = engine->zero()->loss_scaler().scale();
  return Report(f, s, size, outcome);
}

// ------------------------------------------------------------- benchmark

// --benchmark-steps: the throughput of the training loop alone. Every rank
// runs --benchmark-warmup untimed steps (allocator, caches, the runtime's
// response cache), meets the others at a barrier, runs the timed steps and
// meets them again, so all ranks time the same window. With --no-kolo the
// same loop runs on the bare optimizer in one process.
Status Benchmark(const Flags& f, int32_t rank, int32_t size, int32_t threads,
                 Setup& s) {
  const bool distributed = !f.no_kolo;
  models::Model& model = *s.model;
  ::torch::optim::Optimizer& inner = *s.optimizer;
  std::unique_ptr<Engine> engine;
  if (f.precision == "bf16") model.to(::torch::kBFloat16);
  if (distributed) {
    KOLO_RETURN_IF_ERROR(kolo::torch::BroadcastParameters(model, 0));
    KOLO_ASSIGN_OR_RETURN(engine, Engine::Create(f, model, inner));
  }
  const double lr =
      f.no_lr_scaling || FileDrivesLearningRate(f) ? f.lr : f.lr * size;
  for (auto& group : inner.param_groups()) group.options().set_lr(lr);
  if (engine) engine->SetLearningRate(lr);

  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        TrainSampler(f, s.data, rank, size));
  const data::LoaderOptions loader_options = TrainLoaderOptions(f, s.data);

  const int64_t total = f.benchmark_warmup + f.benchmark_steps;
  int64_t steps = 0;
  int64_t timed_images = 0;
  double loss_value = 0;
  Clock::time_point timed_start = Clock::now();
  RuntimeStats stats_before;
  double wait_before = 0;
  // Seconds per phase over the timed steps: where a step's time goes.
  double data_s = 0, forward_s = 0, backward_s = 0, step_s = 0;
  model.train();
  for (int64_t epoch = 0; steps < total; ++epoch) {
    ::torch::manual_seed(EpochSeed(f.seed, epoch, rank));
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<data::DataLoader> loader,
        data::DataLoader::Create(s.data.train, sampler, epoch, loader_options));
    while (steps < total) {
      if (steps == f.benchmark_warmup) {
        if (distributed) {
          KOLO_RETURN_IF_ERROR(Barrier());
          stats_before = GetRuntimeStats();
          wait_before = engine->wait_seconds();
          engine->ResetPeakMemory();
        }
        timed_start = Clock::now();
      }
      const Clock::time_point t0 = Clock::now();
      KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      if (distributed) {
        engine->ZeroGrad();
      } else {
        inner.zero_grad();
      }
      const Clock::time_point t1 = Clock::now();
      ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
          model.forward(ModelInput(model, batch->images)).to(::torch::kFloat32),
          batch->labels);
      const Clock::time_point t2 = Clock::now();
      if (distributed) {
        engine->Backward(loss);
      } else {
        loss.backward();
      }
      const Clock::time_point t3 = Clock::now();
      if (distributed) {
        StatusOr<kolo::torch::StepOutcome> outcome = engine->Step();
        if (!outcome.ok()) {
          return outcome.status().WithContext(
              fmt::format("benchmark step {}", steps + 1));
        }
      } else {
        inner.step();
      }
      if (steps >= f.benchmark_warmup) {
        timed_images += batch->labels.size(0);
        data_s += Seconds(t1 - t0);
        forward_s += Seconds(t2 - t1);
        backward_s += Seconds(t3 - t2);
        step_s += Seconds(Clock::now() - t3);
      }
      ++steps;
      loss_value = loss.item<double>();
    }
  }
  if (distributed) KOLO_RETURN_IF_ERROR(Barrier());
  const double seconds = Seconds(Clock::now() - timed_start);
  RuntimeStats stats = distributed ? GetRuntimeStats() : RuntimeStats{};

  const int64_t peak_rss = PeakRssBytes();
  std::vector<int64_t> peak_rss_all(static_cast<size_t>(size), peak_rss);
  std::vector<int64_t> images_all(static_cast<size_t>(size), timed_images);
  std::vector<EngineMemory> memory(static_cast<size_t>(size));
  if (distributed) {
    KOLO_RETURN_IF_ERROR(
        Allgather(&peak_rss, peak_rss_all.data(), 1, DataType::kInt64));
    KOLO_RETURN_IF_ERROR(
        Allgather(&timed_images, images_all.data(), 1, DataType::kInt64));
    KOLO_ASSIGN_OR_RETURN(memory, GatherMemory(*engine, size));
  } else {
    memory[0].optimizer_state_bytes = kolo::torch::OptimizerStateBytes(inner);
  }
  if (rank != 0) return Status::Ok();
  int64_t images = 0;
  for (int64_t n : images_all) images += n;
  const double rate = static_cast<double>(images) / seconds;
  const double step_ms =
      1000.0 * seconds /
      static_cast<double>(std::max<int64_t>(f.benchmark_steps, 1));
  const double communication =
      stats.collective_seconds - stats_before.collective_seconds;
  const double negotiation =
      stats.negotiation_seconds - stats_before.negotiation_seconds;
  const double waiting =
      distributed ? engine->wait_seconds() - wait_before : 0.0;
  const double per_step_ms =
      1000.0 / static_cast<double>(std::max<int64_t>(f.benchmark_steps, 1));
  fmt::print(
      "kolo-train benchmark: {} on {}, {} {} x batch {}, {} thread{}: {} "
      "steps in {:.3f} s, {:.1f} ms/step, {:.0f} images/s ({:.0f} per "
      "worker)\n",
      f.model, f.dataset, size,
      distributed ? "kolo workers" : "plain LibTorch process", f.batch_size,
      threads, threads == 1 ? "" : "s", f.benchmark_steps, seconds, step_ms,
      rate, rate / size);
  fmt::print(
      "kolo-train benchmark: rank 0 per step: data {:.2f} ms, forward {:.2f} "
      "ms, "
      "backward {:.2f} ms, step {:.2f} ms (of which waiting for allreduces "
      "{:.2f} ms)\n",
      data_s * per_step_ms, forward_s * per_step_ms, backward_s * per_step_ms,
      step_s * per_step_ms, waiting * per_step_ms);
  fmt::print(
      "kolo-train benchmark: rank 0 holds {:.2f} MiB of optimizer state, "
      "{:.2f} MiB of gradients at most, {:.2f} MiB of master weights\n",
      memory[0].optimizer_state_bytes / 1048576.0,
      memory[0].gradient_bytes / 1048576.0,
      memory[0].master_weight_bytes / 1048576.0);
  std::fflush(stdout);
  if (f.json_path.empty()) return Status::Ok();
  json out;
  out["tool"] = "kolo-train";
  out["config"] = {
      {"mode", "benchmark"},
      {"framework", distributed ? "kolo" : "libtorch"},
      {"backend", distributed ? BackendName(ActiveBackend()) : "none"},
      {"model", f.model},
      {"parameters", models::CountParameters(model)},
      {"dataset", f.dataset},
      {"workers", size},
      {"batch_size", f.batch_size},
      {"threads", threads},
      {"warmup_steps", f.benchmark_warmup},
      {"steps", f.benchmark_steps},
      {"compression", f.compression},
      {"bucket_kib", f.bucket_kib},
      {"optimizer", f.optimizer},
      {"zero_stage", f.zero_stage},
      {"precision", f.precision},
      {"gradient_clipping", f.gradient_clipping},
      {"config_file", f.config_path},
      {"seed", f.seed}};
  out["result"] = {{"images_per_second", rate},
                   {"images_per_second_per_worker", rate / size},
                   {"seconds", seconds},
                   {"step_ms", step_ms},
                   {"communication_seconds", communication},
                   {"negotiation_seconds", negotiation},
                   // The training thread blocked on allreduces in Step().
                   {"waiting_seconds", waiting},
                   // Rank 0's mean per timed step; "step" includes the waiting.
                   {"phase_ms",
                    {{"data", data_s * per_step_ms},
                     {"forward", forward_s * per_step_ms},
                     {"backward", backward_s * per_step_ms},
                     {"step", step_s * per_step_ms}}},
                   {"final_loss", loss_value},
                   {"peak_rss_bytes", peak_rss_all},
                   {"memory", MemoryJson(memory)}};
  out["runtime"] = RuntimeTraffic();
  return bench::WriteJsonFile(f.json_path, out);
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
      AgreeAcrossRanks(CheckModelParallelWorld(f, size), rank, size);
  if (status.ok()) {
    Status prepared;
    try {
      prepared = Prepare(f, rank, &setup);
    } catch (const std::exception& e) {
      // Still agree below: the other ranks must not wait for this one.
      std::string message = e.what();
      prepared = Internal(message.substr(0, message.find('\n')));
    }
    status = AgreeAcrossRanks(prepared, rank, size);
  }
  if (status.ok()) {
    if (UsesModelParallelism(f)) {
      status = RunModelParallel(f, rank, size, threads, setup);
    } else {
      status = f.benchmark_steps > 0
                   ? Benchmark(f, rank, size, threads, setup)
                   : Train(f, rank, size, threads, start, setup);
    }
  }
  if (status.ok()) return 0;
  if (status.code() != StatusCode::kAborted ||
      status.message() != kReportedByAnotherRank) {
    PrintError(status);
  }
  return 1;
}

}  // namespace kolo::train
