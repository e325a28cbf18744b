#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kolo/kolo.h"
#include "kolo/torch_zero.h"
#include "torch/distributed/optimizer_metrics.h"
#include "torch/distributed/optimizer_state.h"
#include "torch/zero/zero_internal.h"

namespace kolo::torch {
namespace {

int32_t ShardCount(int32_t stage) { return stage == 0 ? 1 : Size(); }

// Reductions in flight before collecting waits for the oldest: bounds the
// gradient buffers a rank holds at stage 2 (DeepSpeed double-buffers its
// reduction buckets for the same reason) while still overlapping.
constexpr size_t kBucketsInFlight = 4;

int64_t Bytes(const ::torch::Tensor& tensor) {
  return tensor.defined() ? static_cast<int64_t>(tensor.nbytes()) : 0;
}

// Adam and AdamW take the same options; they differ in how weight decay
// enters the update.
template <typename Adam, typename AdamOptions>
std::unique_ptr<::torch::optim::Optimizer> MakeAdam(
    std::vector<::torch::Tensor> parameters, const OptimizerConfig& config) {
  return std::make_unique<Adam>(std::move(parameters),
                                AdamOptions(config.lr)
                                    .betas({config.beta1, config.beta2})
                                    .eps(config.eps)
                                    .weight_decay(config.weight_decay)
                                    .amsgrad(config.amsgrad));
}

}  // namespace

OptimizerFactory MakeOptimizer(const OptimizerConfig& config) {
  return [config](std::vector<::torch::Tensor> parameters)
             -> std::unique_ptr<::torch::optim::Optimizer> {
    switch (config.type) {
      case OptimizerType::kSgd:
        return std::make_unique<::torch::optim::SGD>(
            parameters, ::torch::optim::SGDOptions(config.lr)
                            .momentum(config.momentum)
                            .dampening(config.dampening)
                            .nesterov(config.nesterov)
                            .weight_decay(config.weight_decay));
      case OptimizerType::kAdam:
        return MakeAdam<::torch::optim::Adam, ::torch::optim::AdamOptions>(
            parameters, config);
      case OptimizerType::kAdamW:
        return MakeAdam<::torch::optim::AdamW, ::torch::optim::AdamWOptions>(
            parameters, config);
    }
    return nullptr;
  };
}

ZeroOptimizer::ZeroOptimizer(
    const ::torch::OrderedDict<std::string, ::torch::Tensor>& named_parameters,
    const OptimizerFactory& make_optimizer, ZeroOptions options)
    : options_(options),
      rank_(Rank()),
      shard_count_(ShardCount(options.stage)),
      loss_scaler_(options.loss_scale) {
  if (options_.stage < 0 || options_.stage > 2) {
    throw std::invalid_argument("ZeroOptimizer: stage " +
                                std::to_string(options_.stage) +
                                " is not 0, 1 or 2");
  }
  if (options_.gradient_accumulation_steps < 1) {
    throw std::invalid_argument(
        "ZeroOptimizer: gradient_accumulation_steps must be at least 1, not " +
        std::to_string(options_.gradient_accumulation_steps));
  }
  if (options_.gradient_clipping < 0) {
    throw std::invalid_argument(
        "ZeroOptimizer: gradient_clipping must not be negative");
  }
  Build(named_parameters, make_optimizer);
}

StatusOr<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::Create(
    const ::torch::OrderedDict<std::string, ::torch::Tensor>& named_parameters,
    const OptimizerFactory& make_optimizer, ZeroOptions options) {
  try {
    return std::make_unique<ZeroOptimizer>(named_parameters, make_optimizer,
                                           options);
  } catch (const std::exception& e) {
    return InvalidArgument(e.what());
  }
}

void ZeroOptimizer::Build(
    const ::torch::OrderedDict<std::string, ::torch::Tensor>& named,
    const OptimizerFactory& make_optimizer) {
  for (const auto& item : named) {
    const ::torch::Tensor& tensor = item.value();
    if (!tensor.requires_grad()) continue;
    if (!tensor.is_floating_point()) {
      throw std::invalid_argument("ZeroOptimizer: parameter '" + item.key() +
                                  "' is not floating point");
    }
    if (!tensor.device().is_cpu()) {
      throw std::invalid_argument("ZeroOptimizer: parameter '" + item.key() +
                                  "' is on " + tensor.device().str() +
                                  "; kolo moves CPU tensors");
    }
    auto parameter = std::make_unique<Parameter>();
    parameter->name = item.key();
    parameter->tensor = tensor;
    parameters_.push_back(std::move(parameter));
  }
  // Autograd produces the last layers' gradients first.
  auto bucket = std::make_unique<Bucket>();
  auto close = [this](std::unique_ptr<Bucket> b) {
    b->index = static_cast<int32_t>(buckets_.size());
    b->name = "kolo.zero." + std::to_string(b->index) + "." +
              b->members.front()->name;
    b->slice = (b->elements + shard_count_ - 1) / shard_count_;
    b->padded = b->slice * shard_count_;
    buckets_.push_back(std::move(b));
  };
  for (auto it = parameters_.rbegin(); it != parameters_.rend(); ++it) {
    Parameter& p = **it;
    p.bucket = bucket.get();
    p.offset = bucket->elements;
    bucket->members.push_back(&p);
    bucket->elements += p.tensor.numel();
    if (bucket->elements >= options_.reduce_bucket_elements) {
      close(std::move(bucket));
      bucket = std::make_unique<Bucket>();
    }
  }
  if (!bucket->members.empty()) close(std::move(bucket));

  // The master slices start as this rank's part of the (identical) weights.
  ::torch::NoGradGuard no_grad;
  std::vector<::torch::Tensor> masters;
  for (auto& b : buckets_) {
    ::torch::Tensor full = ::torch::zeros({b->padded}, ::torch::kFloat32);
    for (Parameter* p : b->members) {
      full.narrow(0, p->offset, p->tensor.numel())
          .copy_(p->tensor.detach().reshape({-1}));
    }
    b->master =
        full.narrow(0, rank_ % shard_count_ * b->slice, b->slice).clone();
    masters.push_back(b->master);
  }
  optimizer_ = make_optimizer(masters);
  if (optimizer_ == nullptr)
    throw std::invalid_argument("ZeroOptimizer: the factory made no optimizer");

  // Stage 2 collects every pass in hooks; stage 0 overlaps the allreduce
  // like DistributedOptimizer; stage 1 reduces at the step, from .grad.
  const bool hooks =
      options_.stage == 2 || (options_.stage == 0 && options_.overlap_comm);
  if (!hooks) return;
  for (auto& p : parameters_) {
    Parameter* raw = p.get();
    p->hook = p->tensor.register_hook([this, raw](const ::torch::Tensor& grad) {
      OnGradient(*raw, grad);
      return grad;
    });
    p->has_hook = true;
  }
}

ZeroOptimizer::~ZeroOptimizer() {
  for (auto& p : parameters_) {
    if (p->has_hook) p->tensor.remove_hook(p->hook);
  }
  for (auto& b : buckets_) {
    if (b->enqueued) (void)b->handle.Wait();
  }
}

::torch::Tensor ZeroOptimizer::ScaleLoss(const ::torch::Tensor& loss) const {
  if (options_.precision != Precision::kFloat16) return loss;
  return loss * loss_scaler_.scale();
}

// ---------------------------------------------------------- collecting

void ZeroOptimizer::OnGradient(Parameter& parameter,
                               const ::torch::Tensor& grad) {
  Status status;
  if (options_.stage == 2) {
    // .grad of the parameters collected before this one is set by now
    // (autograd stores a gradient right after its hook returns): release
    // it, so that a rank never holds the whole model's gradients.
    ReleaseModelGradients();
    status = Collect(parameter, grad.detach());
    if (status.ok()) status = DrainReductions(kBucketsInFlight);
  } else {
    // Stage 0: only the last pass of an accumulation is reduced; .grad
    // holds the earlier passes' sum.
    if (++parameter.passes_seen < options_.gradient_accumulation_steps) return;
    ::torch::Tensor sum = grad.detach();
    if (parameter.tensor.grad().defined())
      sum = sum + parameter.tensor.grad().detach();
    status = Collect(parameter, sum);
    // Stage 0 overlaps like DistributedOptimizer: never waits in a hook.
    if (status.ok()) status = DrainReductions(buckets_.size());
  }
  NoteGradientBytes();
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (hook_error_.ok()) hook_error_ = status;
  }
}

Status ZeroOptimizer::Collect(Parameter& parameter,
                              const ::torch::Tensor& gradient) {
  Bucket& bucket = *parameter.bucket;
  if (parameter.collected) {
    return Internal("ZeroOptimizer: gradient of '" + parameter.name +
                    "' arrived twice in one backward pass (call Step() after "
                    "every backward pass)");
  }
  ::torch::NoGradGuard no_grad;
  if (!bucket.flat.defined())
    bucket.flat = ::torch::zeros({bucket.padded}, ::torch::kFloat32);
  bucket.flat.narrow(0, parameter.offset, parameter.tensor.numel())
      .copy_(gradient.reshape({-1}));
  parameter.collected = true;
  if (++bucket.collected < static_cast<int32_t>(bucket.members.size()))
    return Status::Ok();
  NoteGradientBytes();  // the bucket is full: the most it holds
  return Enqueue(bucket);
}

Status ZeroOptimizer::Enqueue(Bucket& bucket) {
  if (Size() == 1) return AddReduced(bucket);  // nothing to communicate
  ::torch::Tensor wire = bucket.flat;
  if (options_.precision == Precision::kFloat16)
    wire = wire.to(::torch::kFloat16);
  if (shard_count_ == 1) {
    KOLO_ASSIGN_OR_RETURN(
        bucket.handle, AllreduceAsync(bucket.name, wire, ReduceOp::kAverage));
  } else {
    KOLO_ASSIGN_OR_RETURN(
        bucket.handle,
        ReducescatterAsync(bucket.name, wire, ReduceOp::kAverage));
  }
  bucket.enqueued = true;
  in_flight_.push_back(&bucket);
  return Status::Ok();
}

// Adds the bucket's reduced slice (waiting for it when it is in flight) to
// the master's gradient, and lets go of the bucket's buffers.
Status ZeroOptimizer::AddReduced(Bucket& bucket) {
  ::torch::NoGradGuard no_grad;
  ::torch::Tensor slice;
  if (Size() == 1) {
    slice = bucket.flat;
  } else {
    StatusOr<::torch::Tensor> reduced = bucket.handle.Wait();
    bucket.enqueued = false;
    bucket.handle = TensorHandle();
    KOLO_RETURN_IF_ERROR(reduced.status());
    slice = reduced->to(::torch::kFloat32);
  }
  ::torch::Tensor& grad = bucket.master.mutable_grad();
  if (grad.defined()) {
    grad.add_(slice);
  } else {
    grad = slice;  // a fresh tensor, or the bucket this pass lets go of
  }
  bucket.flat = ::torch::Tensor();
  bucket.reduced = true;
  NoteGradientBytes();
  return Status::Ok();
}

// Takes in the reductions that have finished, oldest first, and waits for
// the oldest while more than `keep` are in flight; each frees its bucket.
Status ZeroOptimizer::DrainReductions(size_t keep) {
  while (!in_flight_.empty() &&
         (in_flight_.size() > keep || in_flight_.front()->handle.Poll())) {
    Bucket* oldest = in_flight_.front();
    in_flight_.pop_front();
    KOLO_RETURN_IF_ERROR(AddReduced(*oldest));
  }
  return Status::Ok();
}

// Collects what this pass did not produce (parameters unused on this rank
// get zeros, so every rank reduces every bucket; at stage 1, .grad), frees
// each .grad once it is in its bucket, and adds every bucket's reduced
// slice to the masters' gradients.
Status ZeroOptimizer::FinishPass() {
  ::torch::NoGradGuard no_grad;
  Status first_error;
  for (auto& p : parameters_) {
    if (p->collected) continue;
    ::torch::Tensor grad = p->tensor.grad().defined()
                               ? p->tensor.grad().detach()
                               : ::torch::zeros_like(p->tensor);
    Status collected = Collect(*p, grad);
    p->tensor.mutable_grad() = ::torch::Tensor();
    if (collected.ok()) collected = DrainReductions(kBucketsInFlight);
    if (!collected.ok()) {
      first_error = collected;
      break;
    }
  }
  ReleaseModelGradients();
  Status drained = DrainReductions(0);
  if (first_error.ok()) first_error = drained;
  // Whatever failed, the next pass starts clean.
  in_flight_.clear();
  for (auto& b : buckets_) {
    b->collected = 0;
    b->reduced = false;
    b->flat = ::torch::Tensor();
  }
  for (auto& p : parameters_) {
    p->collected = false;
    p->passes_seen = 0;
  }
  return first_error;
}

void ZeroOptimizer::ReleaseModelGradients() {
  for (auto& p : parameters_) {
    if (p->tensor.grad().defined())
      p->tensor.mutable_grad() = ::torch::Tensor();
  }
}

void ZeroOptimizer::NoteGradientBytes() {
  int64_t bytes = 0;
  for (const auto& p : parameters_) bytes += Bytes(p->tensor.grad());
  for (const auto& b : buckets_)
    bytes += Bytes(b->flat) + Bytes(b->master.grad());
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > peak_gradient_bytes_) peak_gradient_bytes_ = bytes;
}

// ---------------------------------------------------------------- step

StatusOr<StepOutcome> ZeroOptimizer::Step() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!hook_error_.ok()) {
      Status error = hook_error_;
      hook_error_ = Status::Ok();
      return error;
    }
  }
  StepOutcome outcome;
  outcome.loss_scale =
      options_.precision == Precision::kFloat16 ? loss_scaler_.scale() : 1.0;
  NoteGradientBytes();
  if (options_.stage == 2) KOLO_RETURN_IF_ERROR(FinishPass());
  if (++passes_ < options_.gradient_accumulation_steps) return outcome;
  passes_ = 0;
  // Stages 0 and 1: .grad holds the sum of the passes.
  if (options_.stage != 2) KOLO_RETURN_IF_ERROR(FinishPass());

  ::torch::NoGradGuard no_grad;
  // The slices hold the sum over the passes of the rank average, scaled.
  const double divisor =
      options_.gradient_accumulation_steps * outcome.loss_scale;
  double square_sum = 0;
  for (auto& b : buckets_) {
    ::torch::Tensor& grad = b->master.mutable_grad();
    if (divisor != 1.0) grad.div_(divisor);
    square_sum += grad.square().sum(::torch::kFloat64).item<double>();
  }
  bool overflow = !std::isfinite(square_sum);
  if (shard_count_ > 1) {
    // One collective gives every rank the whole gradient's norm and the
    // same overflow verdict.
    double local[2] = {overflow ? 0.0 : square_sum, overflow ? 1.0 : 0.0};
    double total[2] = {0, 0};
    KOLO_RETURN_IF_ERROR(
        Allreduce(local, total, 2, DataType::kFloat64, ReduceOp::kSum)
            .WithContext("ZeroOptimizer: agreeing on the gradient norm"));
    square_sum = total[0];
    overflow = total[1] > 0 || !std::isfinite(square_sum);
  }
  outcome.gradient_norm = overflow ? INFINITY : std::sqrt(square_sum);
  auto drop_gradients = [this] {
    for (auto& b : buckets_) b->master.mutable_grad() = ::torch::Tensor();
  };
  if (options_.precision == Precision::kFloat16) {
    const LossScaler::Verdict verdict = loss_scaler_.Update(overflow);
    if (verdict != LossScaler::Verdict::kApply) {
      outcome.overflow = true;
      outcome.overflow_at_minimum_scale =
          verdict == LossScaler::Verdict::kSkipAtMinimum;
      drop_gradients();
      GetOptimizerMetrics().skipped_steps.Increment();
      return outcome;
    }
  }
  if (options_.gradient_clipping > 0 && std::isfinite(outcome.gradient_norm)) {
    // PyTorch's clip_grad_norm_: scale by max_norm / (norm + 1e-6) when
    // that is below 1.
    const double coefficient =
        options_.gradient_clipping / (outcome.gradient_norm + 1e-6);
    if (coefficient < 1.0) {
      for (auto& b : buckets_) b->master.mutable_grad().mul_(coefficient);
    }
  }
  optimizer_->step();
  drop_gradients();
  ++steps_taken_;
  GetOptimizerMetrics().steps.Increment();
  outcome.stepped = true;
  KOLO_RETURN_IF_ERROR(GatherWeights());
  return outcome;
}

// Every rank's updated slices, into every rank's model parameters.
Status ZeroOptimizer::GatherWeights() {
  ::torch::NoGradGuard no_grad;
  if (shard_count_ == 1) {
    for (auto& b : buckets_) {
      for (Parameter* p : b->members) {
        p->tensor.copy_(b->master.narrow(0, p->offset, p->tensor.numel())
                            .view_as(p->tensor));
      }
    }
    return Status::Ok();
  }
  // Groups of consecutive buckets travel in one allgather; rank r's part of
  // the result is its slices of the group's buckets, end to end.
  struct Group {
    std::vector<Bucket*> buckets;
    int64_t slice_elements = 0;  // per rank
    TensorHandle handle;
  };
  std::vector<Group> groups;
  for (auto& b : buckets_) {
    if (groups.empty() ||
        (groups.back().slice_elements + b->slice) * shard_count_ >
            options_.allgather_bucket_elements) {
      groups.emplace_back();
    }
    groups.back().buckets.push_back(b.get());
    groups.back().slice_elements += b->slice;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<::torch::Tensor> slices;
    for (Bucket* b : groups[g].buckets) slices.push_back(b->master);
    KOLO_ASSIGN_OR_RETURN(
        groups[g].handle,
        AllgatherAsync("kolo.zero.weights." + std::to_string(g),
                       ::torch::cat(slices)));
  }
  for (Group& group : groups) {
    KOLO_ASSIGN_OR_RETURN(::torch::Tensor gathered, group.handle.Wait());
    // Each parameter straight from the slices that hold it; only one that
    // straddles two ranks' slices is joined first.
    int64_t prefix = 0;
    for (Bucket* b : group.buckets) {
      for (Parameter* p : b->members) {
        const int64_t end = p->offset + p->tensor.numel();
        std::vector<::torch::Tensor> runs;
        for (int64_t at = p->offset; at < end;) {
          const int64_t rank = at / b->slice;
          const int64_t run = std::min(end, (rank + 1) * b->slice) - at;
          runs.push_back(gathered.narrow(
              0, rank * group.slice_elements + prefix + at - rank * b->slice,
              run));
          at += run;
        }
        const ::torch::Tensor source =
            runs.size() == 1 ? runs.front() : ::torch::cat(runs);
        p->tensor.copy_(source.view_as(p->tensor));
      }
      prefix += b->slice;
    }
  }
  return Status::Ok();
}

void ZeroOptimizer::ZeroGrad() {
  ReleaseModelGradients();
  for (auto& p : parameters_) p->passes_seen = 0;
}

void ZeroOptimizer::SetLearningRate(double lr) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
}

void ZeroOptimizer::SetMomentum(double momentum) {
  SetOptimizerMomentum(*optimizer_, momentum);
}

ZeroMemory ZeroOptimizer::Memory() const {
  ZeroMemory memory;
  memory.optimizer_state_bytes = OptimizerStateBytes(*optimizer_);
  for (const auto& b : buckets_) memory.master_weight_bytes += Bytes(b->master);
  std::lock_guard<std::mutex> lock(mutex_);
  memory.peak_gradient_bytes = peak_gradient_bytes_;
  return memory;
}

void ZeroOptimizer::ResetPeakMemory() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_gradient_bytes_ = 0;
}

}  // namespace kolo::torch
