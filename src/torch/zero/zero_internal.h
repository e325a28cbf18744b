// ZeroOptimizer's layout, shared by its step (zero_optimizer.cc) and its
// checkpoints (zero_checkpoint.cc). kolo/torch_zero.h explains the design.
#ifndef KOLO_TORCH_ZERO_ZERO_INTERNAL_H_
#define KOLO_TORCH_ZERO_ZERO_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/torch_zero.h"

namespace kolo::torch {

struct ZeroOptimizer::Parameter {
  std::string name;
  ::torch::Tensor tensor;  // the model's parameter
  bool has_hook = false;
  unsigned hook = 0;
  Bucket* bucket = nullptr;
  int64_t offset = 0;       // where its elements start in the bucket
  bool collected = false;   // this pass's gradient is in the bucket
  int32_t passes_seen = 0;  // stage 0: hook calls since the last step
};

struct ZeroOptimizer::Bucket {
  int32_t index = 0;
  std::string name;  // the same on every rank
  std::vector<Parameter*> members;
  int64_t elements = 0;  // of the members, end to end
  int64_t padded = 0;    // elements rounded up to a multiple of the shards
  int64_t slice = 0;     // padded / shards
  // This rank's slice of the weights, float32: the parameter the wrapped
  // optimizer steps. Its .grad is the reduced gradient of the slice.
  ::torch::Tensor master;
  // The gradients being collected for one reduction (float32, padded);
  // undefined when none is under way.
  ::torch::Tensor flat;
  int32_t collected = 0;  // members collected into `flat` this pass
  TensorHandle handle;
  bool enqueued = false;  // its reduction is in flight
  bool reduced = false;   // this pass's slice is in master's gradient
};

}  // namespace kolo::torch

#endif  // KOLO_TORCH_ZERO_ZERO_INTERNAL_H_
