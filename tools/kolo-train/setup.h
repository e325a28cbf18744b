// What a kolo-train run builds before it trains, shared by the plain and the
// elastic training loops: the data, the model and optimizer (from --seed,
// and from the checkpoint with --resume).
#ifndef KOLO_TOOLS_KOLO_TRAIN_SETUP_H_
#define KOLO_TOOLS_KOLO_TRAIN_SETUP_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint.h"
#include "flags.h"
#include "kolo/data.h"
#include "kolo/models.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "kolo/trainer.h"

namespace kolo::train {

// Loader threads per rank. Building a batch is one index_select, far
// cheaper than a training step, and the cores belong to LibTorch.
inline constexpr int32_t kLoaderWorkers = 1;

struct Data {
  data::Dataset train;
  data::Dataset test;
  data::Augmentation augmentation;
  std::string source;  // where it came from, for the header line
};

struct Setup {
  Data data;
  std::shared_ptr<models::Model> model;
  std::unique_ptr<::torch::optim::Optimizer> optimizer;
  // Rank 0, when resuming from a checkpoint: what it holds.
  int64_t epochs_done = 0;
  nlohmann::json history = nlohmann::json::array();
  std::string resumed_from;  // the checkpoint's path; empty when fresh
};

// Reads --dataset (or draws the synthetic set) and keeps the first
// --train-subset / --test-subset rows.
StatusOr<Data> LoadData(const Flags& f);

// Reads the data, builds the model from --seed and the optimizer; with
// --resume, `rank` 0 also loads the checkpoint.
Status Prepare(const Flags& f, int32_t rank, Setup* s);

// The Trainer's options every mode's run takes from the flags.
kolo::torch::TrainerOptions TrainerOptionsOf(const Flags& f, const Data& d);

// The test-set evaluation every mode reports (kolo/trainer.h).
using Evaluation = kolo::torch::Evaluation;
using kolo::torch::EpochSeed;
using kolo::torch::ModelInput;

// One finished epoch as the training loops report it: a record of the
// JSON history and rank 0's line, the same in every mode.
struct EpochFigures {
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  double lr = 0;
  double train_loss = 0;
  Evaluation eval;
  double seconds = 0;
  double images_per_second = 0;
};
nlohmann::json EpochRecord(const EpochFigures& e);
std::string EpochLine(const EpochFigures& e);
// An epoch of the Trainer's, of `epochs` in all.
EpochFigures FiguresOf(const kolo::torch::EpochReport& e, int64_t epochs);

// Rank 0's progress line after step `r` of `epochs`; `shards` ranks (or
// replicas) train on distinct data, each `r.images_seen` images so far.
std::string ProgressText(const kolo::torch::StepReport& r, int64_t epochs,
                         int32_t shards);

// What the checkpoint after `epochs_done` epochs records besides the
// tensors: the flags a resume must match, and the history so far.
CheckpointInfo CheckpointInfoAfter(const Flags& f, int64_t epochs_done,
                                   const std::string& history_json);

// The optimizer's name in checkpoints: a ZeroOptimizer's state lives in
// its own shard files, so a checkpoint of one cannot resume the other.
std::string CheckpointOptimizerName(const Flags& f);

// --compression's value (flags.h checked it).
kolo::torch::Compression ParseCompression(const std::string& name);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_SETUP_H_
