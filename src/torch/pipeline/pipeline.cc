// Pipeline: runs a PipelinePlan on this rank's stage, moving activations and
// gradients with kolo's point-to-point transfers (kolo/torch_pipeline.h
// explains the layout, the step and the wire).
#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/point_to_point.h"
#include "kolo/torch.h"
#include "kolo/torch_pipeline.h"

namespace kolo::torch {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = PipelineActionKind;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

StatusOr<c10::ScalarType> ToScalarType(int64_t type) {
  switch (static_cast<DataType>(type)) {
    case DataType::kFloat32: return ::torch::kFloat32;
    case DataType::kFloat64: return ::torch::kFloat64;
    case DataType::kFloat16: return ::torch::kFloat16;
    case DataType::kBFloat16: return ::torch::kBFloat16;
    case DataType::kInt8: return ::torch::kInt8;
    case DataType::kUInt8: return ::torch::kUInt8;
    case DataType::kInt32: return ::torch::kInt32;
    case DataType::kInt64: return ::torch::kInt64;
  }
  return InvalidArgument("pipeline message header names data type " +
                         std::to_string(type) + ", which kolo does not know");
}

std::string Shape(const ::torch::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    out += (d ? ", " : "") + std::to_string(t.size(d));
  }
  return out + "]";
}

// Row counts of the micro-batches of a batch of `rows`: as equal as they
// can be, the larger ones first.
StatusOr<std::vector<int64_t>> MicroBatchRows(int64_t rows, int32_t parts,
                                              const char* what) {
  if (rows < parts) {
    return InvalidArgument(std::string("pipeline ") + what + " has " +
                           std::to_string(rows) + " rows, fewer than its " +
                           std::to_string(parts) + " micro-batches");
  }
  std::vector<int64_t> sizes(parts, rows / parts);
  for (int64_t i = 0; i < rows % parts; ++i) ++sizes[i];
  return sizes;
}

// The tags of micro-batch `mb`'s messages, and the loss's.
enum Slot { kActivationHeader = 0, kActivation, kGradientHeader, kGradient };

// The options Create needs before it builds anything: whole replicas of
// the pipeline in the world, and tags for every micro-batch's messages.
Status CheckOptions(const PipelineOptions& options, int32_t size) {
  const int32_t stages = options.stages;
  if (stages < 1 || size % stages != 0) {
    return InvalidArgument("pipeline of " + std::to_string(stages) +
                           " stages does not divide the world of " +
                           std::to_string(size) + " ranks");
  }
  if (options.micro_batches < 1 || options.tag_base < 0 ||
      options.tag_base >= kMaxTag - 4 * options.micro_batches - 8) {
    return InvalidArgument(
        "pipeline micro_batches " + std::to_string(options.micro_batches) +
        " with tag_base " + std::to_string(options.tag_base) +
        ": needs micro_batches >= 1 and tags below kMaxTag");
  }
  return Status::Ok();
}

// A split the caller gave must cut all `layers` into `stages` non-empty
// stages.
Status CheckSplit(const std::vector<int64_t>& split, int32_t stages,
                  int64_t layers) {
  int64_t sum = 0;
  bool positive = true;
  for (int64_t n : split) {
    sum += n;
    positive = positive && n > 0;
  }
  if (static_cast<int32_t>(split.size()) != stages || sum != layers ||
      !positive) {
    return InvalidArgument("pipeline split of " + std::to_string(split.size()) +
                           " stages adding up to " + std::to_string(sum) +
                           " layers does not cut " + std::to_string(layers) +
                           " layers into " + std::to_string(stages) +
                           " non-empty stages");
  }
  return Status::Ok();
}

// Balance::kParameters: a layer costs its parameters' elements.
std::vector<double> ParameterCosts(::torch::nn::Sequential model) {
  const int64_t layers = static_cast<int64_t>(model->size());
  std::vector<double> costs(layers, 0.0);
  for (int64_t i = 0; i < layers; ++i) {
    for (const ::torch::Tensor& p : model[i]->parameters()) {
      costs[i] += static_cast<double>(p.numel());
    }
  }
  return costs;
}

// Balance::kTime: a layer costs the seconds its forward takes on what the
// layers before it make of `sample_input`, averaged over the ranks.
StatusOr<std::vector<double>> TimeCosts(::torch::nn::Sequential model,
                                        const ::torch::Tensor& sample_input,
                                        int32_t size) {
  if (!sample_input.defined()) {
    return InvalidArgument(
        "pipeline balance by time needs a sample micro-batch "
        "(sample_input) on every rank");
  }
  const int64_t layers = static_cast<int64_t>(model->size());
  std::vector<double> costs(layers, 0.0);
  try {
    ::torch::NoGradGuard no_grad;
    // One pass to warm up allocators, then the best of three per layer.
    ::torch::Tensor x = model->forward(sample_input);
    x = sample_input;
    for (int64_t i = 0; i < layers; ++i) {
      double best = 1e30;
      ::torch::Tensor y;
      for (int rep = 0; rep < 3; ++rep) {
        const Clock::time_point start = Clock::now();
        y = (model->begin() + i)->forward(x);
        best = std::min(best, SecondsSince(start));
      }
      costs[i] = best;
      x = y;
    }
  } catch (const std::exception& e) {
    return InvalidArgument("pipeline balance by time: the sample input " +
                           Shape(sample_input) +
                           " does not run through the model: " + e.what());
  }
  // Ranks time differently; averaged, every rank cuts the same way.
  if (size > 1) {
    KOLO_RETURN_IF_ERROR(kolo::Allreduce(costs.data(), costs.data(), layers,
                                         DataType::kFloat64, ReduceOp::kAverage)
                             .WithContext("pipeline balance by time"));
  }
  return costs;
}

// The layers per stage: the caller's split, checked, or one balanced by
// the options' cost measure.
StatusOr<std::vector<int64_t>> StageSplit(::torch::nn::Sequential model,
                                          const PipelineOptions& options,
                                          const ::torch::Tensor& sample_input,
                                          int32_t size) {
  const int64_t layers = static_cast<int64_t>(model->size());
  if (!options.split.empty()) {
    KOLO_RETURN_IF_ERROR(CheckSplit(options.split, options.stages, layers));
    return options.split;
  }
  std::vector<double> costs;
  if (options.balance == PipelineOptions::Balance::kParameters) {
    costs = ParameterCosts(model);
  } else {
    KOLO_ASSIGN_OR_RETURN(costs, TimeCosts(model, sample_input, size));
  }
  return BalanceStages(costs, options.stages);
}

// The group of `stage`'s replicas. Collective: every rank creates every
// stage's group, in stage order.
StatusOr<std::shared_ptr<ProcessGroup>> NewStageGroup(int32_t stages,
                                                      int32_t replicas,
                                                      int32_t stage) {
  std::shared_ptr<ProcessGroup> mine;
  for (int32_t s = 0; s < stages; ++s) {
    std::vector<int32_t> members;
    for (int32_t q = 0; q < replicas; ++q) members.push_back(q * stages + s);
    KOLO_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> group,
                          NewGroup(members));
    if (s == stage) mine = std::move(group);
  }
  return mine;
}

// Gives every replica of `stage` replica 0's parameters and buffers.
Status BroadcastFromFirstReplica(::torch::nn::Sequential module,
                                 ProcessGroup& group, int32_t stage) {
  ::torch::NoGradGuard no_grad;
  std::vector<::torch::Tensor> tensors = module->parameters();
  for (const ::torch::Tensor& b : module->buffers()) tensors.push_back(b);
  for (::torch::Tensor& t : tensors) {
    KOLO_ASSIGN_OR_RETURN(DataType type, ToDataType(t.scalar_type()));
    ::torch::Tensor c = t.contiguous();
    KOLO_RETURN_IF_ERROR(
        group.Broadcast(c.data_ptr(), c.numel(), type, 0)
            .WithContext("pipeline stage " + std::to_string(stage) +
                         ": broadcasting a parameter of shape " + Shape(t) +
                         " from replica 0"));
    if (!c.is_same(t)) t.copy_(c);
  }
  return Status::Ok();
}

}  // namespace

double PipelineStatistics::BubbleFraction() const {
  const double total = total_busy_seconds + total_idle_seconds;
  return total > 0 ? total_idle_seconds / total : 0.0;
}

// One TrainStep's or Forward's state: per micro-batch what this stage took
// in, what it produced, and the gradient it owes its predecessor; the sends
// still in flight (with the buffers they read); and the step's counters.
struct Pipeline::Step {
  bool train = true;
  int32_t micro_batches = 0;
  const PipelineLossFn* loss_fn = nullptr;
  std::vector<::torch::Tensor> inputs;     // the first stage's micro-batches
  std::vector<::torch::Tensor> targets;    // the last stage's
  int64_t batch_rows = 0;                  // the last stage's whole batch
  std::vector<::torch::Tensor> stage_in;   // what Forward(mb) read
  std::vector<::torch::Tensor> stage_out;  // its output, or its loss
  std::vector<::torch::Tensor> grad_in;    // from the next stage
  std::vector<::torch::Tensor> grad_out;   // for the previous stage
  std::vector<::torch::Tensor> outputs;    // Forward(): the last stage's
  double loss = 0;
  struct Pending {
    Request request;
    std::shared_ptr<std::vector<int64_t>> header;
    ::torch::Tensor data;
    std::string what;
  };
  std::deque<Pending> sends;
  int32_t held = 0;
  int32_t peak = 0;
  double busy = 0;
  double idle = 0;
};

Pipeline::Pipeline(PipelineOptions options, PipelinePlan plan)
    : options_(std::move(options)), plan_(std::move(plan)) {}

Pipeline::~Pipeline() = default;

StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    ::torch::nn::Sequential model, const PipelineOptions& options,
    const ::torch::Tensor& sample_input) {
  const int32_t size = kolo::Size();
  const int32_t rank = kolo::Rank();
  const int32_t stages = options.stages;
  KOLO_RETURN_IF_ERROR(CheckOptions(options, size));
  KOLO_ASSIGN_OR_RETURN(
      PipelinePlan plan,
      BuildPipelinePlan(options.schedule, stages, options.micro_batches));
  KOLO_RETURN_IF_ERROR(CheckPipelinePlan(plan));
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> split,
                        StageSplit(model, options, sample_input, size));

  std::unique_ptr<Pipeline> pipeline(new Pipeline(options, std::move(plan)));
  Pipeline& p = *pipeline;
  p.rank_ = rank;
  p.stage_ = rank % stages;
  p.replica_ = rank / stages;
  p.replicas_ = size / stages;
  p.split_ = split;
  int64_t begin = 0;
  for (int32_t s = 0; s < p.stage_; ++s) begin += split[s];
  p.layers_ = {begin, begin + split[p.stage_]};
  for (int64_t i = p.layers_.first; i < p.layers_.second; ++i) {
    // AnyModule copies share the module: the stage trains the caller's
    // layers, under their original names.
    p.stage_module_->push_back(std::to_string(i), *(model->begin() + i));
  }

  if (p.replicas_ > 1) {
    KOLO_ASSIGN_OR_RETURN(p.stage_group_,
                          NewStageGroup(stages, p.replicas_, p.stage_));
    if (options.broadcast_parameters) {
      KOLO_RETURN_IF_ERROR(BroadcastFromFirstReplica(
          p.stage_module_, *p.stage_group_, p.stage_));
    }
  }
  return pipeline;
}

std::vector<::torch::Tensor> Pipeline::parameters() const {
  return stage_module_->parameters();
}

::torch::OrderedDict<std::string, ::torch::Tensor> Pipeline::named_parameters()
    const {
  return stage_module_->named_parameters();
}

Status Pipeline::SendTensor(Step& step, const ::torch::Tensor& tensor,
                            int32_t peer, int32_t tag) {
  KOLO_ASSIGN_OR_RETURN(DataType type, ToDataType(tensor.scalar_type()));
  if (tensor.dim() > kPipelineMaxDims) {
    return InvalidArgument("pipeline stage " + std::to_string(stage_) +
                           " cannot send a tensor of shape " + Shape(tensor) +
                           ": more than " + std::to_string(kPipelineMaxDims) +
                           " dimensions");
  }
  auto header =
      std::make_shared<std::vector<int64_t>>(kPipelineHeaderLength, 0);
  (*header)[0] = static_cast<int64_t>(type);
  (*header)[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) (*header)[2 + d] = tensor.size(d);
  ::torch::Tensor data = tensor.detach().contiguous();
  const std::string what = "to rank " + std::to_string(peer) + " with tag " +
                           std::to_string(tag) + " (shape " + Shape(tensor) +
                           ")";
  KOLO_ASSIGN_OR_RETURN(Request h,
                        kolo::Isend(header->data(), kPipelineHeaderLength,
                                    DataType::kInt64, peer, tag));
  step.sends.push_back({h, header, {}, "header " + what});
  if (data.numel() > 0) {
    KOLO_ASSIGN_OR_RETURN(Request r, kolo::Isend(data.data_ptr(), data.numel(),
                                                 type, peer, tag + 1));
    step.sends.push_back({r, nullptr, data, "tensor " + what});
  }
  return Status::Ok();
}

StatusOr<::torch::Tensor> Pipeline::RecvTensor(Step& step, int32_t peer,
                                               int32_t tag) {
  std::vector<int64_t> header(kPipelineHeaderLength, 0);
  const Clock::time_point start = Clock::now();
  const std::string what = "pipeline stage " + std::to_string(stage_) +
                           " receiving from rank " + std::to_string(peer) +
                           " with tag " + std::to_string(tag);
  KOLO_RETURN_IF_ERROR(kolo::Recv(header.data(), kPipelineHeaderLength,
                                  DataType::kInt64, peer, tag)
                           .WithContext(what));
  KOLO_ASSIGN_OR_RETURN(c10::ScalarType type, ToScalarType(header[0]));
  if (header[1] < 0 || header[1] > kPipelineMaxDims) {
    return InvalidArgument(what + ": header names " +
                           std::to_string(header[1]) + " dimensions");
  }
  std::vector<int64_t> shape(header.begin() + 2,
                             header.begin() + 2 + header[1]);
  ::torch::Tensor tensor = ::torch::empty(shape, ::torch::dtype(type));
  if (tensor.numel() > 0) {
    KOLO_RETURN_IF_ERROR(kolo::Recv(tensor.data_ptr(), tensor.numel(),
                                    static_cast<DataType>(header[0]), peer,
                                    tag + 1)
                             .WithContext(what));
  }
  step.idle += SecondsSince(start);
  return tensor;
}

Status Pipeline::BeginStep(Step& step, const ::torch::Tensor& input,
                           const char* caller) {
  const int32_t m = options_.micro_batches;
  step.micro_batches = m;
  if (is_first_stage()) {
    if (!input.defined()) {
      return InvalidArgument(std::string("pipeline ") + caller +
                             ": the first stage (rank " +
                             std::to_string(rank_) + ") has no input");
    }
    KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> rows,
                          MicroBatchRows(input.size(0), m, "input"));
    step.inputs = input.split_with_sizes(rows, 0);
  }
  step.stage_in.resize(m);
  step.stage_out.resize(m);
  step.outputs.resize(m);
  return Status::Ok();
}

Status Pipeline::RunAction(Step& step, const PipelineAction& action) {
  const int32_t mb = action.micro_batch;
  const int32_t tag = options_.tag_base + 4 * mb;
  const std::string where = "pipeline stage " + std::to_string(stage_) +
                            " (rank " + std::to_string(rank_) + ") " +
                            PipelineActionName(action);
  try {
    switch (action.kind) {
      case Kind::kRecvActivation: {
        KOLO_ASSIGN_OR_RETURN(
            ::torch::Tensor x,
            RecvTensor(step, rank_ - 1, tag + kActivationHeader));
        if (step.train && x.is_floating_point()) x.requires_grad_(true);
        step.stage_in[mb] = x;
        return Status::Ok();
      }
      case Kind::kForward: return ForwardMicroBatch(step, mb, where);
      case Kind::kSendActivation: {
        const Clock::time_point start = Clock::now();
        Status s = SendTensor(step, step.stage_out[mb], rank_ + 1,
                              tag + kActivationHeader);
        if (!step.train) step.stage_out[mb] = ::torch::Tensor();
        step.idle += SecondsSince(start);
        return s.WithContext(where);
      }
      case Kind::kRecvGradient: {
        KOLO_ASSIGN_OR_RETURN(
            ::torch::Tensor g,
            RecvTensor(step, rank_ + 1, tag + kGradientHeader));
        return CheckGradient(step, mb, g, where);
      }
      case Kind::kBackward: BackwardMicroBatch(step, mb); return Status::Ok();
      case Kind::kSendGradient: {
        const Clock::time_point start = Clock::now();
        Status s = SendTensor(step, step.grad_out[mb], rank_ - 1,
                              tag + kGradientHeader);
        step.grad_out[mb] = ::torch::Tensor();
        step.idle += SecondsSince(start);
        return s.WithContext(where);
      }
    }
  } catch (const std::exception& e) {
    return InvalidArgument(where + ": " + e.what());
  }
  return Internal(where + ": unknown action");
}

Status Pipeline::ForwardMicroBatch(Step& step, int32_t mb,
                                   const std::string& where) {
  const Clock::time_point start = Clock::now();
  ::torch::Tensor x = is_first_stage() ? step.inputs[mb] : step.stage_in[mb];
  ::torch::Tensor y = stage_module_->forward(x);
  if (is_last_stage() && step.train) {
    const ::torch::Tensor& target = step.targets[mb];
    if (y.size(0) != target.size(0)) {
      return InvalidArgument(where + ": the output " + Shape(y) +
                             " and the target " + Shape(target) +
                             " differ in rows (the first stage's "
                             "input and the last stage's target must "
                             "have equal batches)");
    }
    // The micro-batch's mean loss, weighted by its share of the batch:
    // the weighted losses add up to the batch's mean loss.
    y = (*step.loss_fn)(y, target) *
        (static_cast<double>(target.size(0)) / step.batch_rows);
    step.loss += y.item<double>();
  } else if (is_last_stage()) {
    step.outputs[mb] = y;
  }
  step.stage_out[mb] = y;
  step.peak = std::max(step.peak, ++step.held);
  step.busy += SecondsSince(start);
  return Status::Ok();
}

Status Pipeline::CheckGradient(Step& step, int32_t mb, const ::torch::Tensor& g,
                               const std::string& where) {
  if (!g.sizes().equals(step.stage_out[mb].sizes())) {
    return InvalidArgument(where + ": gradient of shape " + Shape(g) +
                           " for an activation of shape " +
                           Shape(step.stage_out[mb]));
  }
  step.grad_in[mb] = g;
  return Status::Ok();
}

void Pipeline::BackwardMicroBatch(Step& step, int32_t mb) {
  const Clock::time_point start = Clock::now();
  ::torch::Tensor& y = step.stage_out[mb];
  if (y.requires_grad()) {
    if (is_last_stage()) {
      y.backward();
    } else {
      y.backward(step.grad_in[mb].to(y.scalar_type()));
    }
  }
  if (!is_first_stage()) {
    ::torch::Tensor& x = step.stage_in[mb];
    step.grad_out[mb] = x.grad().defined() ? x.grad() : ::torch::zeros_like(x);
  }
  // The micro-batch's activations are released here.
  y = ::torch::Tensor();
  step.stage_in[mb] = ::torch::Tensor();
  step.grad_in[mb] = ::torch::Tensor();
  --step.held;
  step.busy += SecondsSince(start);
}

Status Pipeline::FinishSends(Step& step, Status status,
                             const std::string& context) {
  const Clock::time_point start = Clock::now();
  for (Step::Pending& p : step.sends) {
    Status s = p.request.Wait();
    if (status.ok() && !s.ok()) {
      status = s.WithContext(context + ": sending " + p.what);
    }
  }
  step.idle += SecondsSince(start);
  return status;
}

Status Pipeline::AverageGradients(Step& step) {
  // One allreduce per data type over the stage's gradients laid end to end.
  const Clock::time_point start = Clock::now();
  std::vector<::torch::Tensor> params = stage_module_->parameters();
  for (::torch::Tensor& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = ::torch::zeros_like(p);
  }
  std::vector<bool> done(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    if (done[i]) continue;
    const c10::ScalarType type = params[i].grad().scalar_type();
    std::vector<::torch::Tensor> grads;
    for (size_t j = i; j < params.size(); ++j) {
      if (!done[j] && params[j].grad().scalar_type() == type) {
        grads.push_back(params[j].grad());
        done[j] = true;
      }
    }
    KOLO_ASSIGN_OR_RETURN(DataType kolo_type, ToDataType(type));
    std::vector<::torch::Tensor> flat;
    for (const ::torch::Tensor& g : grads) flat.push_back(g.reshape({-1}));
    ::torch::Tensor buffer = ::torch::cat(flat);
    KOLO_RETURN_IF_ERROR(
        stage_group_
            ->Allreduce(buffer.data_ptr(), buffer.data_ptr(), buffer.numel(),
                        kolo_type, ReduceOp::kAverage)
            .WithContext("pipeline stage " + std::to_string(stage_) +
                         ": averaging " + std::to_string(buffer.numel()) +
                         " gradient elements across " +
                         std::to_string(replicas_) + " replicas"));
    int64_t offset = 0;
    for (::torch::Tensor& g : grads) {
      g.copy_(buffer.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
  step.idle += SecondsSince(start);
  return Status::Ok();
}

StatusOr<double> Pipeline::ShareLoss(Step& step, double loss) {
  const Clock::time_point start = Clock::now();
  const int32_t last = rank_ - stage_ + options_.stages - 1;
  const int32_t tag = options_.tag_base + 4 * options_.micro_batches;
  if (is_last_stage()) {
    if (stage_group_ != nullptr) {
      KOLO_RETURN_IF_ERROR(
          stage_group_
              ->Allreduce(&loss, &loss, 1, DataType::kFloat64,
                          ReduceOp::kAverage)
              .WithContext("pipeline: averaging the loss across replicas"));
    }
    std::vector<Request> sends;
    for (int32_t r = rank_ - stage_; r < last; ++r) {
      KOLO_ASSIGN_OR_RETURN(Request s,
                            kolo::Isend(&loss, 1, DataType::kFloat64, r, tag));
      sends.push_back(s);
    }
    for (const Request& s : sends) {
      KOLO_RETURN_IF_ERROR(s.Wait().WithContext(
          "pipeline: sending the loss from the last stage"));
    }
  } else {
    KOLO_RETURN_IF_ERROR(kolo::Recv(&loss, 1, DataType::kFloat64, last, tag)
                             .WithContext("pipeline stage " +
                                          std::to_string(stage_) +
                                          ": receiving the loss from rank " +
                                          std::to_string(last)));
  }
  step.idle += SecondsSince(start);
  return loss;
}

StatusOr<double> Pipeline::TrainStep(const ::torch::Tensor& input,
                                     const ::torch::Tensor& target,
                                     const PipelineLossFn& loss_fn) {
  const int32_t m = options_.micro_batches;
  Step step;
  step.loss_fn = &loss_fn;
  KOLO_RETURN_IF_ERROR(BeginStep(step, input, "TrainStep"));
  if (is_last_stage()) {
    if (!target.defined() || !loss_fn) {
      return InvalidArgument("pipeline TrainStep: the last stage (rank " +
                             std::to_string(rank_) +
                             ") has no target or no loss function");
    }
    KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> rows,
                          MicroBatchRows(target.size(0), m, "target"));
    step.targets = target.split_with_sizes(rows, 0);
    step.batch_rows = target.size(0);
  }
  step.grad_in.resize(m);
  step.grad_out.resize(m);
  Status status;
  for (const PipelineAction& action : plan_.actions[stage_]) {
    status = RunAction(step, action);
    if (!status.ok()) break;
  }
  KOLO_RETURN_IF_ERROR(FinishSends(step, std::move(status),
                                   "pipeline stage " + std::to_string(stage_)));
  if (stage_group_ != nullptr) KOLO_RETURN_IF_ERROR(AverageGradients(step));
  KOLO_ASSIGN_OR_RETURN(double loss, ShareLoss(step, step.loss));

  statistics_.steps += 1;
  statistics_.peak_activations = step.peak;
  statistics_.busy_seconds = step.busy;
  statistics_.idle_seconds = step.idle;
  statistics_.max_peak_activations =
      std::max(statistics_.max_peak_activations, step.peak);
  statistics_.total_busy_seconds += step.busy;
  statistics_.total_idle_seconds += step.idle;
  return loss;
}

StatusOr<::torch::Tensor> Pipeline::Forward(const ::torch::Tensor& input) {
  const int32_t m = options_.micro_batches;
  Step step;
  step.train = false;
  KOLO_RETURN_IF_ERROR(BeginStep(step, input, "Forward"));
  ::torch::NoGradGuard no_grad;
  Status status;
  for (int32_t mb = 0; mb < m && status.ok(); ++mb) {
    for (Kind kind :
         {Kind::kRecvActivation, Kind::kForward, Kind::kSendActivation}) {
      if ((kind == Kind::kRecvActivation && is_first_stage()) ||
          (kind == Kind::kSendActivation && is_last_stage())) {
        continue;
      }
      status = RunAction(step, {kind, mb});
      if (!status.ok()) break;
    }
  }
  KOLO_RETURN_IF_ERROR(
      FinishSends(step, std::move(status),
                  "pipeline Forward, stage " + std::to_string(stage_)));
  if (!is_last_stage()) return ::torch::Tensor();
  return ::torch::cat(step.outputs, 0);
}

}  // namespace kolo::torch
