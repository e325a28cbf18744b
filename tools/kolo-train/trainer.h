// kolo-train's training runs: one rank's part of training a kolo::models
// network on a kolo::data dataset. RunTraining runs every mode but
// --elastic, which RunElasticTraining runs (below).
//
// A run, on every rank:
//   1. setup: read the dataset (and keep the first --train-subset /
//      --test-subset rows), build the model from --seed, build the optimizer;
//      rank 0 reads the checkpoint when resuming. The ranks then agree on
//      whether setup worked anywhere before any of them trains, so a rank
//      that cannot read its files does not leave the others waiting.
//   2. make the ranks identical: BroadcastParameters from rank 0, and when
//      resuming the epoch count and BroadcastOptimizerState.
//   3. per epoch: reseed LibTorch's generator with EpochSeed(seed, epoch,
//      rank) (dropout), train on this rank's DistributedSampler shard through
//      a DataLoader and DistributedOptimizer (gradients averaged across
//      ranks, learning rate from plan.h), copy rank 0's buffers (batch-norm
//      statistics, which each rank updates from its own batches) to every
//      rank, evaluate (each rank its unpadded shard of the test set, correct
//      and total summed across ranks), average the train loss across ranks,
//      and let rank 0 save the checkpoint.
//   4. rank 0 prints the summary table and writes the JSON; every rank
//      checks that all ranks ended with bit-identical parameters.
//
// Output (rank 0 only): a header line, then per epoch either one line
// redrawn in place on a terminal or one line per epoch elsewhere, then the
// summary table.
#ifndef KOLO_TOOLS_KOLO_TRAIN_TRAINER_H_
#define KOLO_TOOLS_KOLO_TRAIN_TRAINER_H_

#include "flags.h"

namespace kolo::train {

// Runs the training `flags` describe; call after kolo::Init() on every
// rank. Prints this rank's errors, one line each ("kolo-train: ..."), and
// returns the process exit status: 0, or 1 on any error.
int RunTraining(const Flags& flags);

// kolo-train --elastic: training that goes on through lost and added
// workers, under `kolorun --elastic`. The library's ElasticTrainer
// (kolo/elastic_trainer.h) trains: a fixed global batch G split over each
// round's workers, the state committed every --commit-every steps and after
// every epoch. elastic_trainer.cc is its hooks: G is --global-batch, or --batch-size
// times the first round's workers; the learning rate is scaled for G as a
// plain run at that many workers scales it (Horovod's elastic examples
// rescale it at each reset instead, which changes the result); the history
// is committed with the state; with --checkpoint-dir rank 0 also writes the
// checkpoint after every epoch (atomically), and --resume restarts a job
// that lost every worker from it; --kill-rank-at-step injects a fault; the
// lines say at each reset how many images a worker now takes.
//
// CIFAR-10's augmentation is not applied in this mode.
//
// Returns the exit status: 0, or 1 after a line on stderr saying what
// failed.
int RunElasticTraining(const Flags& flags);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_TRAINER_H_
