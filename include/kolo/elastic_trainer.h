// kolo::torch::ElasticTrainer: the Trainer's elastic mode. Data-parallel
// training that goes on through lost and added workers, in a job started
// by `kolorun --elastic` (kolo/elastic.h):
//
//   #include "kolo/elastic_trainer.h"
//   int main() {
//     kolo::data::Dataset train, test;  // yours: images and labels
//     auto model = kolo::models::LeNet();
//     torch::optim::SGD sgd(model->parameters(), /*lr=*/0.05);
//     kolo::torch::ElasticTrainerOptions options;
//     options.epochs = 3;
//     options.global_batch = 256;  // whatever the workers
//     options.commit_every = 10;
//     kolo::torch::ElasticTrainer trainer(*model, sgd, options);
//     kolo::StatusOr<kolo::torch::ElasticFitResult> fit =
//         trainer.Fit(train, test);  // joins the job itself
//     return fit.ok() ? 0 : 1;
//   }
//
// What stays the same whatever the workers: step s of epoch e takes images
// s·G .. s·G+G-1 of the epoch's order (a one-rank DistributedSampler's
// shuffle from the seed and the epoch), and the workers of the round split
// them into contiguous parts, one each. Each worker's loss is the sum over
// its images divided by the step's count and the gradients are summed
// across workers, so every step computes the mean gradient of the same G
// images however many workers share it: a run with failures and joins ends
// where an uninterrupted one ends, and where one process with batch G ends
// (the Trainer on one rank, batch G), up to the order of floating-point
// sums (and the batch-norm statistics of each worker's own part). A worker
// takes ceil(G / workers) images a step, so its memory grows when workers
// leave rather than the global batch shrinking.
//
// The elastic state holds the model, the optimizer, the epoch, the step
// within it, G and the epoch's loss sums (add your own fields through
// state()); it is committed every commit_every steps and at the end of
// every epoch. When a peer dies, every survivor goes back to the last
// commit, so a failure loses at most commit_every steps; a worker that
// joins takes rank 0's state.
//
// Why not a TrainingStrategy: elasticity changes the loop, not how the
// gradients meet. Which images a step takes when the world changes size,
// resuming in the middle of an epoch and re-entering after a lost peer are
// the loop's; within each round the gradients meet through the Trainer's
// DataParallelStrategy (summed), built anew for every round's world.
//
// Thread-safety: one training thread; Fit() runs kolo::elastic::Run, which
// calls kolo::Init and kolo::Shutdown itself.
#ifndef KOLO_ELASTIC_TRAINER_H_
#define KOLO_ELASTIC_TRAINER_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kolo/data.h"
#include "kolo/models.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "kolo/torch_elastic.h"
#include "kolo/trainer.h"

namespace kolo::torch {

struct ElasticTrainerOptions {
  int64_t epochs = 1;
  // G, the images of every step whatever the workers; 0: batch_size times
  // the workers of the first round.
  int64_t global_batch = 0;
  int64_t batch_size = 64;    // per worker of the first round, for G = 0
  int64_t commit_every = 10;  // steps between in-memory commits
  uint64_t seed = 0;          // the epochs' order and dropout
  int64_t eval_batch_size = 512;
  // How gradients travel (compression, buckets); op is always kSum and
  // backward_passes_per_step 1 (see above).
  DistributedOptimizerOptions communication;
  // Names the collectives ("<name>.loss", "<name>.eval").
  std::string name = "kolo.elastic_trainer";
};

// Where a step is, for before_step.
struct ElasticPosition {
  int64_t epoch = 0;        // 0-based
  int64_t step = 0;         // 0-based, within the epoch
  int64_t global_step = 0;  // steps before this one since training began
  // In the round that fixed G: the job's first, or its redo when it failed
  // before its first commit. Fault injection names the first round's ranks.
  bool first_round = false;
};

// After a reset, on every rank of the new round, once its state is synced.
struct ElasticReset {
  int32_t resets = 0;   // this process has survived, this one included
  int32_t workers = 0;  // in the new round
  int64_t epoch = 0;    // 0-based, where training resumes
  int64_t step = 0;     // within the epoch, where training resumes
  int64_t reached = 0;  // the furthest global step this process had done
  int64_t lost = 0;     // steps to do again: reached minus where it resumes
  int64_t global_batch = 0;
};

// The Trainer's hooks, with these meanings here:
//   learning_rate, momentum: before each step; StepPosition.iteration and
//     steps_taken are the global step (steps since training began).
//   resume: once, before the first round; the epochs done already (from a
//     checkpoint of a job that lost every worker). Rank 0's answer wins.
//   on_start(start_epoch, steps_per_epoch): in the round that fixes G.
//   on_step: after each step, with the whole step's figures (loss and
//     images of all workers, which is what the state commits).
//   on_epoch, checkpoint: after each epoch's evaluation, as the Trainer's;
//     an epoch redone after a reset calls them again.
// and two of elastic training's own.
struct ElasticHooks : TrainerHooks {
  // After each reset, on every rank of the new round.
  std::function<void(const ElasticReset&)> on_reset;
  // Before each step, on every rank, before the learning-rate hook.
  std::function<void(const ElasticPosition&)> before_step;
};

struct ElasticFitResult {
  // epochs: one report per epoch this process finished (the last, when one
  // was redone); eval: the final model's; parameter_checksum: agreed by the
  // last round's workers.
  FitResult fit;
  int64_t global_batch = 0;
  int32_t rank = 0;     // this worker's, in the last round
  int32_t workers = 0;  // in the last round
  int32_t resets = 0;   // this process survived
};

class ElasticTrainer {
 public:
  // `model` maps images to logits (the loss is cross entropy); `optimizer`
  // optimizes its parameters. Both must outlive the trainer.
  ElasticTrainer(models::Model& model, ::torch::optim::Optimizer& optimizer,
                 ElasticTrainerOptions options);
  ElasticHooks& hooks() { return hooks_; }
  // The committed state, for fields of one's own: track them before Fit(),
  // in the same order on every worker.
  elastic::State& state() { return state_; }
  // For hooks, during Fit(): G, once the first round fixed it (0 before),
  // and the steps of an epoch (0 before G).
  int64_t global_batch() const { return global_batch_; }
  int64_t StepsPerEpoch() const;
  // Joins the job and trains to options.epochs through every reset. Ends
  // with kNotFound when this worker was removed from the job (its host
  // left), which is not a failure of the job.
  StatusOr<ElasticFitResult> Fit(const data::Dataset& train,
                                 const data::Dataset& test);

 private:
  Status TrainRound(const data::Dataset& train, const data::Dataset& test,
                    ElasticFitResult& result);
  Status TrainStep(const data::Dataset& train, TrainingStrategy& strategy,
                   bool first_round);
  Status FinishEpoch(const data::Dataset& test, ElasticFitResult& result);
  Status FinishTraining(const data::Dataset& test, ElasticFitResult& result);
  Status OnReset();
  int64_t GlobalStep() const;
  double EpochSeconds() const;  // since epoch_start_

  models::Model& model_;
  ::torch::optim::Optimizer& optimizer_;
  const ElasticTrainerOptions options_;
  ElasticHooks hooks_;
  ElasticState state_;
  // The committed state.
  int64_t epoch_ = 0;
  int64_t step_ = 0;
  int64_t global_batch_ = 0;
  double loss_sum_ = 0;  // over the epoch's images so far, all workers'
  // The last finished epoch's evaluation (total -1: none in this job).
  // Committed, so a worker that joins after the last epoch ends with the
  // same figures, and the same collectives, as those that ran it.
  int64_t last_eval_correct_ = 0;
  int64_t last_eval_total_ = -1;
  int64_t images_ = 0;
  // This process's own record.
  int64_t dataset_size_ = 0;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  int64_t furthest_step_ = 0;
  double lr_ = 0;  // of the last step
  // When the epoch in flight started, or resumed in this round.
  std::chrono::steady_clock::time_point epoch_start_;
};

}  // namespace kolo::torch

#endif  // KOLO_ELASTIC_TRAINER_H_
