// kolo-train --elastic: training that goes on through lost and added
// workers, under `kolorun --elastic` (kolo/elastic.h).
//
// What stays the same whatever the workers: step s of epoch e takes the
// global batch s·G .. s·G+G-1 of the epoch's order (a shuffle from
// --seed + e), and the workers of the round split it into contiguous
// parts, one each. Each worker's loss is the sum over its images divided
// by the step's image count, and the gradients are summed across the
// workers, so every step computes the mean gradient of the same G images
// however many workers share it: the result of a run with failures and
// joins is the result of an uninterrupted one, up to the order of
// floating-point sums (and the batch-norm statistics of each worker's own
// part). G is --global-batch, or --batch-size times the first round's
// workers; the learning rate is scaled for G as a plain run at that many
// workers scales it. A worker takes ceil(G / workers) images per step, so
// its memory grows when workers leave rather than the global batch
// shrinking; kolo-train says so at each reset. (Gradient accumulation
// would keep the memory fixed but changes the result where G does not
// divide; Horovod's elastic examples rescale the learning rate instead,
// which changes it always.)
//
// The elastic state (kolo::torch::ElasticState) holds the model, the
// optimizer, the epoch, the step within it and the epoch's loss sums; it is
// committed every --commit-every steps and at the end of every epoch, so a
// failure loses at most --commit-every steps. With --checkpoint-dir, rank 0
// also writes the checkpoint after every epoch (atomically), and --resume
// restarts a job that lost every worker from it.
//
// CIFAR-10's augmentation is not applied in this mode.
#ifndef KOLO_TOOLS_KOLO_TRAIN_ELASTIC_TRAINER_H_
#define KOLO_TOOLS_KOLO_TRAIN_ELASTIC_TRAINER_H_

#include "flags.h"

namespace kolo::train {

// Runs --elastic training to its end; returns the exit status: 0, or 1
// after a line on stderr saying what failed.
int RunElasticTraining(const Flags& flags);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_ELASTIC_TRAINER_H_
