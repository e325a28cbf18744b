// kolo for LibTorch: collectives on torch::Tensor, parameter and optimizer
// state broadcast, and DistributedOptimizer, which averages gradients across
// ranks while the backward pass is still running.
//
//   kolo::Init();
//   auto model = std::make_shared<Net>();
//   torch::optim::SGD sgd(model->parameters(), /*lr=*/0.01);
//   kolo::torch::BroadcastParameters(*model, 0);
//   kolo::torch::DistributedOptimizer optimizer(sgd, model->named_parameters());
//   for (auto& batch : shard) {
//     optimizer.ZeroGrad();
//     loss_fn(model->forward(batch.data), batch.target).backward();
//     optimizer.Step();                      // waits for the averaged gradients
//   }
//
// LibTorch lives in namespace ::torch; this header's namespace is
// kolo::torch, so code inside namespace kolo writes ::torch for LibTorch.
// Errors are kolo::Status values, as in the rest of kolo.
//
// Thread-safety: the collectives may be called from any thread (they are
// named operations of kolo/runtime.h). A DistributedOptimizer is used by one
// training thread; its gradient hooks run on LibTorch's autograd thread.
#ifndef KOLO_TORCH_H_
#define KOLO_TORCH_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/runtime.h"
#include "kolo/status.h"

namespace kolo::torch {

// The kolo data type of a LibTorch scalar type; kInvalidArgument for types
// kolo cannot move (bool, complex, ...).
StatusOr<DataType> ToDataType(c10::ScalarType type);

// An enqueued tensor collective. Wait() returns the result tensor.
class TensorHandle {
 public:
  TensorHandle() = default;
  TensorHandle(Handle handle, ::torch::Tensor input, ::torch::Tensor output,
               std::vector<int64_t> trailing_shape);
  bool Poll() const { return handle_.Poll(); }
  StatusOr<::torch::Tensor> Wait(
      std::chrono::milliseconds timeout = std::chrono::hours(24 * 365)) const;

 private:
  Handle handle_;
  ::torch::Tensor input_;   // kept alive while the runtime reads it
  ::torch::Tensor output_;  // allreduce and broadcast: written in place
  std::vector<int64_t> trailing_shape_;  // outputs the runtime allocates
};

// Asynchronous collectives, named as in kolo/runtime.h. Any dtype kolo
// supports, contiguous or not (non-contiguous inputs are copied).
StatusOr<TensorHandle> AllreduceAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      ReduceOp op = ReduceOp::kAverage);
// Concatenates every rank's tensor along dimension 0 (sizes may differ).
StatusOr<TensorHandle> AllgatherAsync(const std::string& name,
                                      const ::torch::Tensor& tensor);
StatusOr<TensorHandle> BroadcastAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      int32_t root);
// Sends splits[j] rows (dimension 0) to rank j; empty splits: equal parts.
StatusOr<TensorHandle> AlltoallAsync(const std::string& name,
                                     const ::torch::Tensor& tensor,
                                     std::vector<int64_t> splits = {});
// Reduces across ranks and keeps this rank's block of dimension 0, which
// must divide by the world size.
StatusOr<TensorHandle> ReducescatterAsync(const std::string& name,
                                          const ::torch::Tensor& tensor,
                                          ReduceOp op = ReduceOp::kAverage);

// Synchronous forms: enqueue and wait. Each returns a new tensor.
StatusOr<::torch::Tensor> Allreduce(const ::torch::Tensor& tensor,
                                    const std::string& name,
                                    ReduceOp op = ReduceOp::kAverage);
StatusOr<::torch::Tensor> Allgather(const ::torch::Tensor& tensor,
                                    const std::string& name);
StatusOr<::torch::Tensor> Broadcast(const ::torch::Tensor& tensor,
                                    const std::string& name, int32_t root);
StatusOr<::torch::Tensor> Alltoall(const ::torch::Tensor& tensor,
                                   const std::string& name,
                                   std::vector<int64_t> splits = {});
StatusOr<::torch::Tensor> Reducescatter(const ::torch::Tensor& tensor,
                                        const std::string& name,
                                        ReduceOp op = ReduceOp::kAverage);

// Makes every rank's parameters and buffers (batch-norm statistics) equal to
// root's, so all ranks start identical.
Status BroadcastParameters(::torch::nn::Module& module, int32_t root = 0);
// Broadcasts SGD momentum buffers and Adam/AdamW moments and step counts.
// Ranks whose optimizer has no state yet get root's (it is created).
Status BroadcastOptimizerState(::torch::optim::Optimizer& optimizer,
                               int32_t root = 0);
// The average of `value` over all ranks (loss, accuracy).
StatusOr<double> AverageMetric(double value, const std::string& name);

enum class Compression {
  kNone,      // gradients travel as they are
  kFloat16,   // float32 gradients travel as float16
  kBFloat16,  // ... as bfloat16
};
// Every reduction step is computed in float32 and rounded once, so
// compression costs precision on the wire, not in the arithmetic.

struct DistributedOptimizerOptions {
  ReduceOp op = ReduceOp::kAverage;  // kAverage or kSum
  Compression compression = Compression::kNone;
  // Communicate every k backward passes; the gradients of the k passes are
  // averaged locally, so k passes over batch b equal one pass over k·b.
  int32_t backward_passes_per_step = 1;
  // With kAverage: divide by this before the sum and by size/this after it
  // (keeps float16 sums in range on many ranks).
  double gradient_predivide_factor = 1.0;
  // Gradients travel in buckets of about this many bytes (float32), filled
  // in the reverse of the parameters' order, roughly the order autograd
  // produces them; a bucket is enqueued once all of its gradients are in.
  // One allreduce per bucket rather than per parameter keeps the runtime's
  // ticks, and the wake-ups that steal the compute core, few on small
  // models while larger models still overlap many buckets with backward
  // (PyTorch DDP buckets the same way). 0: one parameter per bucket.
  int64_t bucket_bytes = int64_t{1} << 20;
};

// Wraps an optimizer: autograd hooks collect each gradient the moment it is
// computed into its bucket, and a full bucket is enqueued for allreduce at
// once, so communication overlaps the rest of the backward pass; Step()
// waits for what is outstanding,
// writes the averaged gradients and steps the wrapped optimizer.
// Parameters that got no gradient in a step (unused branches) are reduced as
// zeros, so ranks never wait for each other's missing gradients.
// In a world of one (or before kolo::Init) there is nothing to reduce: no
// hook enqueues anything, compression is skipped, and Step() only averages
// the accumulated passes and steps, so a single worker runs at the speed of
// the bare optimizer.
class DistributedOptimizer {
 public:
  // `named_parameters` gives the names the gradients travel under; every
  // rank must pass the same names (module.named_parameters() does).
  DistributedOptimizer(::torch::optim::Optimizer& optimizer,
                       const ::torch::OrderedDict<std::string, ::torch::Tensor>&
                           named_parameters,
                       DistributedOptimizerOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // After backward_passes_per_step backward passes: waits, writes the
  // reduced gradients into .grad and steps. Before that: only counts the
  // pass (gradients keep accumulating locally).
  Status Step();
  void ZeroGrad();
  ::torch::optim::Optimizer& optimizer() { return optimizer_; }

  // Seconds Step() has spent blocked on outstanding allreduces, in total:
  // the communication (and the waiting for slower ranks) that backward did
  // not hide.
  double wait_seconds() const { return wait_seconds_; }
  // Bytes of the float32 buckets gradients travel in, held for the
  // optimizer's life (for memory benchmarks).
  int64_t bucket_bytes() const;

  // When the hooks enqueued gradients during the last backward pass, for
  // tests and benchmarks: first and last enqueue times.
  std::pair<std::chrono::steady_clock::time_point,
            std::chrono::steady_clock::time_point>
  last_enqueue_window() const;

 private:
  struct Parameter;
  struct Bucket;
  void OnGradient(Parameter& parameter, const ::torch::Tensor& grad);
  // Puts this step's gradient of `parameter` into its bucket, and enqueues
  // the bucket when it was the last one missing.
  Status Collect(Parameter& parameter, const ::torch::Tensor& gradient_sum);
  Status Enqueue(Bucket& bucket);

  ::torch::optim::Optimizer& optimizer_;
  const DistributedOptimizerOptions options_;
  const bool alone_;  // a world of one: nothing to communicate
  std::vector<std::unique_ptr<Parameter>> parameters_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  int32_t passes_ = 0;  // backward passes since the last step
  double wait_seconds_ = 0;
  mutable std::mutex mutex_;
  Status hook_error_;  // guarded by mutex_: first error a hook met
  std::chrono::steady_clock::time_point first_enqueue_;  // guarded by mutex_
  std::chrono::steady_clock::time_point last_enqueue_;   // guarded by mutex_
};

}  // namespace kolo::torch

#endif  // KOLO_TORCH_H_
