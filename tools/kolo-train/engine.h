// The optimizer side of a kolo-train step, behind one interface: plain data
// parallelism with DistributedOptimizer, or kolo::torch::ZeroOptimizer when
// the run asks for a ZeRO stage, gradient clipping or mixed precision
// (config_file.h's UsesZero). The training loops call ZeroGrad, Backward
// and Step the same way for both.
#ifndef KOLO_TOOLS_KOLO_TRAIN_ENGINE_H_
#define KOLO_TOOLS_KOLO_TRAIN_ENGINE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "flags.h"
#include "kolo/models.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "kolo/torch_zero.h"

namespace kolo::train {

// What a rank holds for its optimizer, counted from the tensors.
struct EngineMemory {
  int64_t optimizer_state_bytes = 0;
  int64_t master_weight_bytes = 0;
  // The most gradient bytes held at once since ResetPeakMemory(): .grad
  // tensors plus communication buckets (and, under ZeRO, owned slices).
  int64_t gradient_bytes = 0;
};

class Engine {
 public:
  // `inner` is the run's optimizer over the model's parameters; under ZeRO
  // a new one of the same kind is built over the master slices instead.
  static StatusOr<std::unique_ptr<Engine>> Create(
      const Flags& f, models::Model& model, ::torch::optim::Optimizer& inner);

  void ZeroGrad();
  // loss.backward(), scaled under --precision fp16.
  void Backward(const ::torch::Tensor& loss);
  // After every backward pass; `stepped` only at the last pass of an
  // accumulation that was not skipped for an overflow.
  StatusOr<kolo::torch::StepOutcome> Step();
  void SetLearningRate(double lr);
  void SetMomentum(double momentum);
  // Optimizer steps taken (skipped ones not counted).
  int64_t steps_taken() const { return steps_taken_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  double wait_seconds() const;
  EngineMemory Memory() const;
  void ResetPeakMemory();
  // Null for DistributedOptimizer.
  kolo::torch::ZeroOptimizer* zero() { return zero_.get(); }

 private:
  Engine(const Flags& f, models::Model& model,
         ::torch::optim::Optimizer& inner);
  void NoteGradientBytes();

  const Flags& flags_;
  models::Model& model_;
  ::torch::optim::Optimizer& inner_;
  std::unique_ptr<kolo::torch::DistributedOptimizer> distributed_;
  std::unique_ptr<kolo::torch::ZeroOptimizer> zero_;
  int32_t passes_ = 0;
  int64_t steps_taken_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t peak_gradient_bytes_ = 0;  // DistributedOptimizer's
};

// The ZeroOptimizer options of a run: stage, buckets (the file's, or kolo's
// defaults), accumulation, clipping, precision and the fp16 section.
kolo::torch::ZeroOptions RunZeroOptions(const Flags& f);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_ENGINE_H_
