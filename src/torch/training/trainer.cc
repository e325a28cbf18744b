// The Trainer's epoch loop (kolo/trainer.h) and the pieces it shares with
// kolo-train's other loops: evaluation, agreement across ranks, checksums
// and seeds.
#include "kolo/trainer.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kolo/metrics.h"

namespace kolo::torch {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// SplitMix64's finaliser: a bijection on 64-bit words that spreads every
// input bit over the output.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// How many rows of an unshuffled DistributedSampler shard are real rather
// than padding: the sampler pads [0, N) to a multiple of W by repeating its
// start and gives rank r the positions r, r + W, ...; the real ones are the
// first ceil((N - r) / W) (none when r >= N).
int64_t UnpaddedShardSize(int64_t dataset_size, int32_t rank,
                          int32_t world_size) {
  if (rank >= dataset_size) return 0;
  return (dataset_size - rank + world_size - 1) / world_size;
}

// This rank's correct predictions over `rows` of `test`.
StatusOr<int64_t> CountCorrect(models::Model& model, const data::Dataset& test,
                               std::vector<int64_t> rows, int64_t batch_size) {
  if (rows.empty()) return 0;
  data::LoaderOptions options;
  options.batch_size = batch_size;
  options.num_workers = 1;
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<data::DataLoader> loader,
      data::DataLoader::Create(test, std::move(rows), options));
  int64_t correct = 0;
  while (true) {
    KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
    if (!batch) break;
    ::torch::Tensor predicted =
        model.forward(ModelInput(model, batch->images)).argmax(1);
    correct += predicted.eq(batch->labels).sum().item<int64_t>();
  }
  return correct;
}

}  // namespace

StatusOr<uint64_t> AgreeOnParameters(const ::torch::nn::Module& model) {
  const uint64_t checksum = ParameterChecksum(model);
  if (!IsInitialized()) return checksum;
  std::vector<uint64_t> all(static_cast<size_t>(Size()));
  KOLO_RETURN_IF_ERROR(Allgather(&checksum, all.data(), 1, DataType::kInt64));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      char text[128];
      std::snprintf(text, sizeof(text),
                    "the ranks ended with different parameters: rank 0 "
                    "checksum %#018" PRIx64 ", rank %zu %#018" PRIx64,
                    all[0], r, all[r]);
      return Internal(text);
    }
  }
  return checksum;
}

// One epoch in flight: its loader position and running sums.
struct Trainer::Epoch {
  int64_t index = 0;  // 0-based
  int64_t batches = 0;
  int64_t images = 0;  // all ranks', sampler padding included
  Clock::time_point start = Clock::now();
  double loss_sum = 0;
  int64_t seen = 0;
  double lr = 0;
};

Trainer::Trainer(models::Model& model, TrainingStrategy& strategy,
                 TrainerOptions options)
    : model_(model), strategy_(strategy), options_(std::move(options)) {}

StatusOr<FitResult> Trainer::Fit(const data::Dataset& train,
                                 const data::Dataset& test) {
  FitResult result;
  KOLO_RETURN_IF_ERROR(strategy_.Start());
  if (hooks_.resume) {
    KOLO_ASSIGN_OR_RETURN(result.start_epoch, hooks_.resume());
  }
  data::DistributedSampler::Options sampling;
  sampling.rank = Rank();
  sampling.world_size = Size();
  sampling.seed = options_.seed;
  KOLO_ASSIGN_OR_RETURN(
      data::DistributedSampler sampler,
      data::DistributedSampler::Create(train.size(), sampling));
  const int64_t batches =
      (sampler.num_samples() + options_.batch_size - 1) / options_.batch_size;
  if (hooks_.on_start) hooks_.on_start(result.start_epoch, batches);
  for (int64_t e = result.start_epoch; e < options_.epochs; ++e) {
    Epoch epoch;
    epoch.index = e;
    epoch.batches = batches;
    epoch.images = sampler.num_samples() * Size();
    KOLO_RETURN_IF_ERROR(TrainEpoch(train, sampler, epoch));
    KOLO_ASSIGN_OR_RETURN(EpochReport report, FinishEpoch(test, epoch));
    result.train_seconds += report.seconds;
    result.images_trained += report.images;
    result.eval = report.eval;
    result.epochs.push_back(report);
    if (hooks_.on_epoch) hooks_.on_epoch(report);
    if (hooks_.checkpoint) KOLO_RETURN_IF_ERROR(hooks_.checkpoint(e + 1));
  }
  if (result.epochs.empty()) {
    // Every epoch was done before: report the model as it stands.
    KOLO_ASSIGN_OR_RETURN(
        result.eval,
        Evaluate(model_, test, options_.eval_batch_size, options_.name));
  }
  KOLO_ASSIGN_OR_RETURN(result.parameter_checksum, AgreeOnParameters(model_));
  return result;
}

Status Trainer::TrainEpoch(const data::Dataset& train,
                           const data::DistributedSampler& sampler,
                           Epoch& epoch) {
  ::torch::manual_seed(EpochSeed(options_.seed, epoch.index, Rank()));
  model_.train();
  metrics::SetEpoch(epoch.index + 1);
  data::LoaderOptions loading;
  loading.batch_size = options_.batch_size;
  loading.num_workers = options_.loader_workers;
  loading.augmentation = options_.augmentation;
  loading.augmentation_seed = options_.seed;
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<data::DataLoader> loader,
      data::DataLoader::Create(train, sampler, epoch.index, loading));
  epoch.start = Clock::now();
  while (true) {
    KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
    if (!batch) return Status::Ok();
    KOLO_RETURN_IF_ERROR(TrainStep(*batch, epoch));
  }
}

Status Trainer::TrainStep(const data::Batch& batch, Epoch& epoch) {
  const Clock::time_point step_start = Clock::now();
  StepPosition position;
  position.epoch = epoch.index;
  position.iteration = epoch.index * epoch.batches + batch.number;
  position.steps_taken = steps_taken_;
  if (hooks_.momentum) {
    if (std::optional<double> momentum = hooks_.momentum(position))
      strategy_.SetMomentum(*momentum);
  }
  if (hooks_.learning_rate) {
    epoch.lr = hooks_.learning_rate(position);
    strategy_.SetLearningRate(epoch.lr);
  }
  if (passes_ % options_.backward_passes_per_step == 0) strategy_.ZeroGrad();
  ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
      model_.forward(ModelInput(model_, batch.images)).to(::torch::kFloat32),
      batch.labels);
  strategy_.Backward(loss);
  ++passes_;
  StatusOr<StepOutcome> outcome = strategy_.Step();
  if (!outcome.ok()) {
    return outcome.status().WithContext(
        "epoch " + std::to_string(epoch.index + 1) + " batch " +
        std::to_string(batch.number + 1));
  }
  if (outcome->stepped) ++steps_taken_;
  if (outcome->overflow) ++skipped_steps_;
  StepReport report;
  report.loss = loss.item<double>();
  const int64_t n = batch.labels.size(0);
  metrics::RecordTrainingStep(n, report.loss, SecondsSince(step_start));
  metrics::SetLearningRate(epoch.lr);
  epoch.loss_sum += report.loss * static_cast<double>(n);
  epoch.seen += n;
  if (!hooks_.on_step) return Status::Ok();
  report.epoch = epoch.index;
  report.batch = batch.number;
  report.batches_per_epoch = epoch.batches;
  report.mean_loss = epoch.loss_sum / static_cast<double>(epoch.seen);
  report.images_seen = epoch.seen;
  report.lr = epoch.lr;
  report.epoch_seconds = SecondsSince(epoch.start);
  report.outcome = *outcome;
  report.steps_taken = steps_taken_;
  report.skipped_steps = skipped_steps_;
  hooks_.on_step(report);
  return Status::Ok();
}

StatusOr<EpochReport> Trainer::FinishEpoch(const data::Dataset& test,
                                           const Epoch& epoch) {
  EpochReport report;
  report.seconds = SecondsSince(epoch.start);
  report.epoch = epoch.index + 1;
  report.lr = epoch.lr;
  report.images = epoch.images;
  // Batch-norm statistics follow each rank's own batches; rank 0's become
  // everyone's, so every rank evaluates (and checkpoints) the same model.
  if (IsInitialized() && !model_.buffers().empty()) {
    KOLO_RETURN_IF_ERROR(BroadcastParameters(model_, 0));
  }
  KOLO_ASSIGN_OR_RETURN(
      report.eval,
      Evaluate(model_, test, options_.eval_batch_size, options_.name));
  metrics::SetTestAccuracy(report.eval.accuracy());
  const double mean =
      epoch.loss_sum / static_cast<double>(std::max<int64_t>(epoch.seen, 1));
  if (IsInitialized()) {
    KOLO_ASSIGN_OR_RETURN(report.train_loss,
                          AverageMetric(mean, options_.name + ".train_loss"));
  } else {
    report.train_loss = mean;
  }
  return report;
}

StatusOr<Evaluation> Evaluate(models::Model& model, const data::Dataset& test,
                              int64_t batch_size, const std::string& name) {
  data::DistributedSampler::Options options;
  options.rank = Rank();
  options.world_size = Size();
  options.shuffle = false;
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        data::DistributedSampler::Create(test.size(), options));
  std::vector<int64_t> rows = sampler.Indices(0);
  rows.resize(static_cast<size_t>(
      UnpaddedShardSize(test.size(), options.rank, options.world_size)));
  const int64_t local_total = static_cast<int64_t>(rows.size());
  ::torch::NoGradGuard no_grad;
  model.eval();
  KOLO_ASSIGN_OR_RETURN(int64_t correct,
                        CountCorrect(model, test, std::move(rows), batch_size));
  Evaluation result{correct, local_total};
  if (IsInitialized()) {
    ::torch::Tensor counts =
        ::torch::tensor({correct, local_total}, ::torch::kInt64);
    KOLO_ASSIGN_OR_RETURN(::torch::Tensor sums,
                          Allreduce(counts, name + ".eval", ReduceOp::kSum));
    result.correct = sums[0].item<int64_t>();
    result.total = sums[1].item<int64_t>();
  }
  if (result.total != test.size()) {
    return Internal("evaluation counted " + std::to_string(result.total) +
                    " test images across the ranks, not " +
                    std::to_string(test.size()));
  }
  return result;
}

Status AgreeAcrossRanks(const Status& status) {
  const int32_t size = Size();
  if (size == 1) return status;
  const int32_t failed = status.ok() ? 0 : 1;
  std::vector<int32_t> all(static_cast<size_t>(size), 0);
  Status gathered = Allgather(&failed, all.data(), 1, DataType::kInt32);
  if (!gathered.ok()) {
    return status.ok() ? gathered.WithContext("agreeing on setup") : status;
  }
  const auto first = std::find(all.begin(), all.end(), 1);
  if (first == all.end()) return Status::Ok();
  if (first - all.begin() == Rank()) return status;
  return Aborted(kReportedByAnotherRank);
}

uint64_t ParameterChecksum(const ::torch::nn::Module& model) {
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

uint64_t EpochSeed(uint64_t seed, int64_t epoch, int32_t rank) {
  uint64_t h = Mix(seed);
  h = Mix(h ^ static_cast<uint64_t>(epoch));
  h = Mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(rank)));
  // LibTorch's CPU generator takes any 64-bit seed; keep it below 2^63 so
  // that it also prints and round-trips as a signed number.
  return h >> 1;
}

::torch::Tensor ModelInput(const ::torch::nn::Module& model,
                           const ::torch::Tensor& images) {
  const auto parameters = model.parameters();
  if (parameters.empty()) return images;
  return images.to(parameters.front().scalar_type());
}

}  // namespace kolo::torch
