#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "kolo/torch.h"
#include "torch/distributed/optimizer_metrics.h"
#include "torch/distributed/optimizer_state.h"

namespace kolo::torch {
namespace {

// The kolo data type of `tensor`, which a collective can move only when it
// is defined, on the CPU and of a type kolo knows.
StatusOr<DataType> CollectiveType(const std::string& name,
                                  const ::torch::Tensor& tensor) {
  if (!tensor.defined())
    return InvalidArgument("tensor '" + name + "' is undefined");
  if (!tensor.device().is_cpu()) {
    return InvalidArgument(
        "tensor '" + name + "' is on " + tensor.device().str() +
        "; kolo moves CPU tensors (copy it with .cpu() first)");
  }
  return ToDataType(tensor.scalar_type());
}

std::vector<int64_t> Trailing(const ::torch::Tensor& tensor) {
  if (tensor.dim() <= 1) return {};
  return std::vector<int64_t>(tensor.sizes().begin() + 1, tensor.sizes().end());
}

int64_t RowElements(const ::torch::Tensor& tensor) {
  int64_t elements = 1;
  for (int64_t d : Trailing(tensor)) elements *= d;
  return elements;
}

int64_t Rows(const ::torch::Tensor& tensor) {
  return tensor.dim() == 0 ? 1 : tensor.size(0);
}

}  // namespace

StatusOr<DataType> ToDataType(c10::ScalarType type) {
  switch (type) {
    case ::torch::kFloat32: return DataType::kFloat32;
    case ::torch::kFloat64: return DataType::kFloat64;
    case ::torch::kFloat16: return DataType::kFloat16;
    case ::torch::kBFloat16: return DataType::kBFloat16;
    case ::torch::kInt8: return DataType::kInt8;
    case ::torch::kUInt8: return DataType::kUInt8;
    case ::torch::kInt32: return DataType::kInt32;
    case ::torch::kInt64: return DataType::kInt64;
    default:
      return InvalidArgument(std::string("kolo cannot move tensors of type ") +
                             c10::toString(type));
  }
}

TensorHandle::TensorHandle(Handle handle, ::torch::Tensor input,
                           ::torch::Tensor output,
                           std::vector<int64_t> trailing_shape,
                           ::torch::Tensor destination)
    : handle_(std::move(handle)),
      input_(std::move(input)),
      output_(std::move(output)),
      trailing_shape_(std::move(trailing_shape)),
      destination_(std::move(destination)) {}

StatusOr<::torch::Tensor> TensorHandle::Wait(
    std::chrono::milliseconds timeout) const {
  KOLO_RETURN_IF_ERROR(handle_.Wait(timeout));
  if (destination_.defined()) {
    ::torch::NoGradGuard no_grad;
    if (!destination_.is_same(output_)) destination_.copy_(output_);
    return destination_;
  }
  if (output_.defined()) return output_;
  // The runtime allocated the result: give it the input's row shape.
  const std::vector<char>& bytes = handle_.output();
  const int64_t element = static_cast<int64_t>(input_.element_size());
  int64_t row = 1;
  for (int64_t d : trailing_shape_) row *= d;
  const int64_t elements = static_cast<int64_t>(bytes.size()) / element;
  std::vector<int64_t> shape = {row == 0 ? 0 : elements / row};
  shape.insert(shape.end(), trailing_shape_.begin(), trailing_shape_.end());
  ::torch::Tensor result = ::torch::empty(shape, input_.options());
  if (!bytes.empty())
    std::memcpy(result.data_ptr(), bytes.data(), bytes.size());
  return result;
}

std::vector<int64_t> TensorHandle::ReceivedRows() const {
  int64_t row = 1;
  for (int64_t d : trailing_shape_) row *= d;
  std::vector<int64_t> rows;
  for (int64_t count : handle_.output_counts())
    rows.push_back(row == 0 ? 0 : count / row);
  return rows;
}

namespace {

// Checks that `output` can take the result of reducing `tensor` and
// returns the contiguous buffer the runtime writes: `output` itself when it
// is contiguous, else a scratch tensor copied into it on completion.
StatusOr<::torch::Tensor> ReductionTarget(const std::string& name,
                                          const ::torch::Tensor& tensor,
                                          const ::torch::Tensor& output) {
  if (!output.defined() || output.sizes() != tensor.sizes() ||
      output.scalar_type() != tensor.scalar_type() ||
      output.device() != tensor.device()) {
    return InvalidArgument(
        "tensor '" + name + "': the output must have the input's shape " +
        c10::str(tensor.sizes()) + ", type and device" +
        (output.defined() ? std::string(", not ") + c10::str(output.sizes()) +
                                " " + c10::toString(output.scalar_type())
                          : std::string(" (it is undefined)")));
  }
  if (output.is_contiguous()) return output;
  return ::torch::empty(tensor.sizes(), tensor.options());
}

// The handle of a collective whose output the runtime allocates, rows of
// `input`'s trailing shape.
TensorHandle RowsHandle(Handle handle, const ::torch::Tensor& input) {
  return TensorHandle(std::move(handle), input, ::torch::Tensor(),
                      Trailing(input));
}

}  // namespace

StatusOr<TensorHandle> AllreduceAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      ReduceOp op) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  ::torch::Tensor input = tensor.contiguous();
  ::torch::Tensor output = ::torch::empty_like(input);
  KOLO_ASSIGN_OR_RETURN(
      Handle handle, EnqueueAllreduce(name, input.data_ptr(), output.data_ptr(),
                                      input.numel(), type, op));
  return TensorHandle(std::move(handle), input, output, {});
}

StatusOr<TensorHandle> AllreduceAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      const ::torch::Tensor& output,
                                      ReduceOp op) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  KOLO_ASSIGN_OR_RETURN(::torch::Tensor target,
                        ReductionTarget(name, tensor, output));
  ::torch::Tensor input = tensor.contiguous();
  KOLO_ASSIGN_OR_RETURN(
      Handle handle, EnqueueAllreduce(name, input.data_ptr(), target.data_ptr(),
                                      input.numel(), type, op));
  return TensorHandle(std::move(handle), input, target, {}, output);
}

StatusOr<std::vector<TensorHandle>> GroupedAllreduceAsync(
    const std::string& group_name, const std::vector<std::string>& names,
    const std::vector<::torch::Tensor>& tensors,
    const std::vector<::torch::Tensor>& outputs, ReduceOp op) {
  if (names.size() != tensors.size() || outputs.size() != tensors.size()) {
    return InvalidArgument(
        "group '" + group_name + "': " + std::to_string(names.size()) +
        " names, " + std::to_string(tensors.size()) + " tensors and " +
        std::to_string(outputs.size()) + " outputs; they must be as many");
  }
  if (tensors.empty())
    return InvalidArgument("group '" + group_name + "' has no tensors");
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(names[0], tensors[0]));
  std::vector<AllreduceTensor> parts;
  std::vector<::torch::Tensor> inputs, targets;
  for (size_t i = 0; i < tensors.size(); ++i) {
    KOLO_ASSIGN_OR_RETURN(DataType other, CollectiveType(names[i], tensors[i]));
    if (other != type) {
      return InvalidArgument("group '" + group_name + "': tensor '" + names[i] +
                             "' is " + DataTypeName(other) +
                             ", the group's first is " + DataTypeName(type));
    }
    KOLO_ASSIGN_OR_RETURN(::torch::Tensor target,
                          ReductionTarget(names[i], tensors[i], outputs[i]));
    ::torch::Tensor input = tensors[i].contiguous();
    parts.push_back(
        {names[i], input.data_ptr(), target.data_ptr(), input.numel()});
    inputs.push_back(input);
    targets.push_back(target);
  }
  KOLO_ASSIGN_OR_RETURN(std::vector<Handle> handles,
                        EnqueueGroupedAllreduce(group_name, parts, type, op));
  std::vector<TensorHandle> result;
  for (size_t i = 0; i < handles.size(); ++i) {
    result.emplace_back(std::move(handles[i]), inputs[i], targets[i],
                        std::vector<int64_t>{}, outputs[i]);
  }
  return result;
}

StatusOr<TensorHandle> AllgatherAsync(const std::string& name,
                                      const ::torch::Tensor& tensor) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  ::torch::Tensor input = tensor.contiguous();
  KOLO_ASSIGN_OR_RETURN(Handle handle, EnqueueAllgather(name, input.data_ptr(),
                                                        input.numel(), type));
  return RowsHandle(std::move(handle), input);
}

StatusOr<TensorHandle> BroadcastAsync(const std::string& name,
                                      const ::torch::Tensor& tensor,
                                      int32_t root) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  ::torch::Tensor buffer = tensor.clone(at::MemoryFormat::Contiguous);
  KOLO_ASSIGN_OR_RETURN(
      Handle handle,
      EnqueueBroadcast(name, buffer.data_ptr(), buffer.numel(), type, root));
  return TensorHandle(std::move(handle), buffer, buffer, {});
}

StatusOr<TensorHandle> BroadcastInPlaceAsync(const std::string& name,
                                             const ::torch::Tensor& tensor,
                                             int32_t root) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  ::torch::Tensor buffer = tensor.contiguous();
  KOLO_ASSIGN_OR_RETURN(
      Handle handle,
      EnqueueBroadcast(name, buffer.data_ptr(), buffer.numel(), type, root));
  return TensorHandle(std::move(handle), buffer, buffer, {}, tensor);
}

StatusOr<TensorHandle> AlltoallAsync(const std::string& name,
                                     const ::torch::Tensor& tensor,
                                     std::vector<int64_t> splits) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  ::torch::Tensor input = tensor.contiguous();
  const int64_t rows = Rows(input);
  const int32_t size = Size();
  if (splits.empty()) {
    if (rows % size != 0) {
      return InvalidArgument("tensor '" + name + "': " + std::to_string(rows) +
                             " rows do not split evenly over " +
                             std::to_string(size) + " ranks; pass splits");
    }
    splits.assign(size, rows / size);
  }
  if (std::accumulate(splits.begin(), splits.end(), int64_t{0}) != rows) {
    return InvalidArgument("tensor '" + name + "': splits add up to " +
                           std::to_string(std::accumulate(
                               splits.begin(), splits.end(), int64_t{0})) +
                           ", not its " + std::to_string(rows) + " rows");
  }
  const int64_t row = RowElements(input);
  std::vector<int64_t> counts;
  for (int64_t s : splits) counts.push_back(s * row);
  KOLO_ASSIGN_OR_RETURN(Handle handle,
                        EnqueueAlltoall(name, input.data_ptr(), counts, type));
  return RowsHandle(std::move(handle), input);
}

StatusOr<TensorHandle> ReducescatterAsync(const std::string& name,
                                          const ::torch::Tensor& tensor,
                                          ReduceOp op) {
  KOLO_ASSIGN_OR_RETURN(DataType type, CollectiveType(name, tensor));
  ::torch::Tensor input = tensor.contiguous();
  if (Rows(input) % Size() != 0) {
    return InvalidArgument(
        "tensor '" + name + "': " + std::to_string(Rows(input)) +
        " rows do not split evenly over " + std::to_string(Size()) + " ranks");
  }
  KOLO_ASSIGN_OR_RETURN(
      Handle handle,
      EnqueueReducescatter(name, input.data_ptr(), input.numel(), type, op));
  return RowsHandle(std::move(handle), input);
}

namespace {

// The blocking form of a collective: its handle's result, or why it could
// not start.
StatusOr<::torch::Tensor> Waited(StatusOr<TensorHandle> handle) {
  KOLO_RETURN_IF_ERROR(handle.status());
  return handle->Wait();
}

}  // namespace

StatusOr<::torch::Tensor> Allreduce(const ::torch::Tensor& tensor,
                                    const std::string& name, ReduceOp op) {
  return Waited(AllreduceAsync(name, tensor, op));
}

StatusOr<::torch::Tensor> Allgather(const ::torch::Tensor& tensor,
                                    const std::string& name) {
  return Waited(AllgatherAsync(name, tensor));
}

StatusOr<::torch::Tensor> Broadcast(const ::torch::Tensor& tensor,
                                    const std::string& name, int32_t root) {
  return Waited(BroadcastAsync(name, tensor, root));
}

StatusOr<::torch::Tensor> Alltoall(const ::torch::Tensor& tensor,
                                   const std::string& name,
                                   std::vector<int64_t> splits) {
  return Waited(AlltoallAsync(name, tensor, std::move(splits)));
}

StatusOr<::torch::Tensor> Reducescatter(const ::torch::Tensor& tensor,
                                        const std::string& name, ReduceOp op) {
  return Waited(ReducescatterAsync(name, tensor, op));
}

// ------------------------------------------------------------ state broadcast

namespace {

// Broadcasts every tensor of `named` and copies root's values into it.
Status BroadcastInPlace(
    const std::vector<std::pair<std::string, ::torch::Tensor>>& named,
    int32_t root) {
  std::vector<TensorHandle> handles;
  for (const auto& [name, tensor] : named) {
    KOLO_ASSIGN_OR_RETURN(TensorHandle h,
                          BroadcastAsync(name, tensor.detach(), root));
    handles.push_back(std::move(h));
  }
  ::torch::NoGradGuard no_grad;
  for (size_t i = 0; i < handles.size(); ++i) {
    KOLO_ASSIGN_OR_RETURN(::torch::Tensor value, handles[i].Wait());
    named[i].second.copy_(value);
  }
  return Status::Ok();
}

}  // namespace

Status BroadcastParameters(::torch::nn::Module& module, int32_t root) {
  std::vector<std::pair<std::string, ::torch::Tensor>> named;
  for (const auto& item : module.named_parameters()) {
    named.emplace_back("kolo.parameter." + item.key(), item.value());
  }
  for (const auto& item : module.named_buffers()) {
    named.emplace_back("kolo.buffer." + item.key(), item.value());
  }
  return BroadcastInPlace(named, root);
}

Status BroadcastOptimizerState(::torch::optim::Optimizer& optimizer,
                               int32_t root) {
  const std::string kind = OptimizerKind(optimizer);
  if (kind.empty()) {
    return InvalidArgument(
        "BroadcastOptimizerState supports SGD, Adam and AdamW");
  }
  // The tensors each optimizer may keep per parameter (optimizer_state.h).
  const std::vector<std::string> names =
      kind == "sgd"
          ? std::vector<std::string>{"momentum_buffer"}
          : std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  const int64_t columns = static_cast<int64_t>(names.size());
  std::vector<::torch::Tensor> parameters;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) parameters.push_back(p);
  }
  // Root's census, one row per parameter: which tensors it keeps, then its
  // step count. The other ranks follow it, whatever they keep themselves.
  std::vector<ParameterState> states;
  ::torch::Tensor census = ::torch::zeros(
      {static_cast<int64_t>(parameters.size()), columns + 1}, ::torch::kInt64);
  for (size_t i = 0; i < parameters.size(); ++i) {
    states.push_back(GetParameterState(optimizer, parameters[i]));
    for (const auto& named : states.back().tensors) {
      const auto it = std::find(names.begin(), names.end(), named.first);
      if (it != names.end()) census[i][it - names.begin()] = 1;
    }
    census[i][columns] = states.back().step;
  }
  KOLO_ASSIGN_OR_RETURN(census,
                        Broadcast(census, "kolo.optimizer.census", root));

  ::torch::NoGradGuard no_grad;
  std::vector<std::pair<std::string, ::torch::Tensor>> named;
  std::vector<size_t> kept;  // parameters with state on root
  for (size_t i = 0; i < parameters.size(); ++i) {
    ParameterState wanted;
    for (int64_t c = 0; c < columns; ++c) {
      if (census[i][c].item<int64_t>() == 0) continue;
      ::torch::Tensor tensor;
      for (const auto& [name, mine] : states[i].tensors) {
        if (name == names[c]) tensor = mine;
      }
      if (!tensor.defined()) tensor = ::torch::zeros_like(parameters[i]);
      wanted.tensors.emplace_back(names[c], tensor);
      named.emplace_back("kolo.optimizer." + std::to_string(i) + "." + names[c],
                         tensor);
    }
    if (wanted.tensors.empty()) continue;
    wanted.step = census[i][columns].item<int64_t>();
    states[i] = std::move(wanted);
    kept.push_back(i);
  }
  KOLO_RETURN_IF_ERROR(BroadcastInPlace(named, root));
  for (size_t i : kept) {
    KOLO_RETURN_IF_ERROR(
        SetParameterState(optimizer, parameters[i], states[i]));
  }
  return Status::Ok();
}

StatusOr<double> AverageMetric(double value, const std::string& name) {
  ::torch::Tensor t = ::torch::full({1}, value, ::torch::kFloat64);
  KOLO_ASSIGN_OR_RETURN(::torch::Tensor mean,
                        Allreduce(t, name, ReduceOp::kAverage));
  return mean.item<double>();
}

// ------------------------------------------------------------ optimizer

struct GradientReducer::Parameter {
  std::string name;
  ::torch::Tensor tensor;
  unsigned hook = 0;        // removed with the optimizer
  int32_t passes_seen = 0;  // hook calls since the last step
  Bucket* bucket = nullptr;
  int64_t offset = 0;      // where its elements start in the bucket
  bool collected = false;  // this step's gradient is in the bucket
};

struct GradientReducer::Bucket {
  std::string name;  // the same on every rank
  std::vector<Parameter*> members;
  ::torch::Tensor gradients;  // float32, the members' gradients end to end
  int32_t collected = 0;      // members collected this step
  TensorHandle handle;        // the outstanding allreduce, if any
  bool enqueued = false;
};

GradientReducer::GradientReducer(
    const ::torch::OrderedDict<std::string, ::torch::Tensor>& named_parameters,
    DistributedOptimizerOptions options)
    : options_(options), alone_(Size() == 1) {
  for (const auto& item : named_parameters) {
    if (!item.value().requires_grad()) continue;
    auto parameter = std::make_unique<Parameter>();
    parameter->name = item.key();
    parameter->tensor = item.value();
    Parameter* raw = parameter.get();
    // The hook sees each gradient as autograd produces it, before it is
    // accumulated into .grad, and returns it unchanged.
    parameter->hook = parameter->tensor.register_hook(
        [this, raw](const ::torch::Tensor& grad) {
          OnGradient(*raw, grad);
          return grad;
        });
    parameters_.push_back(std::move(parameter));
  }
  PlanBuckets();
}

void GradientReducer::AddBucket(std::vector<Parameter*> members) {
  auto bucket = std::make_unique<Bucket>();
  int64_t elements = 0;
  for (Parameter* p : members) {
    p->bucket = bucket.get();
    p->offset = elements;
    elements += p->tensor.numel();
  }
  const std::string& first = members.front()->name;
  const std::string& last = members.back()->name;
  bucket->name = "kolo.grad." + first + (members.size() > 1 ? ".." + last : "");
  bucket->gradients =
      ::torch::zeros({elements}, members.front()->tensor.options().dtype());
  bucket->members = std::move(members);
  buckets_.push_back(std::move(bucket));
}

void GradientReducer::PlanBuckets() {
  // A bucket holds gradients of one type, which it travels in: float64
  // models keep their precision.
  auto add_by_type = [this](const std::vector<Parameter*>& members) {
    std::map<::torch::ScalarType, std::vector<Parameter*>> by_type;
    for (Parameter* p : members) by_type[p->tensor.scalar_type()].push_back(p);
    for (auto& [type, same] : by_type) AddBucket(std::move(same));
  };
  std::map<std::string, Parameter*> by_name;
  for (auto& p : parameters_) by_name[p->name] = p.get();
  std::vector<std::vector<Parameter*>> groups;
  std::set<const Parameter*> grouped;
  for (const auto& names : options_.groups) {
    std::vector<Parameter*> members;
    for (const std::string& name : names) {
      auto it = by_name.find(name);
      if (it == by_name.end() || !grouped.insert(it->second).second) {
        // No bucket at all: the hooks stay idle and Synchronize() says why.
        plan_error_ = InvalidArgument(
            "DistributedOptimizer groups: '" + name + "' is " +
            (it == by_name.end() ? "not a parameter that requires a gradient"
                                 : "in two groups"));
        return;
      }
      members.push_back(it->second);
    }
    if (!members.empty()) groups.push_back(std::move(members));
  }
  for (const auto& members : groups) add_by_type(members);
  // The rest by size, in the reverse of the parameters' order: autograd
  // produces the last layers' gradients first.
  std::vector<Parameter*> open;
  int64_t open_bytes = 0;
  for (auto it = parameters_.rbegin(); it != parameters_.rend(); ++it) {
    Parameter* p = it->get();
    if (p->bucket != nullptr) continue;
    if (!open.empty() &&
        open.front()->tensor.scalar_type() != p->tensor.scalar_type()) {
      AddBucket(std::move(open));
      open.clear();
      open_bytes = 0;
    }
    open.push_back(p);
    open_bytes += p->tensor.numel() * p->tensor.element_size();
    if (open_bytes >= options_.bucket_bytes) {
      AddBucket(std::move(open));
      open.clear();
      open_bytes = 0;
    }
  }
  if (!open.empty()) AddBucket(std::move(open));
}

GradientReducer::~GradientReducer() {
  // The parameters outlive this reducer (an elastic job builds a new one
  // for every round): their hooks must not call into it any more.
  for (auto& p : parameters_) p->tensor.remove_hook(p->hook);
  // Outstanding reductions read our buckets: let them finish.
  for (auto& b : buckets_) {
    if (b->enqueued) (void)b->handle.Wait();
  }
}

void GradientReducer::OnGradient(Parameter& parameter,
                                 const ::torch::Tensor& grad) {
  if (alone_ || !plan_error_.ok()) return;
  ++parameter.passes_seen;
  if (parameter.passes_seen < options_.backward_passes_per_step) return;
  // The last pass of a step: what .grad will hold once autograd adds this
  // pass's gradient to what the earlier passes left there.
  // kolo has no sparse reduction: sparse gradients (embeddings) travel
  // dense.
  ::torch::Tensor sum =
      grad.is_sparse() ? grad.detach().to_dense() : grad.detach();
  if (parameter.tensor.grad().defined())
    sum = sum + parameter.tensor.grad().detach();
  Status status = Collect(parameter, sum);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status.ok() && hook_error_.ok()) hook_error_ = status;
}

Status GradientReducer::Collect(Parameter& parameter,
                                const ::torch::Tensor& gradient_sum) {
  Bucket& bucket = *parameter.bucket;
  bucket.gradients.narrow(0, parameter.offset, parameter.tensor.numel())
      .copy_(gradient_sum.reshape({-1}));
  parameter.collected = true;
  if (++bucket.collected < static_cast<int32_t>(bucket.members.size()))
    return Status::Ok();
  return Enqueue(bucket);
}

Status GradientReducer::Enqueue(Bucket& bucket) {
  ::torch::Tensor wire = bucket.gradients;
  const double passes = options_.backward_passes_per_step;
  if (passes > 1 && options_.average_backward_passes) wire.div_(passes);
  ReduceOp op = options_.op;
  if (op == ReduceOp::kAverage && options_.gradient_predivide_factor != 1.0) {
    wire.div_(options_.gradient_predivide_factor);
    op = ReduceOp::kSum;
  }
  if (wire.is_floating_point() && options_.compression == Compression::kFloat16)
    wire = wire.to(::torch::kFloat16);
  if (wire.is_floating_point() &&
      options_.compression == Compression::kBFloat16) {
    wire = wire.to(::torch::kBFloat16);
  }
  KOLO_ASSIGN_OR_RETURN(bucket.handle, AllreduceAsync(bucket.name, wire, op));
  bucket.enqueued = true;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (first_enqueue_ == std::chrono::steady_clock::time_point() ||
      first_enqueue_ > now) {
    first_enqueue_ = now;
  }
  last_enqueue_ = now;
  return Status::Ok();
}

const OptimizerMetrics& GetOptimizerMetrics() {
  static const OptimizerMetrics* const series = new OptimizerMetrics{
      metrics::GetCounter("kolo_optimizer_steps_total",
                          "Steps of a DistributedOptimizer or ZeroOptimizer.")
          .value_or(metrics::Counter()),
      metrics::GetCounter(
          "kolo_optimizer_skipped_steps_total",
          "Steps skipped because the float16 gradients overflowed.")
          .value_or(metrics::Counter()),
      metrics::GetHistogram(
          "kolo_optimizer_gradient_wait_seconds",
          "Time one optimizer step waited for its gradient reductions.",
          metrics::SecondsBuckets())
          .value_or(metrics::Histogram())};
  return *series;
}

Status GradientReducer::Synchronize() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!hook_error_.ok()) {
      Status error = hook_error_;
      hook_error_ = Status::Ok();
      return error;
    }
  }
  KOLO_RETURN_IF_ERROR(plan_error_);
  if (alone_) {
    AverageLocalPasses();
    return Status::Ok();
  }
  ::torch::NoGradGuard no_grad;
  // Parameters whose hook did not fire (an unused branch on this rank) are
  // collected now, so every rank enqueues every bucket every step.
  for (auto& p : parameters_) {
    if (p->collected) continue;
    ::torch::Tensor grad = p->tensor.grad().defined()
                               ? p->tensor.grad().detach()
                               : ::torch::zeros_like(p->tensor).detach();
    if (grad.is_sparse()) grad = grad.to_dense();
    // Only the last pass was missing: .grad holds the k-pass sum already.
    KOLO_RETURN_IF_ERROR(Collect(*p, grad));
  }
  const double post_scale = options_.op == ReduceOp::kAverage &&
                                    options_.gradient_predivide_factor != 1.0
                                ? options_.gradient_predivide_factor / Size()
                                : 1.0;
  Status first_error;
  const double waited_before = wait_seconds_;
  for (auto& b : buckets_) {
    Status status = Unpack(*b, post_scale);
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  GetOptimizerMetrics().gradient_wait.Observe(wait_seconds_ - waited_before);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first_enqueue_ = last_enqueue_ = std::chrono::steady_clock::time_point();
  }
  return first_error;
}

Status GradientReducer::Unpack(Bucket& bucket, double post_scale) {
  const auto wait_start = std::chrono::steady_clock::now();
  StatusOr<::torch::Tensor> reduced = bucket.handle.Wait();
  wait_seconds_ += std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - wait_start)
                       .count();
  bucket.enqueued = false;
  bucket.collected = 0;
  for (Parameter* p : bucket.members) {
    p->collected = false;
    p->passes_seen = 0;
    if (!reduced.ok()) continue;
    ::torch::Tensor g = reduced->narrow(0, p->offset, p->tensor.numel())
                            .view_as(p->tensor)
                            .to(p->tensor.scalar_type());
    if (post_scale != 1.0) g = g.mul(post_scale);
    if (p->tensor.grad().defined() && !p->tensor.grad().is_sparse()) {
      p->tensor.mutable_grad().copy_(g);
    } else {
      p->tensor.mutable_grad() = g.clone();
    }
  }
  return reduced.status();
}

void GradientReducer::AverageLocalPasses() {
  // The average over one rank is the gradient itself; only the passes
  // are averaged, as the reduction would.
  if (options_.backward_passes_per_step <= 1 ||
      !options_.average_backward_passes) {
    return;
  }
  ::torch::NoGradGuard no_grad;
  for (auto& p : parameters_) {
    if (p->tensor.grad().defined()) {
      p->tensor.mutable_grad().div_(options_.backward_passes_per_step);
    }
  }
}

int64_t GradientReducer::bucket_bytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_)
    bytes += static_cast<int64_t>(b->gradients.nbytes());
  return bytes;
}

std::pair<std::chrono::steady_clock::time_point,
          std::chrono::steady_clock::time_point>
GradientReducer::last_enqueue_window() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {first_enqueue_, last_enqueue_};
}

DistributedOptimizer::DistributedOptimizer(
    ::torch::optim::Optimizer& optimizer,
    const ::torch::OrderedDict<std::string, ::torch::Tensor>& named_parameters,
    DistributedOptimizerOptions options)
    : optimizer_(optimizer),
      backward_passes_per_step_(options.backward_passes_per_step),
      reducer_(named_parameters, options) {}

Status DistributedOptimizer::Step() {
  if (++passes_ < backward_passes_per_step_) return Status::Ok();
  GetOptimizerMetrics().steps.Increment();
  passes_ = 0;
  KOLO_RETURN_IF_ERROR(reducer_.Synchronize());
  optimizer_.step();
  return Status::Ok();
}

void DistributedOptimizer::ZeroGrad() { optimizer_.zero_grad(); }

}  // namespace kolo::torch
