#include "model_parallel.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config_file.h"
#include "json_file.h"
#include "kolo/kolo.h"
#include "kolo/models.h"
#include "kolo/point_to_point.h"
#include "kolo/process_role.h"
#include "kolo/torch_parameter_server.h"
#include "kolo/torch_pipeline.h"
#include "kolo/torch_zero.h"
#include "measure.h"
#include "plan.h"
#include "progress_line.h"
#include "table.h"

namespace kolo::train {
namespace {

using bench::FormatDuration;
using bench::FormatFixed;
using bench::ProgressLine;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The ranks that evaluate, average the loss and meet at barriers: the
// whole world (pipeline), or the workers' group (parameter servers, whose
// servers are busy serving).
class Peers {
 public:
  explicit Peers(std::shared_ptr<ProcessGroup> group)
      : group_(std::move(group)) {}

  int32_t size() const { return group_ ? group_->size() : Size(); }

  Status Sum(int64_t* values, int64_t count) {
    return group_ ? group_->Allreduce(values, values, count, DataType::kInt64,
                                      ReduceOp::kSum)
                  : Allreduce(values, values, count, DataType::kInt64,
                              ReduceOp::kSum);
  }
  StatusOr<double> Average(double value) {
    KOLO_RETURN_IF_ERROR(
        group_
            ? group_->Allreduce(&value, &value, 1, DataType::kFloat64,
                                ReduceOp::kSum)
            : Allreduce(&value, &value, 1, DataType::kFloat64, ReduceOp::kSum));
    return value / size();
  }
  // Every peer's `value`, in peer order; T is int64_t or double.
  template <typename T>
  StatusOr<std::vector<T>> Gather(T value) {
    const DataType type =
        std::is_same_v<T, double> ? DataType::kFloat64 : DataType::kInt64;
    std::vector<T> all(static_cast<size_t>(size()));
    KOLO_RETURN_IF_ERROR(group_ ? group_->Allgather(&value, all.data(), 1, type)
                                : Allgather(&value, all.data(), 1, type));
    return all;
  }
  Status Meet() { return group_ ? group_->Barrier() : Barrier(); }

 private:
  std::shared_ptr<ProcessGroup> group_;  // null: the world
};

// Correct and total summed over the peers; the total must be the test set.
StatusOr<Evaluation> SumEvaluation(Peers& peers, int64_t correct, int64_t total,
                                   int64_t test_size) {
  int64_t counts[2] = {correct, total};
  KOLO_RETURN_IF_ERROR(peers.Sum(counts, 2));
  if (counts[1] != test_size) {
    return Internal(fmt::format(
        "evaluation counted {} test images across the ranks, not {}", counts[1],
        test_size));
  }
  Evaluation result;
  result.correct = counts[0];
  result.total = counts[1];
  return result;
}

// Shard `shard` of `shards` of the test set, unshuffled and padded to equal
// sizes, and how many of its rows are real (UnpaddedShardSize).
StatusOr<std::unique_ptr<data::DataLoader>> TestShard(const data::Dataset& test,
                                                      int32_t shard,
                                                      int32_t shards,
                                                      int64_t* real_rows) {
  data::DistributedSampler::Options options;
  options.rank = shard;
  options.world_size = shards;
  options.shuffle = false;
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        data::DistributedSampler::Create(test.size(), options));
  *real_rows = UnpaddedShardSize(test.size(), shard, shards);
  data::LoaderOptions loader_options;
  loader_options.batch_size = kEvalBatchSize;
  loader_options.num_workers = kLoaderWorkers;
  return data::DataLoader::Create(test, sampler.Indices(0), loader_options);
}

// What differs between the modes; the loops below are shared.
struct Mode {
  std::string name;           // "pipeline", "parameter-server"
  std::string description;    // for the header line
  json settings;              // the JSON config's mode-specific entries
  int32_t shard = 0;          // this rank's DistributedSampler position
  int32_t shards = 1;         // replicas or workers
  int32_t compute_ranks = 1;  // ranks that train (for "per worker" rates)
  bool prints = false;        // rank 0
  int64_t parameters = 0;
  // The rate of step `iteration`, or fixed when the schedule is the
  // servers'.
  std::optional<LrPlan> lr_plan;
  double fixed_lr = 0;
  // One training step on `batch` at `lr`; the loss it reports (the global
  // batch's for the pipeline, the worker's own for parameter servers).
  std::function<StatusOr<double>(const data::Batch& batch, double lr)> step;
  std::function<StatusOr<Evaluation>()> evaluate;
  std::function<void(bool train)> set_training;
  // The mode's figures for the JSON result (collective over the peers),
  // and one line for the summary.
  std::function<StatusOr<json>()> statistics;
  std::function<std::string()> summary;
  // Seconds this rank waited for other ranks so far.
  std::function<double()> waiting_seconds;
  std::unique_ptr<Peers> peers;
};

data::LoaderOptions TrainLoaderOptions(const Flags& f, const Data& d,
                                       bool drop_last) {
  data::LoaderOptions options;
  options.batch_size = f.batch_size;
  options.num_workers = kLoaderWorkers;
  options.augmentation = d.augmentation;
  options.augmentation_seed = f.seed;
  options.drop_last = drop_last;
  return options;
}

void PrintHeader(const Flags& f, const Data& d, const Mode& mode,
                 int64_t steps_per_epoch) {
  fmt::print(
      "kolo-train: {} ({} parameters) on {} ({}: {} training, {} test "
      "images)\n",
      f.model, mode.parameters, f.dataset, d.source, d.train.size(),
      d.test.size());
  const std::string lr_text =
      mode.lr_plan
          ? fmt::format("{} lr {} scaled to {}, {} schedule", f.optimizer, f.lr,
                        mode.lr_plan->scaled_lr, f.lr_schedule)
          : fmt::format("{} lr {} on the servers, constant", f.optimizer,
                        mode.fixed_lr);
  fmt::print("kolo-train: {}; batch {} per {}; {}; {} step{} per epoch\n",
             mode.description, f.batch_size,
             mode.name == "pipeline" ? "replica" : "worker", lr_text,
             steps_per_epoch, steps_per_epoch == 1 ? "" : "s");
  std::fflush(stdout);
}

json BaseConfig(const Flags& f, const Data& d, const Mode& mode, int32_t size) {
  json config = {{"mode", mode.name},
                 {"model", f.model},
                 {"parameters", mode.parameters},
                 {"dataset", f.dataset},
                 {"data", d.source},
                 {"workers", size},
                 {"batch_size", f.batch_size},
                 {"global_batch_size", f.batch_size * mode.shards},
                 {"optimizer", f.optimizer},
                 {"lr", f.lr},
                 {"seed", f.seed}};
  config.update(mode.settings);
  return config;
}

// Rank 0's summary table and --json file, with the plain mode's result
// keys (kolo-bench reads them alike).
Status Report(const Flags& f, const Data& d, const Mode& mode, int32_t size,
              const json& history, const Evaluation& eval, double train_loss,
              double wall_seconds, double train_seconds, int64_t images_trained,
              const std::vector<int64_t>& peak_rss_bytes,
              const json& statistics) {
  const double rate = train_seconds > 0
                          ? static_cast<double>(images_trained) / train_seconds
                          : 0;
  auto column = [](const char* title, const char* unit, int width) {
    bench::Table::Column c;
    c.title = title;
    c.unit = unit;
    c.width = width;
    return c;
  };
  bench::Table table(
      {column("wall", "(s)", 8), column("train", "(s)", 8),
       column("images/s", "(total)", 10), column("images/s", "(worker)", 10),
       column("test acc", "(%)", 8), column("train loss", "", 10)});
  fmt::print("# kolo-train: {} on {}, {}, {} epoch{}, batch {} per {}\n",
             f.model, f.dataset, mode.description, f.epochs,
             f.epochs == 1 ? "" : "s", f.batch_size,
             mode.name == "pipeline" ? "replica" : "worker");
  for (const std::string& line : table.HeaderLines()) fmt::print("{}\n", line);
  fmt::print("{}\n",
             table.Row({FormatFixed(wall_seconds, 1),
                        FormatFixed(train_seconds, 1), FormatFixed(rate, 1),
                        FormatFixed(rate / mode.compute_ranks, 1),
                        FormatFixed(100.0 * eval.accuracy(), 2),
                        FormatFixed(train_loss, 4)}));
  fmt::print("# {}\n", mode.summary());
  std::fflush(stdout);
  if (f.json_path.empty()) return Status::Ok();
  json out;
  out["tool"] = "kolo-train";
  out["config"] = BaseConfig(f, d, mode, size);
  out["config"]["epochs"] = f.epochs;
  out["config"]["train_images"] = d.train.size();
  out["config"]["test_images"] = d.test.size();
  out["history"] = history;
  out["result"] = {{"test_accuracy", eval.accuracy()},
                   {"test_correct", eval.correct},
                   {"test_total", eval.total},
                   {"train_loss", train_loss},
                   {"wall_seconds", wall_seconds},
                   {"train_seconds", train_seconds},
                   {"images_trained", images_trained},
                   {"images_per_second", rate},
                   {"images_per_second_per_worker", rate / mode.compute_ranks},
                   {"peak_rss_bytes", peak_rss_bytes},
                   {mode.name, statistics}};
  return bench::WriteJsonFile(f.json_path, out);
}

StatusOr<data::DistributedSampler> TrainSampler(const Flags& f, const Data& d,
                                                const Mode& mode) {
  data::DistributedSampler::Options options;
  options.rank = mode.shard;
  options.world_size = mode.shards;
  options.seed = f.seed;
  return data::DistributedSampler::Create(d.train.size(), options);
}

// A pipeline cannot split a batch smaller than its micro-batches: such a
// last batch is dropped (the shards are equal, so every replica drops it).
bool DropsLastBatch(const Flags& f, const data::DistributedSampler& sampler) {
  const int64_t remainder = sampler.num_samples() % f.batch_size;
  return f.pipeline_stages > 0 && remainder != 0 && remainder < f.micro_batches;
}

// The training loop of both modes: per epoch, this rank's shard in
// batches, the progress line, evaluation, the averaged loss and the epoch's
// line; then rank 0's summary and JSON.
Status TrainEpochs(const Flags& f, int32_t rank, int32_t size,
                   Clock::time_point start, const Data& d, Mode& mode) {
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        TrainSampler(f, d, mode));
  const bool drop_last = DropsLastBatch(f, sampler);
  const data::LoaderOptions loader_options =
      TrainLoaderOptions(f, d, drop_last);
  const int64_t batches_per_epoch =
      drop_last ? sampler.num_samples() / f.batch_size
                : (sampler.num_samples() + f.batch_size - 1) / f.batch_size;
  if (batches_per_epoch == 0) {
    return InvalidArgument(fmt::format(
        "--batch-size {}: each of the {} data shards holds {} images, too "
        "few for one batch of --micro-batches {}",
        f.batch_size, mode.shards, sampler.num_samples(), f.micro_batches));
  }
  if (mode.lr_plan) {
    mode.lr_plan->warmup_iterations = mode.lr_plan->scaled_lr == f.lr
                                          ? 0
                                          : f.warmup_epochs * batches_per_epoch;
    mode.lr_plan->total_iterations = f.epochs * batches_per_epoch;
  }
  if (mode.prints) PrintHeader(f, d, mode, batches_per_epoch);

  ProgressLine progress(stdout, {mode.prints && bench::DrawsInPlace(stdout)});
  json history = json::array();
  double train_seconds = 0;
  int64_t images_trained = 0;
  Evaluation last_eval;
  double last_loss = 0;
  for (int64_t epoch = 0; epoch < f.epochs; ++epoch) {
    ::torch::manual_seed(EpochSeed(f.seed, epoch, rank));
    mode.set_training(true);
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<data::DataLoader> loader,
        data::DataLoader::Create(d.train, sampler, epoch, loader_options));
    const Clock::time_point epoch_start = Clock::now();
    double loss_sum = 0;
    int64_t seen = 0;
    double lr = mode.fixed_lr;
    while (true) {
      KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      if (mode.lr_plan) {
        lr = LearningRate(*mode.lr_plan,
                          epoch * batches_per_epoch + batch->number);
      }
      StatusOr<double> loss = mode.step(*batch, lr);
      if (!loss.ok()) {
        return loss.status().WithContext(
            fmt::format("epoch {} batch {}", epoch + 1, batch->number + 1));
      }
      const int64_t n = batch->labels.size(0);
      loss_sum += *loss * static_cast<double>(n);
      seen += n;
      if (!mode.prints) continue;
      const double elapsed = Seconds(Clock::now() - epoch_start);
      const int64_t done = batch->number + 1;
      const int64_t left = (batches_per_epoch - done) +
                           (f.epochs - epoch - 1) * batches_per_epoch;
      progress.Update(
          fmt::format(
              "epoch {}/{}  step {}/{}  loss {:.4f}  {:.0f} images/s  ETA {}",
              epoch + 1, f.epochs, done, batches_per_epoch,
              loss_sum / static_cast<double>(seen),
              static_cast<double>(seen) * mode.shards / elapsed,
              FormatDuration(elapsed / static_cast<double>(done) *
                             static_cast<double>(left))),
          /*force=*/done == batches_per_epoch);
    }
    const double epoch_seconds = Seconds(Clock::now() - epoch_start);
    train_seconds += epoch_seconds;
    const int64_t epoch_images = seen * mode.shards;
    images_trained += epoch_images;
    KOLO_ASSIGN_OR_RETURN(last_eval, mode.evaluate());
    KOLO_ASSIGN_OR_RETURN(
        last_loss,
        mode.peers->Average(loss_sum /
                            static_cast<double>(std::max<int64_t>(seen, 1))));
    EpochFigures figures;
    figures.epoch = epoch + 1;
    figures.epochs = f.epochs;
    figures.lr = lr;
    figures.train_loss = last_loss;
    figures.eval = last_eval;
    figures.seconds = epoch_seconds;
    figures.images_per_second =
        static_cast<double>(epoch_images) / epoch_seconds;
    history.push_back(EpochRecord(figures));
    if (mode.prints) progress.Finish(EpochLine(figures));
  }
  const double wall_seconds = Seconds(Clock::now() - start);
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> peak_rss,
                        mode.peers->Gather<int64_t>(PeakRssBytes()));
  KOLO_ASSIGN_OR_RETURN(json statistics, mode.statistics());
  if (!mode.prints) return Status::Ok();
  return Report(f, d, mode, size, history, last_eval, last_loss, wall_seconds,
                train_seconds, images_trained, peak_rss, statistics);
}

// --benchmark-steps in both modes: --benchmark-warmup untimed steps, a
// barrier, the timed steps, a barrier, so every rank times one window.
// Every data shard takes equal batches, so the images of a step are the
// batch times the shards.
Status Benchmark(const Flags& f, int32_t rank, int32_t size, const Data& d,
                 Mode& mode) {
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        TrainSampler(f, d, mode));
  const data::LoaderOptions loader_options =
      TrainLoaderOptions(f, d, DropsLastBatch(f, sampler));
  const double lr = mode.lr_plan ? mode.lr_plan->scaled_lr : mode.fixed_lr;
  const int64_t total = f.benchmark_warmup + f.benchmark_steps;
  int64_t steps = 0;
  int64_t timed_images = 0;
  double loss_value = 0;
  double waiting_before = 0;
  Clock::time_point timed_start = Clock::now();
  mode.set_training(true);
  for (int64_t epoch = 0; steps < total; ++epoch) {
    ::torch::manual_seed(EpochSeed(f.seed, epoch, rank));
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<data::DataLoader> loader,
        data::DataLoader::Create(d.train, sampler, epoch, loader_options));
    int64_t batches = 0;
    while (steps < total) {
      if (steps == f.benchmark_warmup) {
        KOLO_RETURN_IF_ERROR(mode.peers->Meet());
        waiting_before = mode.waiting_seconds();
        timed_start = Clock::now();
      }
      KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      ++batches;
      StatusOr<double> loss = mode.step(*batch, lr);
      if (!loss.ok()) {
        return loss.status().WithContext(
            fmt::format("benchmark step {}", steps + 1));
      }
      if (steps >= f.benchmark_warmup) timed_images += batch->labels.size(0);
      loss_value = *loss;
      ++steps;
    }
    if (batches == 0) {
      return InvalidArgument(fmt::format(
          "--batch-size {}: a data shard of {} images holds no batch",
          f.batch_size, sampler.num_samples()));
    }
  }
  KOLO_RETURN_IF_ERROR(mode.peers->Meet());
  const double seconds = Seconds(Clock::now() - timed_start);
  const double waiting = mode.waiting_seconds() - waiting_before;
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> peak_rss,
                        mode.peers->Gather<int64_t>(PeakRssBytes()));
  KOLO_ASSIGN_OR_RETURN(json statistics, mode.statistics());
  if (!mode.prints) return Status::Ok();
  const double images = static_cast<double>(timed_images * mode.shards);
  const double rate = images / seconds;
  const double per_step =
      1.0 / static_cast<double>(std::max<int64_t>(f.benchmark_steps, 1));
  fmt::print(
      "kolo-train benchmark: {} on {}, {}, batch {}: {} steps in {:.3f} s, "
      "{:.1f} ms/step, {:.0f} images/s ({:.0f} per worker)\n",
      f.model, f.dataset, mode.description, f.batch_size, f.benchmark_steps,
      seconds, 1000.0 * seconds * per_step, rate, rate / mode.compute_ranks);
  fmt::print("kolo-train benchmark: rank 0 waited {:.2f} ms per step; {}\n",
             1000.0 * waiting * per_step, mode.summary());
  std::fflush(stdout);
  if (f.json_path.empty()) return Status::Ok();
  json out;
  out["tool"] = "kolo-train";
  out["config"] = BaseConfig(f, d, mode, size);
  out["config"]["framework"] = "kolo";
  out["config"]["backend"] = BackendName(ActiveBackend());
  out["config"]["warmup_steps"] = f.benchmark_warmup;
  out["config"]["steps"] = f.benchmark_steps;
  out["result"] = {{"images_per_second", rate},
                   {"images_per_second_per_worker", rate / mode.compute_ranks},
                   {"seconds", seconds},
                   {"step_ms", 1000.0 * seconds * per_step},
                   // Rank 0's time blocked on other ranks (the pipeline's
                   // bubble and transfers; the servers' answers).
                   {"waiting_seconds", waiting},
                   {"final_loss", loss_value},
                   {"peak_rss_bytes", peak_rss},
                   {mode.name, statistics}};
  return bench::WriteJsonFile(f.json_path, out);
}

// ---------------------------------------------------------------- pipeline

// The pipeline's half of the test set: each replica evaluates its padded
// shard through Forward (every rank of the world calls it equally often),
// and its last stage counts the shard's real rows. A batch smaller than the
// micro-batches is padded by repeating its rows; the copies are not
// counted.
StatusOr<Evaluation> EvaluatePipeline(kolo::torch::Pipeline& pipeline,
                                      const data::Dataset& test, Peers& peers,
                                      int32_t micro_batches) {
  int64_t real_rows = 0;
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<data::DataLoader> loader,
      TestShard(test, pipeline.replica(), pipeline.replicas(), &real_rows));
  int64_t offset = 0;
  int64_t correct = 0;
  while (true) {
    KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
    if (!batch) break;
    const int64_t n = batch->labels.size(0);
    ::torch::Tensor input = batch->images;
    if (n < micro_batches) {
      input = input.index_select(
          0, ::torch::arange(micro_batches, ::torch::kInt64).remainder(n));
    }
    KOLO_ASSIGN_OR_RETURN(::torch::Tensor logits, pipeline.Forward(input));
    const int64_t real = std::clamp<int64_t>(real_rows - offset, 0, n);
    offset += n;
    if (!pipeline.is_last_stage() || real == 0) continue;
    correct += logits.narrow(0, 0, real)
                   .argmax(1)
                   .eq(batch->labels.narrow(0, 0, real))
                   .sum()
                   .item<int64_t>();
  }
  return SumEvaluation(peers, correct, pipeline.is_last_stage() ? real_rows : 0,
                       test.size());
}

// The pipeline --pipeline-stages, --micro-batches, --schedule and --balance
// ask for, over `sequence`.
StatusOr<std::unique_ptr<kolo::torch::Pipeline>> CreatePipeline(
    const Flags& f, const Data& d, ::torch::nn::Sequential& sequence) {
  kolo::torch::PipelineOptions options;
  options.stages = f.pipeline_stages;
  options.micro_batches = f.micro_batches;
  KOLO_ASSIGN_OR_RETURN(options.schedule,
                        kolo::torch::ParsePipelineSchedule(f.schedule));
  KOLO_ASSIGN_OR_RETURN(options.balance, kolo::torch::ParseBalance(f.balance));
  // Balance::kTime times each layer's forward on one micro-batch; zeros of
  // the images' shape cost what images do.
  ::torch::Tensor sample;
  if (options.balance == kolo::torch::PipelineOptions::Balance::kTime) {
    std::vector<int64_t> shape = d.train.images.sizes().vec();
    shape[0] = std::max<int64_t>(1, f.batch_size / f.micro_batches);
    sample = ::torch::zeros(shape);
  }
  StatusOr<std::unique_ptr<kolo::torch::Pipeline>> created =
      kolo::torch::Pipeline::Create(sequence, options, sample);
  if (!created.ok()) {
    return created.status().WithContext(
        fmt::format("--pipeline-stages {} of --model {} ({} layers)",
                    f.pipeline_stages, f.model, sequence->size()));
  }
  return created;
}

// Per rank (kolo-bench pipeline reads one figure per stage): the stage's
// time, its peak activations and what its parameters and optimizer hold.
StatusOr<json> PipelineStatisticsJson(kolo::torch::Pipeline& pipeline,
                                      ::torch::optim::Optimizer* optimizer,
                                      Peers& peers) {
  const kolo::torch::PipelineStatistics& s = pipeline.statistics();
  int64_t parameter_bytes = 0;
  for (const ::torch::Tensor& t : pipeline.parameters())
    parameter_bytes += t.numel() * t.element_size();
  const int64_t state_bytes =
      optimizer ? kolo::torch::OptimizerStateBytes(*optimizer) : 0;
  KOLO_ASSIGN_OR_RETURN(std::vector<double> busy,
                        peers.Gather(s.total_busy_seconds));
  KOLO_ASSIGN_OR_RETURN(std::vector<double> idle,
                        peers.Gather(s.total_idle_seconds));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> peaks,
                        peers.Gather<int64_t>(s.max_peak_activations));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> parameters,
                        peers.Gather(parameter_bytes));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> states, peers.Gather(state_bytes));
  return json{{"bubble_fraction", s.BubbleFraction()},
              {"max_peak_activations", peaks},
              {"busy_seconds", busy},
              {"idle_seconds", idle},
              {"parameter_bytes", parameters},
              {"optimizer_state_bytes", states}};
}

Status RunPipeline(const Flags& f, int32_t rank, int32_t size, int32_t threads,
                   const Data& d) {
  // The same seed as Prepare's model: the same initial weights.
  ::torch::manual_seed(f.seed);
  KOLO_ASSIGN_OR_RETURN(
      ::torch::nn::Sequential sequence,
      models::CreateSequentialModel(f.model, d.train.num_classes,
                                    d.train.images.size(1)));
  StatusOr<std::unique_ptr<kolo::torch::Pipeline>> created =
      CreatePipeline(f, d, sequence);
  if (!created.ok()) return created.status();
  std::shared_ptr<kolo::torch::Pipeline> pipeline = *std::move(created);
  std::vector<::torch::Tensor> parameters = pipeline->parameters();
  std::shared_ptr<::torch::optim::Optimizer> optimizer;
  if (!parameters.empty()) {
    optimizer = kolo::torch::MakeOptimizer(RunOptimizerConfig(f))(parameters);
  }

  Mode mode;
  mode.name = "pipeline";
  const int32_t replicas = pipeline->replicas();
  std::string split;
  for (int64_t layers : pipeline->split())
    split += (split.empty() ? "" : "+") + std::to_string(layers);
  mode.description = fmt::format(
      "{} stage{} x {} replica{} ({} schedule, {} micro-batches, layers "
      "{}), {} thread{} per rank",
      f.pipeline_stages, f.pipeline_stages == 1 ? "" : "s", replicas,
      replicas == 1 ? "" : "s", f.schedule, f.micro_batches, split, threads,
      threads == 1 ? "" : "s");
  mode.settings = {{"pipeline_stages", f.pipeline_stages},
                   {"replicas", replicas},
                   {"micro_batches", f.micro_batches},
                   {"schedule", f.schedule},
                   {"balance", f.balance},
                   {"split", pipeline->split()},
                   {"threads", threads}};
  mode.shard = pipeline->replica();
  mode.shards = replicas;
  mode.compute_ranks = size;
  mode.prints = rank == 0;
  mode.parameters = models::CountParameters(*sequence);
  LrPlan plan;
  plan.base_lr = f.lr;
  plan.scaled_lr = f.no_lr_scaling ? f.lr : f.lr * replicas;
  plan.schedule =
      f.lr_schedule == "constant" ? LrSchedule::kConstant : LrSchedule::kCosine;
  mode.lr_plan = plan;
  mode.peers = std::make_unique<Peers>(nullptr);
  mode.step = [pipeline, optimizer](const data::Batch& batch,
                                    double lr) -> StatusOr<double> {
    if (optimizer) {
      for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
      optimizer->zero_grad();
    }
    KOLO_ASSIGN_OR_RETURN(
        double loss,
        pipeline->TrainStep(
            batch.images, batch.labels,
            [](const ::torch::Tensor& logits, const ::torch::Tensor& labels) {
              return ::torch::nn::functional::cross_entropy(logits, labels);
            }));
    if (optimizer) optimizer->step();
    return loss;
  };
  Peers* peers = mode.peers.get();
  mode.evaluate = [pipeline, peers, &d, &f]() {
    return EvaluatePipeline(*pipeline, d.test, *peers, f.micro_batches);
  };
  mode.set_training = [sequence](bool train) mutable {
    sequence->train(train);
  };
  mode.waiting_seconds = [pipeline]() {
    return pipeline->statistics().total_idle_seconds;
  };
  // Per rank (kolo-bench pipeline reads one figure per stage): the stage's
  // time, its peak activations and what its parameters and optimizer hold.
  mode.statistics = [pipeline, optimizer, peers]() {
    return PipelineStatisticsJson(*pipeline, optimizer.get(), *peers);
  };
  mode.summary = [pipeline]() {
    const kolo::torch::PipelineStatistics& s = pipeline->statistics();
    return fmt::format(
        "pipeline: rank 0 idle {:.1f}% of its step time (bubble and "
        "transfers), at most {} micro-batch{} of activations held",
        100.0 * s.BubbleFraction(), s.max_peak_activations,
        s.max_peak_activations == 1 ? "" : "es");
  };
  if (f.benchmark_steps > 0) return Benchmark(f, rank, size, d, mode);
  return TrainEpochs(f, rank, size, Clock::now(), d, mode);
}

// -------------------------------------------------------- parameter server

StatusOr<Evaluation> EvaluateWorker(models::Model& model,
                                    const data::Dataset& test, Peers& peers,
                                    int32_t worker) {
  int64_t real_rows = 0;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<data::DataLoader> loader,
                        TestShard(test, worker, peers.size(), &real_rows));
  ::torch::NoGradGuard no_grad;
  model.eval();
  int64_t offset = 0;
  int64_t correct = 0;
  while (true) {
    KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
    if (!batch) break;
    const int64_t n = batch->labels.size(0);
    const int64_t real = std::clamp<int64_t>(real_rows - offset, 0, n);
    offset += n;
    if (real == 0) continue;
    correct += model.forward(batch->images.narrow(0, 0, real))
                   .argmax(1)
                   .eq(batch->labels.narrow(0, 0, real))
                   .sum()
                   .item<int64_t>();
  }
  return SumEvaluation(peers, correct, real_rows, test.size());
}

kolo::torch::ParameterServerMode PsMode(const std::string& name) {
  if (name == "async") return kolo::torch::ParameterServerMode::kAsynchronous;
  if (name == "stale") {
    return kolo::torch::ParameterServerMode::kBoundedStaleness;
  }
  return kolo::torch::ParameterServerMode::kSynchronous;
}

// A worker's parameter-server figures, for the JSON and rank 0's line.
json ParameterServerJson(const kolo::torch::ParameterServerStatistics& st) {
  return json{{"steps", st.steps},
              {"max_staleness", st.max_staleness},
              {"bytes_sent", st.bytes_sent},
              {"bytes_received", st.bytes_received},
              {"wait_seconds", st.wait_seconds}};
}

std::string ParameterServerSummary(
    const kolo::torch::ParameterServerStatistics& st) {
  return fmt::format(
      "parameter servers: worker 0 took {} steps, waited {:.2f} s for the "
      "servers, pushed {:.1f} MiB, pulled {:.1f} MiB, staleness at most {}",
      st.steps, st.wait_seconds, st.bytes_sent / 1048576.0,
      st.bytes_received / 1048576.0, st.max_staleness);
}

Status RunParameterServers(const Flags& f, int32_t rank, int32_t size,
                           int32_t threads, Setup& s) {
  const int32_t workers = size - f.parameter_servers;
  std::vector<int32_t> worker_ranks(static_cast<size_t>(workers));
  for (int32_t r = 0; r < workers; ++r) worker_ranks[r] = r;
  // Collective over the world, before the servers start serving.
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> group,
                        NewGroup(worker_ranks));

  kolo::torch::ParameterServerOptions options;
  options.mode = PsMode(f.ps_mode);
  options.server_count = f.parameter_servers;
  options.staleness = f.staleness;
  options.optimizer = RunOptimizerConfig(f);
  options.optimizer.lr =
      options.mode == kolo::torch::ParameterServerMode::kSynchronous &&
              !f.no_lr_scaling
          ? f.lr * workers
          : f.lr;
  std::shared_ptr<models::Model> model = s.model;
  KOLO_ASSIGN_OR_RETURN(
      std::shared_ptr<kolo::torch::ParameterServer> ps,
      kolo::torch::ParameterServer::Create(model->named_parameters(), options));
  if (ps->IsServer()) {
    Status served = ps->Serve();
    if (!served.ok()) {
      return served.WithContext(
          fmt::format("parameter server {} (rank {})", ps->role_index(), rank));
    }
    return Status::Ok();
  }

  Mode mode;
  mode.name = "parameter_server";
  mode.description = fmt::format(
      "{} worker{} and {} parameter server{} ({} mode{}), {} thread{} per "
      "rank",
      workers, workers == 1 ? "" : "s", f.parameter_servers,
      f.parameter_servers == 1 ? "" : "s", f.ps_mode,
      f.ps_mode == "stale" ? fmt::format(", staleness {}", f.staleness) : "",
      threads, threads == 1 ? "" : "s");
  mode.settings = {{"parameter_servers", f.parameter_servers},
                   {"parameter_server_workers", workers},
                   {"ps_mode", f.ps_mode},
                   {"staleness", f.staleness},
                   {"server_lr", options.optimizer.lr},
                   {"threads", threads}};
  mode.shard = ps->role_index();
  mode.shards = workers;
  mode.compute_ranks = workers;
  mode.prints = rank == 0;
  mode.parameters = models::CountParameters(*model);
  // The workers run the schedule (warm-up, decay) and each push asks the
  // servers for its step's rate: the synchronous servers' rate scaled by
  // the workers, as allreduce's is; the asynchronous ones' one worker's.
  LrPlan plan;
  plan.base_lr = f.lr;
  plan.scaled_lr = options.optimizer.lr;
  plan.schedule =
      f.lr_schedule == "constant" ? LrSchedule::kConstant : LrSchedule::kCosine;
  mode.lr_plan = plan;
  mode.peers = std::make_unique<Peers>(group);
  mode.step = [ps, model](const data::Batch& batch,
                          double lr) -> StatusOr<double> {
    ps->SetLearningRate(lr);
    ps->ZeroGrad();
    ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
        model->forward(batch.images), batch.labels);
    loss.backward();
    KOLO_RETURN_IF_ERROR(ps->Step());
    return loss.item<double>();
  };
  Peers* peers = mode.peers.get();
  const int32_t worker = ps->role_index();
  mode.evaluate = [model, peers, worker, &s]() {
    return EvaluateWorker(*model, s.data.test, *peers, worker);
  };
  mode.set_training = [model](bool train) { model->train(train); };
  mode.waiting_seconds = [ps]() { return ps->statistics().wait_seconds; };
  mode.statistics = [ps]() -> StatusOr<json> {
    return ParameterServerJson(ps->statistics());
  };
  mode.summary = [ps]() { return ParameterServerSummary(ps->statistics()); };
  Status trained = f.benchmark_steps > 0
                       ? Benchmark(f, rank, size, s.data, mode)
                       : TrainEpochs(f, rank, size, Clock::now(), s.data, mode);
  // The servers wait for every worker's finish, even after an error: a
  // worker that leaves without one looks to them like one that died.
  Status finished = ps->Finish();
  KOLO_RETURN_IF_ERROR(trained);
  return finished;
}

}  // namespace

bool UsesModelParallelism(const Flags& f) {
  return f.pipeline_stages > 0 || f.parameter_servers > 0;
}

Status CheckModelParallelWorld(const Flags& f, int32_t world_size) {
  if (f.pipeline_stages > 0 && world_size % f.pipeline_stages != 0) {
    return InvalidArgument(fmt::format(
        "--pipeline-stages {} does not divide the world of {} ranks (the "
        "world is stages x replicas)",
        f.pipeline_stages, world_size));
  }
  StatusOr<RoleInfo> role = Role();
  if (!role.ok()) return role.status();
  if (f.parameter_servers == 0) {
    if (role->server_count > 0) {
      return InvalidArgument(fmt::format(
          "kolorun started {} parameter server{} (--servers {}) but "
          "kolo-train has no --parameter-servers",
          role->server_count, role->server_count == 1 ? "" : "s",
          role->server_count));
    }
    return Status::Ok();
  }
  if (role->server_count == 0) {
    return InvalidArgument(fmt::format(
        "--parameter-servers {} needs server processes: start the job with "
        "kolorun -np N --servers {} kolo-train ...",
        f.parameter_servers, f.parameter_servers));
  }
  if (role->server_count != f.parameter_servers) {
    return InvalidArgument(fmt::format(
        "--parameter-servers {} but kolorun started {} (kolorun --servers "
        "{})",
        f.parameter_servers, role->server_count, role->server_count));
  }
  if (world_size <= f.parameter_servers) {
    return InvalidArgument(fmt::format(
        "--parameter-servers {} leaves no workers in a world of {} ranks",
        f.parameter_servers, world_size));
  }
  return Status::Ok();
}

Status RunModelParallel(const Flags& f, int32_t rank, int32_t size,
                        int32_t threads, Setup& s) {
  if (f.pipeline_stages > 0) {
    return RunPipeline(f, rank, size, threads, s.data);
  }
  return RunParameterServers(f, rank, size, threads, s);
}

}  // namespace kolo::train
