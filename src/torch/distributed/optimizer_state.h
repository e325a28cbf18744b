// What kolo needs to see of a LibTorch optimizer's per-parameter state, for
// the three optimizers it shards and checkpoints (SGD, Adam, AdamW):
// LibTorch keeps that state in type-specific classes with no common way to
// list their tensors, so the types are named here, once.
#ifndef KOLO_TORCH_DISTRIBUTED_OPTIMIZER_STATE_H_
#define KOLO_TORCH_DISTRIBUTED_OPTIMIZER_STATE_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kolo/status.h"
#include "kolo/torch_zero.h"  // OptimizerStateBytes

namespace kolo::torch {

// "sgd", "adam" or "adamw"; empty for any other optimizer.
std::string OptimizerKind(const ::torch::optim::Optimizer& optimizer);

// The state of `parameter`: its named tensors (SGD: momentum_buffer; Adam
// and AdamW: exp_avg, exp_avg_sq and, with amsgrad, max_exp_avg_sq) and
// Adam's step count. Empty when the parameter has no state yet.
struct ParameterState {
  std::vector<std::pair<std::string, ::torch::Tensor>> tensors;
  int64_t step = 0;
};
ParameterState GetParameterState(::torch::optim::Optimizer& optimizer,
                                 const ::torch::Tensor& parameter);
// Creates or replaces the state of `parameter` from `state`, whose tensors
// must have its shape; kInvalidArgument naming a tensor the optimizer does
// not keep.
Status SetParameterState(::torch::optim::Optimizer& optimizer,
                         const ::torch::Tensor& parameter,
                         const ParameterState& state);

}  // namespace kolo::torch

#endif  // KOLO_TORCH_DISTRIBUTED_OPTIMIZER_STATE_H_
