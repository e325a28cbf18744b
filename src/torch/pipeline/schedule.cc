// Pipeline plans: building GPipe and 1F1B action lists, checking that a set
// of lists can run to the end, and balancing layers across stages.
#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "kolo/torch_pipeline.h"

namespace kolo::torch {
namespace {

using Kind = PipelineActionKind;

// The actions of one micro-batch's forward or backward at `stage`, with the
// transfers that exist there.
void AppendForward(int32_t stage, int32_t stages, int32_t micro_batch,
                   std::vector<PipelineAction>& out) {
  if (stage > 0) out.push_back({Kind::kRecvActivation, micro_batch});
  out.push_back({Kind::kForward, micro_batch});
  if (stage < stages - 1) out.push_back({Kind::kSendActivation, micro_batch});
}

void AppendBackward(int32_t stage, int32_t stages, int32_t micro_batch,
                    std::vector<PipelineAction>& out) {
  if (stage < stages - 1) out.push_back({Kind::kRecvGradient, micro_batch});
  out.push_back({Kind::kBackward, micro_batch});
  if (stage > 0) out.push_back({Kind::kSendGradient, micro_batch});
}

std::string At(int32_t stage, size_t index, const PipelineAction& action) {
  return "stage " + std::to_string(stage) + " action " + std::to_string(index) +
         " " + PipelineActionName(action);
}

// What one stage has done in CheckPipelinePlan's simulation: its program
// counter and, per micro-batch, which of its actions have run.
struct StageState {
  size_t pc = 0;
  std::vector<bool> received_activation, forwarded, sent_activation;
  std::vector<bool> received_gradient, backwarded, sent_gradient;
};

// Marks micro-batch `mb` as done in `done`; an action that runs twice for
// one micro-batch is an error whatever the other stages do.
Status MarkOnce(std::vector<bool>& done, int32_t mb, const std::string& at,
                const char* what) {
  if (done[mb]) return InvalidArgument(at + ": " + what + " twice");
  done[mb] = true;
  return Status::Ok();
}

// The simulation behind CheckPipelinePlan. It keeps, per stage, a program
// counter and what it has done to each micro-batch, and per direction and
// stage boundary a FIFO channel of micro-batch numbers in flight. It steps
// any stage that can move until none can: a send always moves (it
// enqueues), a receive moves when its channel is non-empty (and fails when
// the oldest message is another micro-batch's: the transport would hand
// that one over), compute moves when its inputs are there. Stages that
// cannot move and have actions left are deadlocked.
class PlanSimulation {
 public:
  // `plan` has one action list per stage and outlives the simulation.
  explicit PlanSimulation(const PipelinePlan& plan)
      : plan_(plan),
        stages_(plan.stages),
        micro_batches_(plan.micro_batches),
        activations_(plan.stages),
        gradients_(plan.stages),
        state_(plan.stages) {
    for (StageState& st : state_) {
      for (auto* v :
           {&st.received_activation, &st.forwarded, &st.sent_activation,
            &st.received_gradient, &st.backwarded, &st.sent_gradient}) {
        v->assign(micro_batches_, false);
      }
    }
  }

  // Steps every stage that can move until none can; fails on an action
  // that is wrong whatever the other stages do.
  Status Run() {
    for (;;) {
      bool any = false;
      for (int32_t s = 0; s < stages_; ++s) {
        while (state_[s].pc < plan_.actions[s].size()) {
          bool moved = false;
          KOLO_RETURN_IF_ERROR(Step(s, moved));
          if (!moved) break;
          any = true;
        }
      }
      if (!any) return Status::Ok();
    }
  }

  // After Run: fails naming every stage that still has actions left.
  Status CheckNoneBlocked() const {
    std::string blocked;
    for (int32_t s = 0; s < stages_; ++s) {
      const StageState& st = state_[s];
      if (st.pc < plan_.actions[s].size()) {
        blocked += (blocked.empty() ? "" : ", ") +
                   At(s, st.pc, plan_.actions[s][st.pc]);
      }
    }
    if (!blocked.empty()) {
      return InvalidArgument("pipeline plan deadlocks: blocked at " + blocked);
    }
    return Status::Ok();
  }

  // After Run: fails on the first stage, in stage order, that leaves a
  // message unreceived or a micro-batch without one of its actions.
  Status CheckComplete() const {
    for (int32_t s = 0; s < stages_; ++s) {
      KOLO_RETURN_IF_ERROR(CheckStageComplete(s));
    }
    return Status::Ok();
  }

 private:
  // Steps stage s once if it can: `moved` stays false when it is blocked.
  Status Step(int32_t s, bool& moved) {
    moved = false;
    StageState& st = state_[s];
    const PipelineAction& a = plan_.actions[s][st.pc];
    const std::string at = At(s, st.pc, a);
    const int32_t mb = a.micro_batch;
    if (mb < 0 || mb >= micro_batches_) {
      return InvalidArgument(at + ": micro-batch out of range [0, " +
                             std::to_string(micro_batches_) + ")");
    }
    bool blocked = false;
    switch (a.kind) {
      case Kind::kRecvActivation:
      case Kind::kRecvGradient:
        KOLO_RETURN_IF_ERROR(
            Receive(s, a.kind == Kind::kRecvActivation, mb, at, blocked));
        break;
      case Kind::kSendActivation:
      case Kind::kSendGradient:
        KOLO_RETURN_IF_ERROR(Send(s, a.kind == Kind::kSendActivation, mb, at));
        break;
      case Kind::kForward: KOLO_RETURN_IF_ERROR(Forward(s, mb, at)); break;
      case Kind::kBackward: KOLO_RETURN_IF_ERROR(Backward(s, mb, at)); break;
    }
    if (blocked) return Status::Ok();
    ++st.pc;
    moved = true;
    return Status::Ok();
  }

  // RecvActivation (`activation`) or RecvGradient of micro-batch `mb` at
  // stage s; `blocked` when nothing is in flight to it yet.
  Status Receive(int32_t s, bool activation, int32_t mb, const std::string& at,
                 bool& blocked) {
    const int32_t peer = activation ? s - 1 : s + 1;
    if (peer < 0 || peer >= stages_) {
      return InvalidArgument(at + ": no stage " + std::to_string(peer) +
                             " to receive from");
    }
    std::deque<int32_t>& channel =
        activation ? activations_[s - 1] : gradients_[s];
    if (channel.empty()) {
      blocked = true;
      return Status::Ok();
    }
    if (channel.front() != mb) {
      return InvalidArgument(
          at + ": the oldest " + (activation ? "activation" : "gradient") +
          " from stage " + std::to_string(peer) + " is micro-batch " +
          std::to_string(channel.front()) + "'s (sends and receives " +
          "in different orders)");
    }
    channel.pop_front();
    StageState& st = state_[s];
    return MarkOnce(activation ? st.received_activation : st.received_gradient,
                    mb, at, "received");
  }

  // SendActivation (`activation`) or SendGradient of micro-batch `mb` at
  // stage s: it always moves, into the channel to its peer.
  Status Send(int32_t s, bool activation, int32_t mb, const std::string& at) {
    const int32_t peer = activation ? s + 1 : s - 1;
    if (peer < 0 || peer >= stages_) {
      return InvalidArgument(at + ": no stage " + std::to_string(peer) +
                             " to send to");
    }
    StageState& st = state_[s];
    if (activation ? !st.forwarded[mb] : !st.backwarded[mb]) {
      return InvalidArgument(at + ": sends before its " +
                             (activation ? "Forward" : "Backward"));
    }
    KOLO_RETURN_IF_ERROR(MarkOnce(
        activation ? st.sent_activation : st.sent_gradient, mb, at, "sent"));
    (activation ? activations_[s] : gradients_[s - 1]).push_back(mb);
    return Status::Ok();
  }

  Status Forward(int32_t s, int32_t mb, const std::string& at) {
    StageState& st = state_[s];
    if (s > 0 && !st.received_activation[mb]) {
      return InvalidArgument(at + ": forward before its RecvActivation");
    }
    return MarkOnce(st.forwarded, mb, at, "forwarded");
  }

  Status Backward(int32_t s, int32_t mb, const std::string& at) {
    StageState& st = state_[s];
    if (!st.forwarded[mb]) {
      return InvalidArgument(at + ": backward before its Forward");
    }
    if (s < stages_ - 1 && !st.received_gradient[mb]) {
      return InvalidArgument(at + ": backward before its RecvGradient");
    }
    return MarkOnce(st.backwarded, mb, at, "backwarded");
  }

  Status CheckStageComplete(int32_t s) const {
    const std::string where = "stage " + std::to_string(s);
    if (!activations_[s].empty()) {
      return InvalidArgument(where + ": SendActivation(" +
                             std::to_string(activations_[s].front()) +
                             ") is never received by stage " +
                             std::to_string(s + 1));
    }
    if (!gradients_[s].empty()) {
      return InvalidArgument(
          "stage " + std::to_string(s + 1) + ": SendGradient(" +
          std::to_string(gradients_[s].front()) +
          ") is never received by stage " + std::to_string(s));
    }
    const StageState& st = state_[s];
    for (int32_t mb = 0; mb < micro_batches_; ++mb) {
      const char* missing = !st.forwarded[mb]    ? "Forward"
                            : !st.backwarded[mb] ? "Backward"
                            : (s < stages_ - 1 && !st.sent_activation[mb])
                                ? "SendActivation"
                            : (s > 0 && !st.sent_gradient[mb]) ? "SendGradient"
                                                               : nullptr;
      if (missing != nullptr) {
        return InvalidArgument(where + " never runs " + missing + "(" +
                               std::to_string(mb) + ")");
      }
    }
    return Status::Ok();
  }

  const PipelinePlan& plan_;
  const int32_t stages_;
  const int32_t micro_batches_;
  // activations_[s]: stage s -> s + 1; gradients_[s]: stage s + 1 -> s.
  std::vector<std::deque<int32_t>> activations_, gradients_;
  std::vector<StageState> state_;
};

}  // namespace

const char* PipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
  }
  return "unknown";
}

StatusOr<PipelineSchedule> ParsePipelineSchedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::kOneFOneB;
  return InvalidArgument("unknown pipeline schedule '" + name +
                         "' (expected gpipe or 1f1b)");
}

const char* BalanceName(PipelineOptions::Balance balance) {
  switch (balance) {
    case PipelineOptions::Balance::kParameters: return "parameters";
    case PipelineOptions::Balance::kTime: return "time";
  }
  return "unknown";
}

StatusOr<PipelineOptions::Balance> ParseBalance(const std::string& name) {
  if (name == "parameters") return PipelineOptions::Balance::kParameters;
  if (name == "time") return PipelineOptions::Balance::kTime;
  return InvalidArgument("unknown pipeline balance '" + name +
                         "' (expected parameters or time)");
}

std::string PipelineActionName(const PipelineAction& action) {
  const char* name = "Unknown";
  switch (action.kind) {
    case Kind::kForward: name = "Forward"; break;
    case Kind::kBackward: name = "Backward"; break;
    case Kind::kSendActivation: name = "SendActivation"; break;
    case Kind::kRecvActivation: name = "RecvActivation"; break;
    case Kind::kSendGradient: name = "SendGradient"; break;
    case Kind::kRecvGradient: name = "RecvGradient"; break;
  }
  return std::string(name) + "(" + std::to_string(action.micro_batch) + ")";
}

StatusOr<PipelinePlan> BuildPipelinePlan(PipelineSchedule schedule,
                                         int32_t stages,
                                         int32_t micro_batches) {
  if (stages < 1 || micro_batches < 1) {
    return InvalidArgument(
        "a pipeline plan needs stages >= 1 and "
        "micro_batches >= 1, got stages " +
        std::to_string(stages) + " and micro_batches " +
        std::to_string(micro_batches));
  }
  PipelinePlan plan;
  plan.schedule = schedule;
  plan.stages = stages;
  plan.micro_batches = micro_batches;
  plan.actions.resize(stages);
  for (int32_t s = 0; s < stages; ++s) {
    std::vector<PipelineAction>& out = plan.actions[s];
    if (schedule == PipelineSchedule::kGPipe) {
      for (int32_t m = 0; m < micro_batches; ++m) {
        AppendForward(s, stages, m, out);
      }
      for (int32_t m = 0; m < micro_batches; ++m) {
        AppendBackward(s, stages, m, out);
      }
      continue;
    }
    // 1F1B: stage s runs ahead by the forwards it takes the first gradient
    // to come back from the last stage, stages - s - 1 of them, but never
    // more than there are micro-batches (with m < stages the warm-up simply
    // covers every micro-batch, and the steady phase is empty).
    const int32_t warmup = std::min(stages - s - 1, micro_batches);
    for (int32_t m = 0; m < warmup; ++m) AppendForward(s, stages, m, out);
    for (int32_t i = 0; i < micro_batches - warmup; ++i) {
      AppendForward(s, stages, warmup + i, out);
      AppendBackward(s, stages, i, out);
    }
    for (int32_t m = std::max(0, micro_batches - warmup); m < micro_batches;
         ++m) {
      AppendBackward(s, stages, m, out);
    }
  }
  return plan;
}

// Simulates the plan (PlanSimulation says how) and fails on the first
// action that is wrong, on a deadlock, or on work left undone.
Status CheckPipelinePlan(const PipelinePlan& plan) {
  const int32_t stages = plan.stages;
  const int32_t m = plan.micro_batches;
  if (stages < 1 || m < 1 ||
      static_cast<int32_t>(plan.actions.size()) != stages) {
    return InvalidArgument(
        "pipeline plan of " + std::to_string(stages) + " stages and " +
        std::to_string(m) + " micro-batches has " +
        std::to_string(plan.actions.size()) + " action lists");
  }
  PlanSimulation simulation(plan);
  KOLO_RETURN_IF_ERROR(simulation.Run());
  KOLO_RETURN_IF_ERROR(simulation.CheckNoneBlocked());
  return simulation.CheckComplete();
}

std::vector<int32_t> PeakActivations(const PipelinePlan& plan) {
  std::vector<int32_t> peaks;
  for (const std::vector<PipelineAction>& list : plan.actions) {
    int32_t held = 0, peak = 0;
    for (const PipelineAction& a : list) {
      if (a.kind == Kind::kForward) peak = std::max(peak, ++held);
      if (a.kind == Kind::kBackward) --held;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

// Linear partition by dynamic programming: best[k][i] is the smallest
// largest-stage cost of the first i layers cut into k stages, and cut[k][i]
// where its last stage starts. O(stages * layers^2), ample for models of
// hundreds of layers.
StatusOr<std::vector<int64_t>> BalanceStages(
    const std::vector<double>& layer_costs, int32_t stages) {
  const int64_t n = static_cast<int64_t>(layer_costs.size());
  if (stages < 1 || n < stages) {
    return InvalidArgument("cannot cut " + std::to_string(n) + " layers into " +
                           std::to_string(stages) +
                           " non-empty pipeline stages");
  }
  std::vector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_costs[i];
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1,
                                        std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int64_t>> cut(stages + 1,
                                        std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int32_t k = 1; k <= stages; ++k) {
    for (int64_t i = k; i <= n; ++i) {
      for (int64_t j = k - 1; j < i; ++j) {
        const double cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        // Strictly smaller only: among equal cuts the earliest start wins,
        // so ties resolve the same way on every rank.
        if (cost < best[k][i]) {
          best[k][i] = cost;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<int64_t> split(stages);
  int64_t end = n;
  for (int32_t k = stages; k >= 1; --k) {
    split[k - 1] = end - cut[k][end];
    end = cut[k][end];
  }
  return split;
}

}  // namespace kolo::torch
