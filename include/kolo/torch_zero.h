// ZeroOptimizer: data-parallel training whose optimizer state (ZeRO stage 1)
// and gradients (stage 2) are sharded across the ranks instead of repeated
// on each, after Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
// Training Trillion Parameter Models", and DeepSpeed's implementation; with
// fp32 master weights, loss scaling for float16, gradient clipping by the
// global norm, gradient accumulation, and checkpoints that load at any
// number of ranks.
//
//   kolo::Init();
//   auto model = std::make_shared<Net>();
//   kolo::torch::BroadcastParameters(*model, 0);
//   kolo::OptimizerConfig adam;  // kolo/training_config.h
//   adam.lr = 1e-3;
//   kolo::torch::ZeroOptions options;
//   options.stage = 2;
//   options.gradient_clipping = 1.0;
//   kolo::torch::ZeroOptimizer optimizer(model->named_parameters(),
//                                        kolo::torch::MakeOptimizer(adam),
//                                        options);
//   for (auto& batch : shard) {
//     auto loss = loss_fn(model->forward(batch.data), batch.target);
//     optimizer.ScaleLoss(loss).backward();
//     KOLO_ASSIGN_OR_RETURN(kolo::torch::StepOutcome outcome,
//                           optimizer.Step());
//     if (outcome.stepped) { /* advance the learning-rate schedule */ }
//   }
//
// The layout. Parameters are taken in reverse order (roughly the order
// autograd produces their gradients) and flattened, end to end, into
// buckets of about reduce_bucket_elements elements. Each bucket is padded
// with zeros to a multiple of the number of shards S (the world size for
// stages 1 and 2, 1 for stage 0) and cut into S equal slices; rank r owns
// slice r of every bucket. For each owned slice the rank keeps a float32
// master copy of the weights, and the wrapped LibTorch optimizer is built
// over those master slices alone, so its state (momentum, Adam's moments)
// exists for 1/S of the model. Optimizers that act element by element (SGD,
// Adam, AdamW) compute the same update on a slice as on the whole tensor;
// the zero padding stays zero under all three.
//
// A step:
//  stage 0: gradients are allreduced, as DistributedOptimizer does (every
//  rank owns everything; the master weights and the options below
//  still apply).
//  stage 1: gradients accumulate in .grad as usual; at the step each
//  bucket is flattened and reduce-scattered, so each rank receives
//  the average of its own slice only.
//  stage 2: gradients leave during the backward pass: an autograd hook
//  copies each gradient into its bucket and releases .grad, and a
//  full bucket is reduce-scattered at once (overlap_comm), half the
//  traffic of an allreduce, while backward continues; each rank
//  keeps only the averaged gradient of its own slices, and with
//  gradient accumulation it adds every backward pass's slice into
//  that (DeepSpeed's stage 2 does the same).
// Then, on the owned slices: divide by the passes and by the loss scale;
// one allreduce of (sum of squares in float64, overflow flag) gives every
// rank the norm of the whole gradient and the same overflow verdict; a
// float16 step that overflowed is skipped by all ranks alike; otherwise the
// gradients are clipped to gradient_clipping by that global norm, the
// optimizer steps the master slices, and the updated slices are allgathered
// (in groups of about allgather_bucket_elements) into every rank's model
// parameters, converted to their dtype (bfloat16 or float16 models keep
// float32 masters).
//
// Stage 3 (parameters sharded too) would keep only the owned slices of the
// parameters between steps and allgather each bucket before its layer runs;
// the bucket layout and the checkpoint format already describe parameters
// by slice, so it can be added without changing either.
//
// Checkpoints (Save/Load, collective). Each rank writes its slices (master
// weights and optimizer state) to its own file, and rank 0 writes a
// manifest of the layout: for each bucket its size, padding and slice, and
// for each parameter its name, shape and place in its bucket, plus the
// optimizer, its step count and the loss scaler's state. The manifest is
// written last (atomically), after every shard file is on disk, and names
// the shard files of that save. Shard file names carry an id of their save,
// so a save never overwrites a file the current manifest names, and the
// files of earlier saves are removed only once the new manifest is
// committed: a crash mid-save leaves the previous checkpoint whole. Load works at any number of ranks and any bucket size: each rank
// maps the elements it owns in the new layout, parameter by parameter,
// onto the old slices that hold them, reads only those shard files, and
// checks every shard's sizes against the manifest, so a layout that does
// not match fails with the file and the tensor named instead of loading
// wrong values (PyTorch Distributed Checkpoint's design: per-rank shards
// plus global metadata, resharded at load).
//
// Thread-safety: one training thread uses a ZeroOptimizer; its hooks run on
// LibTorch's autograd thread. Every rank must call Step(), Save() and Load()
// the same number of times, in the same order.
#ifndef KOLO_TORCH_ZERO_H_
#define KOLO_TORCH_ZERO_H_

#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kolo/loss_scaler.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "kolo/training_config.h"

namespace kolo::torch {

// Builds the wrapped optimizer over the parameters it is given (the master
// slices).
using OptimizerFactory =
    std::function<std::unique_ptr<::torch::optim::Optimizer>(
        std::vector<::torch::Tensor> parameters)>;

// A factory for SGD, Adam or AdamW with `config`'s parameters.
OptimizerFactory MakeOptimizer(const OptimizerConfig& config);

// The bytes of the state tensors (momentum, Adam's moments) an SGD, Adam or
// AdamW optimizer holds; 0 for other optimizers.
int64_t OptimizerStateBytes(::torch::optim::Optimizer& optimizer);

// Sets SGD's momentum, or Adam's and AdamW's beta1, in every parameter
// group (OneCycle's momentum cycling).
void SetOptimizerMomentum(::torch::optim::Optimizer& optimizer,
                          double momentum);

struct ZeroOptions {
  int32_t stage = 2;  // 0, 1 or 2
  // Elements per bucket (DeepSpeed's reduce_bucket_size).
  int64_t reduce_bucket_elements = int64_t{1} << 18;
  // Elements per allgather of updated weights (allgather_bucket_size).
  int64_t allgather_bucket_elements = int64_t{1} << 20;
  // Stages 0 and 2: enqueue a bucket's reduction the moment its last
  // gradient arrives, during backward; false: all at Step().
  bool overlap_comm = true;
  // Backward passes per optimizer step; their gradients are averaged.
  int32_t gradient_accumulation_steps = 1;
  // Clip the gradient to this global L2 norm; 0: no clipping.
  double gradient_clipping = 0;
  // kFloat16: scale the loss (ScaleLoss), reduce gradients as float16, and
  // skip steps that overflow, with loss_scale's rule. kBFloat16 and
  // kFloat32: gradients are reduced as float32, no scaling. In every case
  // the optimizer steps float32 master weights.
  Precision precision = Precision::kFloat32;
  LossScaleConfig loss_scale;
};

// What one Step() did.
struct StepOutcome {
  // The optimizer stepped. False for the backward passes before the last
  // of an accumulation, and for a step skipped for an overflow; a learning
  // rate schedule should advance only when this is true.
  bool stepped = false;
  bool overflow = false;  // skipped because a gradient was inf or NaN
  // The loss scale was at its minimum when the overflow came: the step was
  // skipped and the caller should warn (training may be diverging).
  bool overflow_at_minimum_scale = false;
  double gradient_norm = 0;  // before clipping, unscaled; stepped or overflow
  double loss_scale = 1;     // the scale the pass used
};

// The bytes this rank holds, for memory benchmarks: counted from the
// tensors themselves (their storage), not computed from the model size.
struct ZeroMemory {
  int64_t optimizer_state_bytes = 0;  // the wrapped optimizer's state
  int64_t master_weight_bytes = 0;    // float32 owned slices
  // The most gradient bytes held at once since the last ResetPeak(): the
  // model's .grad tensors, the owned gradient slices and the buckets in
  // flight.
  int64_t peak_gradient_bytes = 0;
};

class ZeroOptimizer {
 public:
  // `named_parameters`: the model's, identical on every rank (call
  // BroadcastParameters first); names are the checkpoint's keys.
  // Parameters that do not require gradients are left alone. Errors (a
  // stage outside 0..2, a non-floating parameter, a parameter not on the
  // CPU) throw std::invalid_argument naming the parameter, as LibTorch's
  // own constructors do; Create() returns them as a Status instead.
  ZeroOptimizer(const ::torch::OrderedDict<std::string, ::torch::Tensor>&
                    named_parameters,
                const OptimizerFactory& make_optimizer,
                ZeroOptions options = {});
  static StatusOr<std::unique_ptr<ZeroOptimizer>> Create(
      const ::torch::OrderedDict<std::string, ::torch::Tensor>&
          named_parameters,
      const OptimizerFactory& make_optimizer, ZeroOptions options = {});
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // The loss to call backward() on: `loss` times the loss scale (float16),
  // or `loss` itself.
  ::torch::Tensor ScaleLoss(const ::torch::Tensor& loss) const;

  // Call after every backward pass. After gradient_accumulation_steps
  // passes: reduces, checks, clips and steps as the header comment says.
  StatusOr<StepOutcome> Step();
  // Drops the model's gradients (sets .grad to undefined).
  void ZeroGrad();

  // Sets every parameter group's learning rate (and, for OneCycle's
  // momentum cycling, SGD's momentum or Adam's beta1).
  void SetLearningRate(double lr);
  void SetMomentum(double momentum);
  ::torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const LossScaler& loss_scaler() const { return loss_scaler_; }
  int64_t steps_taken() const { return steps_taken_; }

  ZeroMemory Memory() const;
  void ResetPeakMemory();

  // Collective: every rank writes its shard into `dir` (created if needed),
  // rank 0 the manifest. Errors name the file.
  Status Save(const std::string& dir);
  // Collective: loads a checkpoint written at any number of ranks into this
  // layout and makes the model's parameters its weights. kNotFound when
  // `dir` has no manifest; kInvalidArgument naming the parameter, the file
  // or the tensor when the checkpoint does not fit this model and
  // optimizer.
  Status Load(const std::string& dir);

  // The layout, for tests and the checkpoint: which rank owns what.
  int32_t shard_count() const { return shard_count_; }
  int32_t bucket_count() const { return static_cast<int32_t>(buckets_.size()); }

 private:
  struct Parameter;
  struct Bucket;
  void Build(const ::torch::OrderedDict<std::string, ::torch::Tensor>& named,
             const OptimizerFactory& make_optimizer);
  void OnGradient(Parameter& parameter, const ::torch::Tensor& grad);
  Status Collect(Parameter& parameter, const ::torch::Tensor& gradient);
  Status Enqueue(Bucket& bucket);
  Status FinishPass();
  Status AddReduced(Bucket& bucket);
  Status DrainReductions(size_t keep);
  Status GatherWeights();
  void ReleaseModelGradients();
  void NoteGradientBytes();

  const ZeroOptions options_;
  const int32_t rank_;
  const int32_t shard_count_;
  std::vector<std::unique_ptr<Parameter>> parameters_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::deque<Bucket*> in_flight_;  // reductions enqueued, oldest first
  std::unique_ptr<::torch::optim::Optimizer> optimizer_;
  LossScaler loss_scaler_;
  int32_t passes_ = 0;
  int64_t steps_taken_ = 0;
  mutable std::mutex mutex_;
  int64_t peak_gradient_bytes_ = 0;  // guarded by mutex_
  Status hook_error_;  // guarded by mutex_: the first error a hook met
};

}  // namespace kolo::torch

#endif  // KOLO_TORCH_ZERO_H_
