// kolo-train's checkpoint: everything a run needs to continue after an epoch
// as if it had never stopped.
//
// What makes that possible is that every random choice of a run is a
// function of (seed, epoch, rank): the sampler shuffles with seed + epoch,
// the loader augments with (seed, epoch, rank, batch) and each epoch reseeds
// LibTorch's generator (dropout) with EpochSeed(seed, epoch, rank). So the
// state to keep is only the model's parameters and buffers, the optimizer's
// state (momentum, Adam moments and step counts) and the number of epochs
// done; the seed and the names of the model, dataset and optimizer are kept
// too, so that a resume with different flags is refused instead of silently
// training something else.
//
// One file, <dir>/checkpoint.pt, written by rank 0 alone (every rank holds
// the same weights). It is written to a temporary file beside it, flushed
// to disk and renamed over the old one (WriteFileAtomically), so a crash
// mid-write leaves the previous checkpoint intact.
//
// Thread-safety: functions of their arguments; the caller must not train the
// model while it is saved or loaded.
#ifndef KOLO_TOOLS_KOLO_TRAIN_CHECKPOINT_H_
#define KOLO_TOOLS_KOLO_TRAIN_CHECKPOINT_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "checkpoint_header.h"
#include "kolo/status.h"

namespace kolo::train {

std::string CheckpointPath(const std::string& dir);

// Creates `dir` when needed. Errors name the file.
Status SaveCheckpoint(const std::string& dir, ::torch::nn::Module& model,
                      ::torch::optim::Optimizer& optimizer,
                      const CheckpointInfo& info);

// Reads <dir>/checkpoint.pt into `model` and `optimizer` (built with the
// same flags, so their shapes match). kNotFound when there is no checkpoint;
// kInvalidArgument, naming the file, when it cannot be read, when its header
// is refused (ParseCheckpointHeader, naming the field), or when it was
// written with another model,
// dataset, optimizer or seed than `expected` names (all checked before any
// tensor is read).
StatusOr<CheckpointInfo> LoadCheckpoint(const std::string& dir,
                                        const CheckpointInfo& expected,
                                        ::torch::nn::Module& model,
                                        ::torch::optim::Optimizer& optimizer);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_CHECKPOINT_H_
