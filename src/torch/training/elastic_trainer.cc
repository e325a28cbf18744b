// The Trainer's elastic mode (kolo/elastic_trainer.h): a fixed global batch
// split over each round's workers, committed in memory, through
// kolo::elastic::Run.
#include "kolo/elastic_trainer.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "kolo/elastic.h"

namespace kolo::torch {
namespace {

// The epoch's order of the training set, the same on every worker in every
// round: what a one-rank DistributedSampler visits, so that the elastic run
// takes the batches one process with batch G takes.
StatusOr<std::vector<int64_t>> EpochOrder(int64_t size, uint64_t seed,
                                          int64_t epoch) {
  data::DistributedSampler::Options options;
  options.seed = seed;
  KOLO_ASSIGN_OR_RETURN(data::DistributedSampler sampler,
                        data::DistributedSampler::Create(size, options));
  return sampler.Indices(epoch);
}

// Keeps one report per epoch: one redone after a reset replaces the first.
void Record(const EpochReport& report, std::vector<EpochReport>& epochs) {
  if (!epochs.empty() && epochs.back().epoch == report.epoch) {
    epochs.back() = report;
  } else {
    epochs.push_back(report);
  }
}

}  // namespace

ElasticTrainer::ElasticTrainer(models::Model& model,
                               ::torch::optim::Optimizer& optimizer,
                               ElasticTrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      options_(std::move(options)),
      state_(model, optimizer) {
  state_.Track("epoch", &epoch_);
  state_.Track("step", &step_);
  state_.Track("global_batch", &global_batch_);
  state_.Track("loss_sum", &loss_sum_);
  state_.Track("images", &images_);
  state_.Track("last_eval_correct", &last_eval_correct_);
  state_.Track("last_eval_total", &last_eval_total_);
  state_.OnReset([this] { return OnReset(); });
}

StatusOr<ElasticFitResult> ElasticTrainer::Fit(const data::Dataset& train,
                                               const data::Dataset& test) {
  if (options_.commit_every < 1) {
    return InvalidArgument(
        "ElasticTrainerOptions.commit_every must be at "
        "least 1, got " +
        std::to_string(options_.commit_every));
  }
  if (hooks_.resume) {
    KOLO_ASSIGN_OR_RETURN(epoch_, hooks_.resume());
  }
  dataset_size_ = train.size();
  ElasticFitResult result;
  result.fit.start_epoch = epoch_;
  KOLO_RETURN_IF_ERROR(
      elastic::Run(state_, [&] { return TrainRound(train, test, result); }));
  for (const EpochReport& epoch : result.fit.epochs) {
    result.fit.train_seconds += epoch.seconds;
    result.fit.images_trained += epoch.images;
  }
  result.resets = state_.resets();
  return result;
}

int64_t ElasticTrainer::StepsPerEpoch() const {
  if (global_batch_ == 0) return 0;  // before the first round fixes G
  return (dataset_size_ + global_batch_ - 1) / global_batch_;
}

int64_t ElasticTrainer::GlobalStep() const {
  return epoch_ * StepsPerEpoch() + step_;
}

double ElasticTrainer::EpochSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       epoch_start_)
      .count();
}

Status ElasticTrainer::OnReset() {
  ElasticReset reset;
  reset.resets = state_.resets();
  reset.workers = Size();
  reset.epoch = epoch_;
  reset.step = step_;
  reset.reached = furthest_step_;
  reset.lost = std::max<int64_t>(0, furthest_step_ - GlobalStep());
  reset.global_batch = global_batch_;
  if (hooks_.on_reset) hooks_.on_reset(reset);
  return Status::Ok();
}

Status ElasticTrainer::TrainRound(const data::Dataset& train,
                                  const data::Dataset& test,
                                  ElasticFitResult& result) {
  // The first round fixes G; the state carries it on, so a worker that
  // joins later finds it set.
  const bool first_round = global_batch_ == 0;
  if (first_round) {
    global_batch_ = options_.global_batch > 0 ? options_.global_batch
                                              : options_.batch_size * Size();
    if (hooks_.on_start) hooks_.on_start(epoch_, StepsPerEpoch());
  }
  DistributedOptimizerOptions communication = options_.communication;
  communication.op = ReduceOp::kSum;
  communication.backward_passes_per_step = 1;
  // Built for this round's world; every round makes its own.
  DataParallelStrategy strategy(optimizer_, model_, communication);
  KOLO_RETURN_IF_ERROR(strategy.Start());
  while (epoch_ < options_.epochs) {
    if (order_epoch_ != epoch_) {
      KOLO_ASSIGN_OR_RETURN(order_,
                            EpochOrder(train.size(), options_.seed, epoch_));
      order_epoch_ = epoch_;
    }
    model_.train();
    epoch_start_ = std::chrono::steady_clock::now();
    while (step_ < StepsPerEpoch()) {
      KOLO_RETURN_IF_ERROR(TrainStep(train, strategy, first_round));
      if (step_ % options_.commit_every == 0) {
        KOLO_RETURN_IF_ERROR(state_.Commit());
      }
    }
    KOLO_RETURN_IF_ERROR(FinishEpoch(test, result));
  }
  return FinishTraining(test, result);
}

Status ElasticTrainer::TrainStep(const data::Dataset& train,
                                 TrainingStrategy& strategy, bool first_round) {
  const int32_t rank = Rank();
  const int32_t size = Size();
  if (hooks_.before_step) {
    hooks_.before_step(
        ElasticPosition{epoch_, step_, GlobalStep(), first_round});
  }
  // This worker's contiguous part of the step's images.
  const int64_t first = step_ * global_batch_;
  const int64_t count = std::min<int64_t>(global_batch_, train.size() - first);
  const int64_t begin = first + count * rank / size;
  const int64_t end = first + count * (rank + 1) / size;
  StepPosition position;
  position.epoch = epoch_;
  position.iteration = GlobalStep();
  position.steps_taken = GlobalStep();
  if (hooks_.momentum) {
    if (std::optional<double> momentum = hooks_.momentum(position))
      strategy.SetMomentum(*momentum);
  }
  if (hooks_.learning_rate) {
    lr_ = hooks_.learning_rate(position);
    strategy.SetLearningRate(lr_);
  }
  // Dropout masks by step and rank: a redone step draws the same ones.
  ::torch::manual_seed(EpochSeed(options_.seed, GlobalStep(), rank));
  strategy.ZeroGrad();
  double local_loss = 0;
  if (end > begin) {
    ::torch::Tensor rows = ::torch::from_blob(order_.data() + begin,
                                              {end - begin}, ::torch::kInt64);
    ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
        model_.forward(ModelInput(model_, train.images.index_select(0, rows)))
            .to(::torch::kFloat32),
        train.labels.index_select(0, rows),
        ::torch::nn::functional::CrossEntropyFuncOptions().reduction(
            ::torch::kSum));
    local_loss = loss.item<double>();
    strategy.Backward(loss / static_cast<double>(count));
  }
  StatusOr<StepOutcome> outcome = strategy.Step();
  if (!outcome.ok()) {
    return outcome.status().WithContext("epoch " + std::to_string(epoch_ + 1) +
                                        " step " + std::to_string(step_ + 1));
  }
  KOLO_ASSIGN_OR_RETURN(::torch::Tensor summed,
                        Allreduce(::torch::tensor({local_loss}),
                                  options_.name + ".loss", ReduceOp::kSum));
  const double step_loss = summed.item<double>();
  loss_sum_ += step_loss;
  images_ += count;
  ++step_;
  furthest_step_ = std::max(furthest_step_, GlobalStep());
  if (!hooks_.on_step) return Status::Ok();
  StepReport report;
  report.epoch = epoch_;
  report.batch = step_ - 1;
  report.batches_per_epoch = StepsPerEpoch();
  report.loss = step_loss / static_cast<double>(count);
  report.mean_loss = loss_sum_ / static_cast<double>(images_);
  report.images_seen = images_;
  report.lr = lr_;
  report.epoch_seconds = EpochSeconds();
  report.outcome = *outcome;
  report.steps_taken = GlobalStep();
  hooks_.on_step(report);
  return Status::Ok();
}

Status ElasticTrainer::FinishEpoch(const data::Dataset& test,
                                   ElasticFitResult& result) {
  EpochReport report;
  report.seconds = EpochSeconds();
  report.epoch = epoch_ + 1;
  report.lr = lr_;
  report.images = images_;
  report.train_loss =
      loss_sum_ / static_cast<double>(std::max<int64_t>(images_, 1));
  // Each worker's batch-norm statistics follow its own images; rank 0's
  // become everyone's.
  if (!model_.buffers().empty()) {
    KOLO_RETURN_IF_ERROR(BroadcastParameters(model_, 0));
  }
  KOLO_ASSIGN_OR_RETURN(
      report.eval,
      Evaluate(model_, test, options_.eval_batch_size, options_.name));
  last_eval_correct_ = report.eval.correct;
  last_eval_total_ = report.eval.total;
  if (hooks_.on_epoch) hooks_.on_epoch(report);
  if (hooks_.checkpoint) KOLO_RETURN_IF_ERROR(hooks_.checkpoint(epoch_ + 1));
  Record(report, result.fit.epochs);
  ++epoch_;
  step_ = 0;
  loss_sum_ = 0;
  images_ = 0;
  return state_.Commit();
}

Status ElasticTrainer::FinishTraining(const data::Dataset& test,
                                      ElasticFitResult& result) {
  // Every rank must take the same branch (both run collectives): the
  // committed evaluation is the same on all of them, the process's own
  // history is not (a worker that joined after the last epoch has none).
  if (last_eval_total_ >= 0) {
    result.fit.eval = Evaluation{last_eval_correct_, last_eval_total_};
  } else {
    // No epoch finished in this job (a resumed run that was done): the
    // model as it stands.
    KOLO_ASSIGN_OR_RETURN(
        result.fit.eval,
        Evaluate(model_, test, options_.eval_batch_size, options_.name));
  }
  KOLO_ASSIGN_OR_RETURN(result.fit.parameter_checksum,
                        AgreeOnParameters(model_));
  result.global_batch = global_batch_;
  result.rank = Rank();
  result.workers = Size();
  return Status::Ok();
}

}  // namespace kolo::torch
