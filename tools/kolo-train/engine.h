// The optimizer side of a kolo-train step: the library's data-parallel
// strategy (kolo/trainer.h) the flags ask for. DistributedOptimizer
// normally; ZeroOptimizer when the run asks for a ZeRO stage, gradient
// clipping or mixed precision (flags.h's TrainingMode::kZero).
#ifndef KOLO_TOOLS_KOLO_TRAIN_ENGINE_H_
#define KOLO_TOOLS_KOLO_TRAIN_ENGINE_H_

#include <torch/torch.h>

#include <memory>

#include "flags.h"
#include "kolo/models.h"
#include "kolo/trainer.h"

namespace kolo::train {

// What a rank holds for its optimizer, counted from the tensors.
using EngineMemory = kolo::torch::StrategyMemory;

struct RunStrategy {
  std::unique_ptr<kolo::torch::TrainingStrategy> strategy;
  kolo::torch::ZeroStrategy* zero = nullptr;  // set under ZeRO
};

// `inner` is the run's optimizer over the model's parameters; under ZeRO
// a new one of the same kind is built over the master slices instead.
RunStrategy MakeStrategy(const Flags& f, models::Model& model,
                         ::torch::optim::Optimizer& inner);

// The ZeroOptimizer options of a run: stage, buckets (the file's, or kolo's
// defaults), accumulation, clipping, precision and the fp16 section.
kolo::torch::ZeroOptions RunZeroOptions(const Flags& f);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_ENGINE_H_
