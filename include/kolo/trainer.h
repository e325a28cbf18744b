// kolo::torch::Trainer: the epoch loop kolo-train runs, for a LibTorch
// program. Every rank builds the same model, picks a strategy (how gradients
// meet across ranks) and hands both to a Trainer:
//
//   #include "kolo/trainer.h"
//   int main() {
//     kolo::Init();
//     kolo::data::Dataset train, test;  // yours: images and labels
//     auto model = kolo::models::LeNet();
//     torch::optim::SGD sgd(model->parameters(), /*lr=*/0.05);
//     kolo::torch::DataParallelStrategy strategy(sgd, *model);
//     kolo::torch::TrainerOptions options;
//     options.epochs = 3;
//     options.batch_size = 64;  // per rank: the global batch is 64 * Size()
//     kolo::torch::Trainer trainer(*model, strategy, options);
//     trainer.hooks().on_epoch = [](const kolo::torch::EpochReport& e) {
//       if (kolo::Rank() == 0) std::printf("%f\n", e.eval.accuracy());
//     };
//     kolo::StatusOr<kolo::torch::FitResult> fit = trainer.Fit(train, test);
//     return fit.ok() && kolo::Shutdown().ok() ? 0 : 1;
//   }
//
// Fit() makes the ranks identical (the strategy's Start: rank 0's weights
// and optimizer state), then per epoch trains on this rank's shard of a
// DistributedSampler, copies rank 0's buffers (batch-norm statistics) to
// all, evaluates on every rank's share of the test set, averages the train
// loss across ranks, and calls the hooks; at the end it checks that every
// rank holds bit-identical parameters, which is what data parallelism
// promises.
//
// Thread-safety: a Trainer and its strategy belong to one training thread.
// Every rank must call Fit() with the same options and dataset sizes.
#ifndef KOLO_TRAINER_H_
#define KOLO_TRAINER_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kolo/data.h"
#include "kolo/models.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "kolo/torch_zero.h"

namespace kolo::torch {

// What an optimizer holds on one rank, counted from its tensors.
struct StrategyMemory {
  int64_t optimizer_state_bytes = 0;
  int64_t master_weight_bytes = 0;
  // The most gradient bytes held at once since ResetPeakMemory().
  int64_t gradient_bytes = 0;
};

struct Evaluation;

// This rank's part of the training set: shard `index` of `count` of one
// DistributedSampler order. A shard's last batch with fewer than
// `min_batch_rows` rows is dropped (a pipeline cannot cut it into its
// micro-batches); every shard has the same size, so all drop it alike.
struct TrainingShard {
  int32_t index = 0;
  int32_t count = 1;
  int64_t min_batch_rows = 1;
  bool DropsLastBatch(int64_t shard_rows, int64_t batch_size) const {
    const int64_t remainder = shard_rows % batch_size;
    return remainder != 0 && remainder < min_batch_rows;
  }
};

// How a step's gradients meet across ranks and update the weights. The
// Trainer calls Start() once, then per backward pass ZeroGrad() (at the
// first pass of an accumulation), ForwardBackward() and Step().
class TrainingStrategy {
 public:
  virtual ~TrainingStrategy() = default;
  // Makes every rank start from rank 0's weights and optimizer state.
  virtual Status Start() = 0;
  virtual void ZeroGrad() = 0;
  virtual void Backward(const ::torch::Tensor& loss) = 0;
  virtual StatusOr<StepOutcome> Step() = 0;
  virtual void SetLearningRate(double lr) = 0;
  virtual void SetMomentum(double momentum) = 0;
  virtual StrategyMemory Memory() const = 0;
  virtual void ResetPeakMemory() = 0;
  // Seconds Step() spent blocked on communication backward did not hide.
  virtual double wait_seconds() const { return 0; }

  // The defaults below are data parallelism's, where every rank of the
  // world holds the whole model; pipeline and parameter-server strategies
  // (kolo/trainer_model_parallel.h) override them.
  // Shard Rank() of Size().
  virtual TrainingShard Shard() const;
  // Cross entropy over `model`'s logits, then Backward(); the loss.
  virtual StatusOr<::torch::Tensor> ForwardBackward(models::Model& model,
                                                    const data::Batch& batch);
  // Rank 0's buffers (batch-norm statistics) to every rank, then
  // kolo::torch::Evaluate().
  virtual StatusOr<Evaluation> Evaluate(models::Model& model,
                                        const data::Dataset& test,
                                        int64_t batch_size,
                                        const std::string& name);
  // This rank's mean train loss averaged across the ranks (AverageMetric).
  virtual StatusOr<double> AverageLoss(double loss, const std::string& name);
  // At the end of Fit(): ParameterChecksum(model), equal on every rank, or
  // an error naming the first rank whose parameters differ from rank 0's.
  virtual StatusOr<uint64_t> AgreeOnParameters(
      const ::torch::nn::Module& model);
};

// Data parallelism over a DistributedOptimizer wrapping `optimizer`, which
// must optimize `model`'s parameters.
class DataParallelStrategy : public TrainingStrategy {
 public:
  DataParallelStrategy(::torch::optim::Optimizer& optimizer,
                       ::torch::nn::Module& model,
                       DistributedOptimizerOptions options = {});
  Status Start() override;
  void ZeroGrad() override;
  void Backward(const ::torch::Tensor& loss) override;
  StatusOr<StepOutcome> Step() override;
  void SetLearningRate(double lr) override;
  void SetMomentum(double momentum) override;
  StrategyMemory Memory() const override;
  void ResetPeakMemory() override;
  double wait_seconds() const override;

 private:
  ::torch::optim::Optimizer& optimizer_;
  ::torch::nn::Module& model_;
  const DistributedOptimizerOptions options_;
  std::unique_ptr<DistributedOptimizer> distributed_;  // from Start()
  int32_t passes_ = 0;
  int64_t peak_gradient_bytes_ = 0;
};

// ZeRO data parallelism (kolo/torch_zero.h): Start() broadcasts the weights
// and builds the ZeroOptimizer, whose optimizer `make_optimizer` makes over
// this rank's slices. `optimizer` (the model's own) only has its state
// broadcast, so a resumed run's ranks agree on it.
class ZeroStrategy : public TrainingStrategy {
 public:
  ZeroStrategy(::torch::optim::Optimizer& optimizer, ::torch::nn::Module& model,
               OptimizerFactory make_optimizer, ZeroOptions options);
  Status Start() override;
  void ZeroGrad() override;
  void Backward(const ::torch::Tensor& loss) override;
  StatusOr<StepOutcome> Step() override;
  void SetLearningRate(double lr) override;
  void SetMomentum(double momentum) override;
  StrategyMemory Memory() const override;
  void ResetPeakMemory() override;
  // Null before Start().
  ZeroOptimizer* zero() { return zero_.get(); }

 private:
  ::torch::optim::Optimizer& optimizer_;
  ::torch::nn::Module& model_;
  OptimizerFactory make_optimizer_;
  ZeroOptions options_;
  std::unique_ptr<ZeroOptimizer> zero_;
};

struct TrainerOptions {
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per rank
  uint64_t seed = 0;        // shuffling, augmentation and dropout
  int32_t backward_passes_per_step = 1;
  int32_t loader_workers = 1;
  data::Augmentation augmentation;
  int64_t eval_batch_size = 512;
  // Names the Trainer's collectives ("<name>.eval", "<name>.train_loss").
  std::string name = "kolo.trainer";
};

// Where a step is, for the learning-rate hook.
struct StepPosition {
  int64_t epoch = 0;        // 0-based
  int64_t iteration = 0;    // batches since the start of training
  int64_t steps_taken = 0;  // optimizer steps so far (skipped not counted)
};

struct Evaluation {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const {
    return total > 0 ? static_cast<double>(correct) / total : 0.0;
  }
};

// After each backward pass, on every rank.
struct StepReport {
  int64_t epoch = 0;  // 0-based
  int64_t batch = 0;  // 0-based, within the epoch
  int64_t batches_per_epoch = 0;
  double loss = 0;           // this rank's, of this batch
  double mean_loss = 0;      // this rank's, over the epoch so far
  int64_t images_seen = 0;   // this rank's, in the epoch so far
  double lr = 0;             // the learning_rate hook's; 0 without it
  double epoch_seconds = 0;  // since the epoch started
  StepOutcome outcome;
  int64_t steps_taken = 0;
  int64_t skipped_steps = 0;  // for float16 overflows
};

// After each epoch's evaluation, on every rank.
struct EpochReport {
  int64_t epoch = 0;      // 1-based: epochs done
  double lr = 0;          // of the epoch's last step
  double train_loss = 0;  // averaged across ranks
  Evaluation eval;
  double seconds = 0;  // in the training loop, without evaluation
  int64_t images = 0;  // trained on by all ranks (sampler padding included)
};

struct TrainerHooks {
  // The learning rate of a step; unset: the optimizer's own stays.
  std::function<double(const StepPosition&)> learning_rate;
  // The momentum of a step (a cyclic schedule's); unset or nullopt: kept.
  std::function<std::optional<double>(const StepPosition&)> momentum;
  // The epochs a resumed run has done already, after Start(); every rank
  // must return the same. Unset: 0.
  std::function<StatusOr<int64_t>()> resume;
  // Before the first epoch, with the loop's shape.
  std::function<void(int64_t start_epoch, int64_t batches_per_epoch)> on_start;
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EpochReport&)> on_epoch;
  // After on_epoch, on every rank; its Status must agree across ranks
  // (AgreeAcrossRanks), since the loop stops on the ranks that fail.
  std::function<Status(int64_t epochs_done)> checkpoint;
};

struct FitResult {
  int64_t start_epoch = 0;          // the resume hook's answer
  std::vector<EpochReport> epochs;  // those this call ran
  Evaluation eval;                  // of the final model
  double train_seconds = 0;
  int64_t images_trained = 0;
  uint64_t parameter_checksum = 0;  // equal on every rank
};

class Trainer {
 public:
  // `model` maps images to logits; the loss is cross entropy.
  Trainer(models::Model& model, TrainingStrategy& strategy,
          TrainerOptions options);
  TrainerHooks& hooks() { return hooks_; }
  // Trains from the resume hook's epoch to options.epochs.
  StatusOr<FitResult> Fit(const data::Dataset& train,
                          const data::Dataset& test);

 private:
  struct Epoch;
  Status TrainEpoch(const data::Dataset& train,
                    const data::DistributedSampler& sampler, Epoch& epoch);
  Status TrainStep(const data::Batch& batch, Epoch& epoch);
  StatusOr<EpochReport> FinishEpoch(const data::Dataset& test,
                                    const Epoch& epoch);

  models::Model& model_;
  TrainingStrategy& strategy_;
  const TrainerOptions options_;
  TrainerHooks hooks_;
  int64_t passes_ = 0;
  int64_t steps_taken_ = 0;
  int64_t skipped_steps_ = 0;
};

// Every rank classifies the real rows of its unshuffled DistributedSampler
// shard; the counts are summed across ranks (collective "<name>.eval").
StatusOr<Evaluation> Evaluate(models::Model& model, const data::Dataset& test,
                              int64_t batch_size = 512,
                              const std::string& name = "kolo.trainer");

// Every rank learns whether `status` failed on any rank, so that none goes
// on into a collective a failed rank will never join. The first failed rank
// gets its own error back; the others get kAborted with
// kReportedByAnotherRank.
Status AgreeAcrossRanks(const Status& status);
inline constexpr char kReportedByAnotherRank[] = "reported by another rank";

// FNV-1a over the bytes of every parameter, in named_parameters() order:
// equal on two ranks only when their weights are bit-identical.
uint64_t ParameterChecksum(const ::torch::nn::Module& model);

// The ranks' ParameterChecksum when they are all equal (a collective once
// kolo::Init ran), or an error naming the first rank that differs from
// rank 0.
StatusOr<uint64_t> AgreeOnParameters(const ::torch::nn::Module& model);

// The seed of LibTorch's generator (dropout) for one rank's epoch: a hash of
// the three, so an epoch draws the same masks whether or not the run was
// interrupted before it.
uint64_t EpochSeed(uint64_t seed, int64_t epoch, int32_t rank);

// `images` in the dtype of the model's parameters (a bfloat16 model takes
// bfloat16 input).
::torch::Tensor ModelInput(const ::torch::nn::Module& model,
                           const ::torch::Tensor& images);

}  // namespace kolo::torch

#endif  // KOLO_TRAINER_H_
