// kolo-train --elastic: training that goes on through lost and added
// workers, under `kolorun --elastic`. The library's ElasticTrainer
// (kolo/elastic_trainer.h) trains: a fixed global batch G split over each
// round's workers, the state committed every --commit-every steps and after
// every epoch. This file is its hooks: G is --global-batch, or --batch-size
// times the first round's workers; the learning rate is scaled for G as a
// plain run at that many workers scales it (Horovod's elastic examples
// rescale it at each reset instead, which changes the result); the history
// is committed with the state; with --checkpoint-dir rank 0 also writes the
// checkpoint after every epoch (atomically), and --resume restarts a job
// that lost every worker from it; --kill-rank-at-step injects a fault; the
// lines say at each reset how many images a worker now takes.
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
