#include "model_parallel.h"

#include <fmt/format.h>

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
#include "kolo/process_role.h"
#include "kolo/torch_zero.h"
#include "kolo/trainer_model_parallel.h"
#include "measure.h"
#include "plan.h"
#include "progress_line.h"
#include "table.h"
#include "train_result.h"

namespace kolo::train {
namespace {

using bench::FormatFixed;
using bench::ProgressLine;
using Clock = std::chrono::steady_clock;
using kolo::torch::TrainingPeers;
using nlohmann::json;

// Every peer's `value`, in peer order; T is int64_t or double.
template <typename T>
StatusOr<std::vector<T>> Gather(TrainingPeers& peers, T value) {
  const DataType type =
      std::is_same_v<T, double> ? DataType::kFloat64 : DataType::kInt64;
  std::vector<T> all(static_cast<size_t>(peers.size()));
  KOLO_RETURN_IF_ERROR(peers.Allgather(&value, all.data(), 1, type));
  return all;
}

// What differs between the modes; the Trainer and the benchmark loop below
// run both through their strategy.
struct Mode {
  std::string name;           // "pipeline", "parameter_server"
  std::string description;    // for the header line
  json settings;              // the JSON config's mode-specific entries
  int32_t compute_ranks = 1;  // ranks that train (for "per worker" rates)
  int64_t parameters = 0;
  // The rate after the warm-up (plan.h); the schedule is made once the
  // loop's batches per epoch are known.
  double scaled_lr = 0;
  models::Model* model = nullptr;
  kolo::torch::TrainingStrategy* strategy = nullptr;
  // The ranks that evaluate, average the loss and meet at barriers: the
  // whole world (pipeline), or the workers (parameter servers).
  TrainingPeers* peers = nullptr;
  // The mode's figures for the JSON result (collective over the peers),
  // and one line for the summary.
  std::function<StatusOr<json>()> statistics;
  std::function<std::string()> summary;
  // The data shards: replicas or workers.
  int32_t shards() const { return strategy->Shard().count; }
};

void PrintHeader(const Flags& f, const Data& d, const Mode& mode,
                 int64_t steps_per_epoch) {
  fmt::print(
      "kolo-train: {} ({} parameters) on {} ({}: {} training, {} test "
      "images)\n",
      f.model, mode.parameters, f.dataset, d.source, d.train.size(),
      d.test.size());
  const std::string lr_text =
      fmt::format("{} lr {} scaled to {}, {} schedule", f.optimizer, f.lr,
                  mode.scaled_lr, f.lr_schedule);
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
                 {"global_batch_size", f.batch_size * mode.shards()},
                 {"optimizer", f.optimizer},
                 {"lr", f.lr},
                 {"seed", f.seed}};
  config.update(mode.settings);
  return config;
}

// Rank 0's summary table and --json file, with the plain mode's result
// keys (kolo-bench reads them alike).
Status Report(const Flags& f, const Data& d, const Mode& mode, int32_t size,
              const json& history, const kolo::torch::FitResult& fit,
              double wall_seconds, const std::vector<int64_t>& peak_rss_bytes,
              const json& statistics) {
  const double train_loss =
      fit.epochs.empty() ? 0.0 : fit.epochs.back().train_loss;
  const double rate =
      fit.train_seconds > 0
          ? static_cast<double>(fit.images_trained) / fit.train_seconds
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
                        FormatFixed(fit.train_seconds, 1), FormatFixed(rate, 1),
                        FormatFixed(rate / mode.compute_ranks, 1),
                        FormatFixed(100.0 * fit.eval.accuracy(), 2),
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
  bench::TrainResult result;
  result.test_accuracy = fit.eval.accuracy();
  result.test_correct = fit.eval.correct;
  result.test_total = fit.eval.total;
  result.train_loss = train_loss;
  result.wall_seconds = wall_seconds;
  result.train_seconds = fit.train_seconds;
  result.images_trained = fit.images_trained;
  result.images_per_second = rate;
  result.images_per_second_per_worker = rate / mode.compute_ranks;
  result.peak_rss_bytes = peak_rss_bytes;
  result.extra[mode.name] = statistics;
  out["result"] = bench::ToJson(result);
  return bench::WriteJsonFile(f.json_path, out);
}

// Both modes on the Trainer: the flags' rate schedule, rank 0's header,
// progress and epoch lines; then rank 0's summary and JSON.
Status TrainEpochs(const Flags& f, int32_t rank, int32_t size,
                   Clock::time_point start, const Data& d, Mode& mode) {
  kolo::torch::Trainer trainer(*mode.model, *mode.strategy,
                               TrainerOptionsOf(f, d));
  ProgressLine progress(stdout, {rank == 0 && bench::DrawsInPlace(stdout)});
  json history = json::array();
  kolo::torch::TrainerHooks& hooks = trainer.hooks();
  LinearScalingSchedule schedule;
  hooks.on_start = [&](int64_t, int64_t batches_per_epoch) {
    schedule = ScheduleOf(f, mode.scaled_lr, batches_per_epoch);
    if (rank == 0) PrintHeader(f, d, mode, batches_per_epoch);
  };
  hooks.learning_rate = [&schedule](const kolo::torch::StepPosition& p) {
    return LearningRate(schedule, p.iteration);
  };
  const int32_t shards = mode.shards();
  hooks.on_step = [&](const kolo::torch::StepReport& r) {
    if (rank != 0) return;
    progress.Update(ProgressText(r, f.epochs, shards),
                    /*force=*/r.batch + 1 == r.batches_per_epoch);
  };
  hooks.on_epoch = [&](const kolo::torch::EpochReport& e) {
    const EpochFigures figures = FiguresOf(e, f.epochs);
    history.push_back(EpochRecord(figures));
    if (rank == 0) progress.Finish(EpochLine(figures));
  };
  KOLO_ASSIGN_OR_RETURN(kolo::torch::FitResult fit,
                        trainer.Fit(d.train, d.test));
  const double wall_seconds = Seconds(Clock::now() - start);
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> peak_rss,
                        Gather<int64_t>(*mode.peers, PeakRssBytes()));
  KOLO_ASSIGN_OR_RETURN(json statistics, mode.statistics());
  if (rank != 0) return Status::Ok();
  return Report(f, d, mode, size, history, fit, wall_seconds, peak_rss,
                statistics);
}

// --benchmark-warmup untimed steps, then --benchmark-steps timed ones,
// epoch after epoch as long as it takes, each through the strategy at the
// scaled rate. Returns the images this rank trained on in the timed steps
// and the last step's loss.
struct BenchmarkSteps {
  int64_t timed_images = 0;
  double loss = 0;
  double seconds = 0;
  double waiting = 0;  // seconds blocked on other ranks
};
StatusOr<BenchmarkSteps> RunBenchmarkSteps(const Flags& f, int32_t rank,
                                           const Data& d, Mode& mode) {
  kolo::torch::TrainingStrategy& strategy = *mode.strategy;
  const kolo::torch::TrainingShard shard = strategy.Shard();
  data::DistributedSampler::Options sampling;
  sampling.rank = shard.index;
  sampling.world_size = shard.count;
  sampling.seed = f.seed;
  KOLO_ASSIGN_OR_RETURN(
      data::DistributedSampler sampler,
      data::DistributedSampler::Create(d.train.size(), sampling));
  data::LoaderOptions loading;
  loading.batch_size = f.batch_size;
  loading.num_workers = kLoaderWorkers;
  loading.augmentation = d.augmentation;
  loading.augmentation_seed = f.seed;
  loading.drop_last = shard.DropsLastBatch(sampler.num_samples(), f.batch_size);
  strategy.SetLearningRate(mode.scaled_lr);
  mode.model->train();
  const int64_t total = f.benchmark_warmup + f.benchmark_steps;
  int64_t steps = 0;
  BenchmarkSteps out;
  double waiting_before = 0;
  Clock::time_point timed_start = Clock::now();
  for (int64_t epoch = 0; steps < total; ++epoch) {
    ::torch::manual_seed(EpochSeed(f.seed, epoch, rank));
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<data::DataLoader> loader,
        data::DataLoader::Create(d.train, sampler, epoch, loading));
    int64_t batches = 0;
    while (steps < total) {
      if (steps == f.benchmark_warmup) {
        KOLO_RETURN_IF_ERROR(mode.peers->Barrier());
        waiting_before = strategy.wait_seconds();
        timed_start = Clock::now();
      }
      KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      ++batches;
      strategy.ZeroGrad();
      StatusOr<::torch::Tensor> loss =
          strategy.ForwardBackward(*mode.model, *batch);
      Status stepped = loss.ok() ? strategy.Step().status() : loss.status();
      if (!stepped.ok()) {
        return stepped.WithContext(fmt::format("benchmark step {}", steps + 1));
      }
      if (steps >= f.benchmark_warmup)
        out.timed_images += batch->labels.size(0);
      out.loss = loss->item<double>();
      ++steps;
    }
    if (batches == 0) {
      return InvalidArgument(fmt::format(
          "--batch-size {}: a data shard of {} images holds no batch",
          f.batch_size, sampler.num_samples()));
    }
  }
  KOLO_RETURN_IF_ERROR(mode.peers->Barrier());
  out.seconds = Seconds(Clock::now() - timed_start);
  out.waiting = strategy.wait_seconds() - waiting_before;
  return out;
}

// --benchmark-steps in both modes: every rank times one window between two
// barriers. Every data shard takes equal batches, so the images of a step
// are the batch times the shards.
Status Benchmark(const Flags& f, int32_t rank, int32_t size, const Data& d,
                 Mode& mode) {
  KOLO_ASSIGN_OR_RETURN(BenchmarkSteps run,
                        RunBenchmarkSteps(f, rank, d, mode));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> peak_rss,
                        Gather<int64_t>(*mode.peers, PeakRssBytes()));
  KOLO_ASSIGN_OR_RETURN(json statistics, mode.statistics());
  if (rank != 0) return Status::Ok();
  const double images = static_cast<double>(run.timed_images * mode.shards());
  const double rate = images / run.seconds;
  const double per_step =
      1.0 / static_cast<double>(std::max<int64_t>(f.benchmark_steps, 1));
  fmt::print(
      "kolo-train benchmark: {} on {}, {}, batch {}: {} steps in {:.3f} s, "
      "{:.1f} ms/step, {:.0f} images/s ({:.0f} per worker)\n",
      f.model, f.dataset, mode.description, f.batch_size, f.benchmark_steps,
      run.seconds, 1000.0 * run.seconds * per_step, rate,
      rate / mode.compute_ranks);
  fmt::print("kolo-train benchmark: rank 0 waited {:.2f} ms per step; {}\n",
             1000.0 * run.waiting * per_step, mode.summary());
  std::fflush(stdout);
  if (f.json_path.empty()) return Status::Ok();
  json out;
  out["tool"] = "kolo-train";
  out["config"] = BaseConfig(f, d, mode, size);
  out["config"]["framework"] = "kolo";
  out["config"]["backend"] = BackendName(ActiveBackend());
  out["config"]["warmup_steps"] = f.benchmark_warmup;
  out["config"]["steps"] = f.benchmark_steps;
  bench::TrainResult result;
  result.images_per_second = rate;
  result.images_per_second_per_worker = rate / mode.compute_ranks;
  result.seconds = run.seconds;
  result.step_ms = 1000.0 * run.seconds * per_step;
  // Rank 0's time blocked on other ranks (the pipeline's bubble and
  // transfers; the servers' answers).
  result.waiting_seconds = run.waiting;
  result.final_loss = run.loss;
  result.peak_rss_bytes = peak_rss;
  result.extra[mode.name] = statistics;
  out["result"] = bench::ToJson(result);
  return bench::WriteJsonFile(f.json_path, out);
}

Status RunMode(const Flags& f, int32_t rank, int32_t size, const Data& d,
               Mode& mode) {
  if (f.benchmark_steps > 0) return Benchmark(f, rank, size, d, mode);
  return TrainEpochs(f, rank, size, Clock::now(), d, mode);
}

// ---------------------------------------------------------------- pipeline
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
StatusOr<json> PipelineStatisticsJson(kolo::torch::PipelineStrategy& strategy) {
  const kolo::torch::Pipeline& pipeline = strategy.pipeline();
  TrainingPeers& peers = strategy.peers();
  const kolo::torch::PipelineStatistics& s = pipeline.statistics();
  int64_t parameter_bytes = 0;
  for (const ::torch::Tensor& t : pipeline.parameters())
    parameter_bytes += t.numel() * t.element_size();
  const int64_t state_bytes = strategy.Memory().optimizer_state_bytes;
  KOLO_ASSIGN_OR_RETURN(std::vector<double> busy,
                        Gather(peers, s.total_busy_seconds));
  KOLO_ASSIGN_OR_RETURN(std::vector<double> idle,
                        Gather(peers, s.total_idle_seconds));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> peaks,
                        Gather<int64_t>(peers, s.max_peak_activations));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> parameters,
                        Gather(peers, parameter_bytes));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> states,
                        Gather(peers, state_bytes));
  return json{{"bubble_fraction", s.BubbleFraction()},
              {"max_peak_activations", peaks},
              {"busy_seconds", busy},
              {"idle_seconds", idle},
              {"parameter_bytes", parameters},
              {"optimizer_state_bytes", states}};
}

}  // namespace

Status RunPipeline(const Flags& f, int32_t rank, int32_t size, int32_t threads,
                   const Data& d) {
  // The same seed as Prepare's model: the same initial weights.
  ::torch::manual_seed(f.seed);
  KOLO_ASSIGN_OR_RETURN(
      ::torch::nn::Sequential sequence,
      models::CreateSequentialModel(f.model, d.train.num_classes,
                                    d.train.images.size(1)));
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<kolo::torch::Pipeline> pipeline,
                        CreatePipeline(f, d, sequence));
  kolo::torch::PipelineStrategy strategy(
      *pipeline, kolo::torch::MakeOptimizer(RunOptimizerConfig(f)));

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
  mode.compute_ranks = size;
  mode.parameters = models::CountParameters(*sequence);
  mode.scaled_lr = f.no_lr_scaling ? f.lr : f.lr * replicas;
  mode.model = &strategy.model();
  mode.strategy = &strategy;
  mode.peers = &strategy.peers();
  // Per rank (kolo-bench pipeline reads one figure per stage): the stage's
  // time, its peak activations and what its parameters and optimizer hold.
  mode.statistics = [&strategy]() { return PipelineStatisticsJson(strategy); };
  mode.summary = [&pipeline]() {
    const kolo::torch::PipelineStatistics& s = pipeline->statistics();
    return fmt::format(
        "pipeline: rank 0 idle {:.1f}% of its step time (bubble and "
        "transfers), at most {} micro-batch{} of activations held",
        100.0 * s.BubbleFraction(), s.max_peak_activations,
        s.max_peak_activations == 1 ? "" : "es");
  };
  return RunMode(f, rank, size, d, mode);
}

// -------------------------------------------------------- parameter server

namespace {

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

}  // namespace

Status RunParameterServers(const Flags& f, int32_t rank, int32_t size,
                           int32_t threads, Setup& s) {
  const int32_t workers = size - f.parameter_servers;
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
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<kolo::torch::ParameterServerStrategy> strategy,
      kolo::torch::ParameterServerStrategy::Create(*s.model, options));
  kolo::torch::ParameterServer& ps = strategy->server();
  if (ps.IsServer()) {
    Status served = ps.Serve();
    if (!served.ok()) {
      return served.WithContext(
          fmt::format("parameter server {} (rank {})", ps.role_index(), rank));
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
  mode.compute_ranks = workers;
  mode.parameters = models::CountParameters(*s.model);
  // The workers run the schedule (warm-up, decay) and each push asks the
  // servers for its step's rate: the synchronous servers' rate scaled by
  // the workers, as allreduce's is; the asynchronous ones' one worker's.
  mode.scaled_lr = options.optimizer.lr;
  mode.model = s.model.get();
  mode.strategy = strategy.get();
  mode.peers = &strategy->peers();
  mode.statistics = [&ps]() -> StatusOr<json> {
    return ParameterServerJson(ps.statistics());
  };
  mode.summary = [&ps]() { return ParameterServerSummary(ps.statistics()); };
  Status trained = RunMode(f, rank, size, s.data, mode);
  // The servers wait for every worker's finish, even after an error: a
  // worker that leaves without one looks to them like one that died.
  Status finished = ps.Finish();
  KOLO_RETURN_IF_ERROR(trained);
  return finished;
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

}  // namespace kolo::train
