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
  // `destination`, when given, receives a copy of `output` once it
  // completes and is what Wait() returns (a non-contiguous tensor reduced
  // in place through a contiguous `output`).
  TensorHandle(Handle handle, ::torch::Tensor input, ::torch::Tensor output,
               std::vector<int64_t> trailing_shape,
               ::torch::Tensor destination = {});
  bool Poll() const { return handle_.Poll(); }
  StatusOr<::torch::Tensor> Wait(
      std::chrono::milliseconds timeout = std::chrono::hours(24 * 365)) const;
  // Alltoall: how many rows came from each rank. Valid once Wait() returned
  // ok.
  std::vector<int64_t> ReceivedRows() const;
  const std::string& name() const { return handle_.name(); }

 private:
  Handle handle_;
  ::torch::Tensor input_;   // kept alive while the runtime reads it
  ::torch::Tensor output_;  // allreduce and broadcast: written in place
  std::vector<int64_t> trailing_shape_;  // outputs the runtime allocates
  ::torch::Tensor destination_;
};

// Asynchronous collectives, named as in kolo/runtime.h. Any dtype kolo
// supports, contiguous or not (non-contiguous inputs are copied).
StatusOr<TensorHandle> AllreduceAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      ReduceOp op = ReduceOp::kAverage);
// Reduces `tensor` into `output`, of the same shape and type, which may be
// `tensor` itself (in place); Wait() returns `output`.
StatusOr<TensorHandle> AllreduceAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      const ::torch::Tensor& output,
                                      ReduceOp op);
// Tensors reduced together: fused into one exchange and completed together
// (kolo/runtime.h's grouped allreduce), each into its output (which may be
// the tensor itself). All of one type; names.size() == tensors.size().
StatusOr<std::vector<TensorHandle>> GroupedAllreduceAsync(
    const std::string& group_name, const std::vector<std::string>& names,
    const std::vector<::torch::Tensor>& tensors,
    const std::vector<::torch::Tensor>& outputs, ReduceOp op);
// Concatenates every rank's tensor along dimension 0 (sizes may differ).
StatusOr<TensorHandle> AllgatherAsync(const std::string& name,
                                      const ::torch::Tensor& tensor);
StatusOr<TensorHandle> BroadcastAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      int32_t root);
// Overwrites `tensor` itself with root's; Wait() returns it.
StatusOr<TensorHandle> BroadcastInPlaceAsync(const std::string& name,
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
  // false: the k passes' gradients are summed instead (Horovod's rule; its
  // scripts scale the loss themselves).
  bool average_backward_passes = true;
  // With kAverage: divide by this before the sum and by size/this after it
  // (keeps float16 sums in range on many ranks).
  double gradient_predivide_factor = 1.0;
  // Gradients travel in buckets of about this many bytes, of the
  // parameters' type, filled in the reverse of the parameters' order,
  // roughly the order autograd produces them; a bucket is enqueued once all of its gradients are in.
  // One allreduce per bucket rather than per parameter keeps the runtime's
  // ticks, and the wake-ups that steal the compute core, few on small
  // models while larger models still overlap many buckets with backward
  // (PyTorch DDP buckets the same way). 0: one parameter per bucket.
  int64_t bucket_bytes = int64_t{1} << 20;
  // Parameters that travel together, by name (Horovod's groups=): each
  // list is one bucket per type, whatever its size, enqueued once all of
  // its gradients are in; parameters in no list are bucketed by size. A
  // name that is not a parameter, or that is in two lists, is
  // kInvalidArgument from the first Synchronize().
  std::vector<std::vector<std::string>> groups;
};

// Averages (or sums) a model's gradients across ranks while the backward
// pass is still running: autograd hooks collect each gradient the moment it
// is computed into its bucket, and a full bucket is enqueued for allreduce at
// once, so communication overlaps the rest of the backward pass.
// Synchronize() waits for what is outstanding and writes the reduced
// gradients into .grad. Parameters that got no gradient in a step (unused
// branches) are reduced as zeros, so ranks never wait for each other's
// missing gradients. In a world of one (or before kolo::Init) no hook
// enqueues anything and compression is skipped.
// DistributedOptimizer below is a reducer and an optimizer; Python's
// kolo.torch.DistributedOptimizer is one and a Python optimizer.
class GradientReducer {
 public:
  // `named_parameters` gives the names the gradients travel under; every
  // rank must pass the same names (module.named_parameters() does).
  // Parameters that do not require a gradient are left out.
  GradientReducer(const ::torch::OrderedDict<std::string, ::torch::Tensor>&
                      named_parameters,
                  DistributedOptimizerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Once a step's backward_passes_per_step passes have run: waits for every
  // bucket (enqueuing those whose hooks did not all fire) and writes the
  // reduced gradients into .grad. With average_backward_passes the passes'
  // sum is divided by their number, as one pass over their joint batch
  // would give (in a world of one that is all it does). Errors a hook met
  // surface here.
  Status Synchronize();

  // Seconds Synchronize() has spent blocked on outstanding allreduces, in
  // total: the communication (and the waiting for slower ranks) that
  // backward did not hide.
  double wait_seconds() const { return wait_seconds_; }
  // Bytes of the buckets gradients travel in, held for the
  // reducer's life (for memory benchmarks).
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
  // Waits for `bucket` and writes its members' .grad.
  Status Unpack(Bucket& bucket, double post_scale);
  // Divides the passes' sum in .grad by their number (a world of one).
  void AverageLocalPasses();
  // Forms buckets_: the explicit groups first, then the rest by size.
  void PlanBuckets();
  // Closes `members` (one type, at least one) into a new bucket.
  void AddBucket(std::vector<Parameter*> members);

  const DistributedOptimizerOptions options_;
  const bool alone_;  // a world of one: nothing to communicate
  std::vector<std::unique_ptr<Parameter>> parameters_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  Status plan_error_;  // a bad options_.groups, reported by Synchronize()
  double wait_seconds_ = 0;
  mutable std::mutex mutex_;
  Status hook_error_;  // guarded by mutex_: first error a hook met
  std::chrono::steady_clock::time_point first_enqueue_;  // guarded by mutex_
  std::chrono::steady_clock::time_point last_enqueue_;   // guarded by mutex_
};

// Wraps an optimizer with a GradientReducer: Step() counts backward passes,
// and after backward_passes_per_step of them waits for the reduced
// gradients and steps the wrapped optimizer. In a world of one Step() only
// averages the accumulated passes and steps, so a single worker runs at the
// speed of the bare optimizer.
class DistributedOptimizer {
 public:
  DistributedOptimizer(::torch::optim::Optimizer& optimizer,
                       const ::torch::OrderedDict<std::string, ::torch::Tensor>&
                           named_parameters,
                       DistributedOptimizerOptions options = {});
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // After backward_passes_per_step backward passes: waits, writes the
  // reduced gradients into .grad and steps. Before that: only counts the
  // pass (gradients keep accumulating locally).
  Status Step();
  void ZeroGrad();
  ::torch::optim::Optimizer& optimizer() { return optimizer_; }

  double wait_seconds() const { return reducer_.wait_seconds(); }
  int64_t bucket_bytes() const { return reducer_.bucket_bytes(); }
  std::pair<std::chrono::steady_clock::time_point,
            std::chrono::steady_clock::time_point>
  last_enqueue_window() const {
    return reducer_.last_enqueue_window();
  }

 private:
  ::torch::optim::Optimizer& optimizer_;
  const int32_t backward_passes_per_step_;
  GradientReducer reducer_;
  int32_t passes_ = 0;  // backward passes since the last step
};

}  // namespace kolo::torch

#endif  // KOLO_TORCH_H_
