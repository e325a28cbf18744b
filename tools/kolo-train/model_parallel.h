// kolo-train's two modes that do not replicate the whole model on every
// rank: pipeline parallelism (--pipeline-stages, kolo/torch_pipeline.h) and
// parameter servers (--parameter-servers, kolo/torch_parameter_server.h).
// Both train on kolo::torch::Trainer with the strategies of
// kolo/trainer_model_parallel.h (this file is their flags and report), and
// both print the plain mode's lines (the header, the progress line, one
// line per epoch, the summary) and write its JSON keys, so kolo-bench reads
// them alike; the JSON's config adds "mode" and the mode's settings.
//
// Pipeline. The world is P stages x R replicas (rank r is stage r % P of
// replica r / P). The model is CreateSequentialModel's form of --model,
// built from --seed on every rank. The data is sharded across the
// replicas, not the ranks: every rank of replica q reads shard q of R of
// the same DistributedSampler order, so all its stages take the same
// batch (the first stage feeds the images, the last scores the labels);
// --batch-size is per replica and the learning rate scales with R as it
// scales with the workers of plain data parallelism. A shard's last batch
// is dropped when it has fewer rows than --micro-batches. Each rank steps
// its own optimizer over its stage's layers after TrainStep (which
// averages the stage's gradients across the replicas). The test set is
// evaluated through the pipeline's Forward, each replica its shard, the
// last stages counting. Batch-norm statistics stay each replica's own.
//
// Parameter servers. `kolorun -np N --servers K` starts N workers and K
// servers (KOLO_ROLE, kolo/process_role.h); --parameter-servers K must
// match K. Every rank builds --model from --seed; the servers then serve
// until every worker finished, and the workers train on their shards of
// the training set (one DistributedSampler over the N workers), each
// step pushing gradients and pulling parameters. The servers' optimizer
// is --optimizer at a fixed rate: --lr times N in sync mode (one averaged
// step over N batches, as data parallelism), --lr in async and stale modes
// (every worker's gradient is a step); no warm-up or cosine, since the
// servers own the rate. The workers evaluate and average their losses in
// a process group of their own, as the servers take part in no collective
// after setup.
#ifndef KOLO_TOOLS_KOLO_TRAIN_MODEL_PARALLEL_H_
#define KOLO_TOOLS_KOLO_TRAIN_MODEL_PARALLEL_H_

#include <cstdint>

#include "flags.h"
#include "kolo/status.h"
#include "setup.h"

namespace kolo::train {

// What can only be checked once the job is known: the world divides into
// --pipeline-stages; kolorun started as many servers as
// --parameter-servers names. kInvalidArgument naming the flag.
Status CheckModelParallelWorld(const Flags& f, int32_t world_size);

// Train (or, with --benchmark-steps, time) in their mode, after Prepare()
// on every rank. Rank 0 prints and writes the JSON.
Status RunPipeline(const Flags& f, int32_t rank, int32_t size, int32_t threads,
                   const Data& d);
Status RunParameterServers(const Flags& f, int32_t rank, int32_t size,
                           int32_t threads, Setup& s);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_MODEL_PARALLEL_H_
