#include "torch/distributed/optimizer_state.h"

#include <memory>

#include "torch/compat.h"

namespace kolo::torch {
namespace {

// Adam and AdamW keep the same state under two types.
template <typename State>
ParameterState AdamLikeState(const State& state) {
  ParameterState out;
  out.tensors.emplace_back("exp_avg", state.exp_avg());
  out.tensors.emplace_back("exp_avg_sq", state.exp_avg_sq());
  if (state.max_exp_avg_sq().defined())
    out.tensors.emplace_back("max_exp_avg_sq", state.max_exp_avg_sq());
  out.step = state.step();
  return out;
}

template <typename State>
Status SetAdamLikeState(
    std::unique_ptr<::torch::optim::OptimizerParamState>* slot,
    const ParameterState& state) {
  auto fresh = std::make_unique<State>();
  for (const auto& [name, tensor] : state.tensors) {
    if (name == "exp_avg") {
      fresh->exp_avg(tensor);
    } else if (name == "exp_avg_sq") {
      fresh->exp_avg_sq(tensor);
    } else if (name == "max_exp_avg_sq") {
      fresh->max_exp_avg_sq(tensor);
    } else {
      return InvalidArgument("optimizer state '" + name +
                             "' is not kept by Adam or AdamW");
    }
  }
  fresh->step(state.step);
  *slot = std::move(fresh);
  return Status::Ok();
}

}  // namespace

std::string OptimizerKind(const ::torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const ::torch::optim::SGD*>(&optimizer) != nullptr)
    return "sgd";
  if (dynamic_cast<const ::torch::optim::AdamW*>(&optimizer) != nullptr)
    return "adamw";
  if (dynamic_cast<const ::torch::optim::Adam*>(&optimizer) != nullptr)
    return "adam";
  return "";
}

ParameterState GetParameterState(::torch::optim::Optimizer& optimizer,
                                 const ::torch::Tensor& parameter) {
  auto& all = optimizer.state();
  auto it = all.find(compat::StateKeyOf(parameter));
  if (it == all.end()) return {};
  const std::string kind = OptimizerKind(optimizer);
  if (kind == "sgd") {
    const auto& state =
        static_cast<const ::torch::optim::SGDParamState&>(*it->second);
    ParameterState out;
    if (state.momentum_buffer().defined())
      out.tensors.emplace_back("momentum_buffer", state.momentum_buffer());
    return out;
  }
  if (kind == "adam") {
    return AdamLikeState(
        static_cast<const ::torch::optim::AdamParamState&>(*it->second));
  }
  if (kind == "adamw") {
    return AdamLikeState(
        static_cast<const ::torch::optim::AdamWParamState&>(*it->second));
  }
  return {};
}

Status SetParameterState(::torch::optim::Optimizer& optimizer,
                         const ::torch::Tensor& parameter,
                         const ParameterState& state) {
  for (const auto& [name, tensor] : state.tensors) {
    if (!tensor.sizes().equals(parameter.sizes())) {
      return InvalidArgument("optimizer state '" + name + "' has " +
                             std::to_string(tensor.numel()) +
                             " elements; its parameter has " +
                             std::to_string(parameter.numel()));
    }
  }
  auto& slot = optimizer.state()[compat::StateKeyOf(parameter)];
  const std::string kind = OptimizerKind(optimizer);
  if (kind == "sgd") {
    auto fresh = std::make_unique<::torch::optim::SGDParamState>();
    for (const auto& [name, tensor] : state.tensors) {
      if (name != "momentum_buffer") {
        return InvalidArgument("optimizer state '" + name +
                               "' is not kept by SGD");
      }
      fresh->momentum_buffer(tensor);
    }
    slot = std::move(fresh);
    return Status::Ok();
  }
  if (kind == "adam")
    return SetAdamLikeState<::torch::optim::AdamParamState>(&slot, state);
  if (kind == "adamw")
    return SetAdamLikeState<::torch::optim::AdamWParamState>(&slot, state);
  return InvalidArgument("kolo keeps the state of SGD, Adam and AdamW only");
}

int64_t OptimizerStateBytes(::torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (auto& group : optimizer.param_groups()) {
    for (const ::torch::Tensor& p : group.params()) {
      for (const auto& named : GetParameterState(optimizer, p).tensors)
        bytes += static_cast<int64_t>(named.second.nbytes());
    }
  }
  return bytes;
}

void SetOptimizerMomentum(::torch::optim::Optimizer& optimizer,
                          double momentum) {
  for (auto& group : optimizer.param_groups()) {
    auto& options = group.options();
    if (auto* sgd = dynamic_cast<::torch::optim::SGDOptions*>(&options)) {
      sgd->momentum(momentum);
    } else if (auto* adam =
                   dynamic_cast<::torch::optim::AdamOptions*>(&options)) {
      adam->betas({momentum, std::get<1>(adam->betas())});
    } else if (auto* adamw =
                   dynamic_cast<::torch::optim::AdamWOptions*>(&options)) {
      adamw->betas({momentum, std::get<1>(adamw->betas())});
    }
  }
}

}  // namespace kolo::torch
