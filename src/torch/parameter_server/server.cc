// The server's loop: take worker 0's initial values, hand them to every
// worker, then answer pushes by mode until every worker finished (the
// protocol is described in kolo/torch_parameter_server.h).
//
// One thread polls one posted header receive per worker, so a push from any
// worker is taken as soon as it arrives whatever the others do. Beside each
// header receive the receives of the push's gradients are posted too, so
// every message finds its receive waiting (parameter_server_internal.h). The
// answers (a reply header and the shards' values) are sent asynchronously
// from snapshots of the values, so the loop never waits for a worker to take
// its answer and an update can follow while an answer is still in flight.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <thread>

#include "kolo/torch_zero.h"
#include "torch/parameter_server/parameter_server_internal.h"

namespace kolo::torch::internal {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

class ServerLoop {
 public:
  explicit ServerLoop(ParameterServerState& state)
      : state_(state),
        shards_(state.placement[state.role_index]),
        worker_count_(static_cast<int32_t>(state.workers.size())),
        headers_(worker_count_, std::vector<int64_t>(ps_wire::kHeaderWords, 0)),
        header_requests_(worker_count_),
        gradients_(worker_count_),
        gradient_requests_(worker_count_),
        clocks_(worker_count_, 0),
        finished_(worker_count_, false) {
    read_at_.assign(worker_count_, 0);
  }

  // Before the start's barrier: the receives of worker 0's values.
  Status PostInitialValues() {
    StatusOr<Request> request =
        Irecv(init_header_.data(), ps_wire::kHeaderWords, DataType::kInt64,
              WorldRank(0), ps_wire::kRequestTag);
    KOLO_RETURN_IF_ERROR(
        Failed(request.status(), 0, "receiving the initial values"));
    init_requests_.push_back(std::move(request).value());
    for (const ParameterShard& shard : shards_) {
      values_.push_back(
          ::torch::empty({shard.count}, ParameterOf(shard).tensor.options())
              .detach()
              .requires_grad_(true));
      sums_.push_back(::torch::zeros_like(values_.back()).detach());
      StatusOr<Request> value =
          Irecv(values_.back().data_ptr(), shard.count, ParameterOf(shard).type,
                WorldRank(0), ps_wire::kGradientTag);
      KOLO_RETURN_IF_ERROR(Failed(
          value.status(), 0, "receiving the initial values of " + shard.name));
      init_requests_.push_back(std::move(value).value());
    }
    return Status::Ok();
  }

  Status Run() {
    KOLO_RETURN_IF_ERROR(TakeInitialValues());
    // Every worker's receives are posted before any worker has its start
    // values, so before any push can come.
    for (int32_t w = 0; w < worker_count_; ++w) {
      KOLO_RETURN_IF_ERROR(PostReceives(w));
    }
    for (int32_t w = 0; w < worker_count_; ++w) {
      KOLO_RETURN_IF_ERROR(Answer(w, /*staleness=*/0));
    }
    Clock::time_point last_message = Clock::now();
    while (Unfinished() > 0) {
      bool progressed = false;
      for (int32_t w = 0; w < worker_count_; ++w) {
        if (finished_[w] || !header_requests_[w].Test()) continue;
        KOLO_RETURN_IF_ERROR(TakeRequest(w));
        progressed = true;
      }
      if (progressed) {
        KOLO_RETURN_IF_ERROR(Resolve());
        last_message = Clock::now();
      }
      KOLO_RETURN_IF_ERROR(ReapAnswers(/*all=*/false));
      if (!progressed) {
        if (Clock::now() - last_message > state_.options.idle_timeout) {
          return Timeout(Describe() + " heard from no worker for " +
                         std::to_string(state_.options.idle_timeout.count()) +
                         " ms; waiting for " + UnfinishedText());
        }
        const Clock::time_point before = Clock::now();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        state_.statistics.wait_seconds +=
            std::chrono::duration<double>(Clock::now() - before).count();
      }
    }
    return ReapAnswers(/*all=*/true);
  }

 private:
  std::string Describe() const {
    return state_.DescribeServer(state_.role_index);
  }
  std::string UnfinishedText() const {
    std::string text;
    for (int32_t w = 0; w < worker_count_; ++w) {
      if (!finished_[w]) text += (text.empty() ? "" : ", ") + WorkerText(w);
    }
    return text;
  }
  std::string WorkerText(int32_t w) const { return state_.DescribeWorker(w); }
  int32_t WorldRank(int32_t w) const { return state_.workers[w]; }
  const ParameterServerState::Parameter& ParameterOf(
      const ParameterShard& shard) const {
    return state_.parameters[shard.parameter];
  }
  int32_t Unfinished() const {
    return static_cast<int32_t>(
        std::count(finished_.begin(), finished_.end(), false));
  }

  // Worker 0's header and initial values; the optimizer is built over them.
  Status TakeInitialValues() {
    for (Request& request : init_requests_) {
      KOLO_RETURN_IF_ERROR(Failed(request.Wait(state_.options.idle_timeout), 0,
                                  "receiving the initial values"));
    }
    if (init_header_[0] != ps_wire::kInit) {
      return Internal(Describe() + " expected the initial values from " +
                      WorkerText(0) + ", got message kind " +
                      std::to_string(init_header_[0]));
    }
    for (const ParameterShard& shard : shards_) {
      state_.statistics.bytes_received +=
          shard.count * DataTypeSize(ParameterOf(shard).type);
    }
    if (!values_.empty()) {
      optimizer_ = MakeOptimizer(state_.options.optimizer)(values_);
    }
    return Status::Ok();
  }

  Status Failed(const Status& status, int32_t w, const std::string& what) {
    if (status.ok()) return status;
    return status.WithContext(Describe() + ", " + WorkerText(w) + ", " + what);
  }

  // Worker w's next header and the gradients that may follow it.
  Status PostReceives(int32_t w) {
    StatusOr<Request> request =
        Irecv(headers_[w].data(), ps_wire::kHeaderWords, DataType::kInt64,
              WorldRank(w), ps_wire::kRequestTag);
    KOLO_RETURN_IF_ERROR(Failed(request.status(), w, "waiting for a push"));
    header_requests_[w] = std::move(request).value();
    gradients_[w].clear();
    gradient_requests_[w].clear();
    for (size_t i = 0; i < shards_.size(); ++i) {
      gradients_[w].push_back(::torch::empty_like(sums_[i]));
      StatusOr<Request> gradient = Irecv(
          gradients_[w].back().data_ptr(), shards_[i].count,
          ParameterOf(shards_[i]).type, WorldRank(w), ps_wire::kGradientTag);
      KOLO_RETURN_IF_ERROR(
          Failed(gradient.status(), w,
                 "waiting for the gradient of " + shards_[i].name));
      gradient_requests_[w].push_back(std::move(gradient).value());
    }
    return Status::Ok();
  }

  // A header from worker w arrived: a push (take its gradients) or its end.
  Status TakeRequest(int32_t w) {
    KOLO_RETURN_IF_ERROR(
        Failed(header_requests_[w].Wait(), w, "waiting for a push"));
    const std::vector<int64_t>& header = headers_[w];
    if (header[0] == ps_wire::kFinish) {
      finished_[w] = true;
      return Status::Ok();
    }
    if (header[0] != ps_wire::kPush || header[1] != clocks_[w]) {
      return Internal(Describe() + ": " + WorkerText(w) + " sent kind " +
                      std::to_string(header[0]) + " for step " +
                      std::to_string(header[1]) + "; expected a push of step " +
                      std::to_string(clocks_[w]));
    }
    const std::string step = " (step " + std::to_string(header[1]) + ")";
    const bool synchronous =
        state_.options.mode == ParameterServerMode::kSynchronous;
    for (size_t i = 0; i < shards_.size(); ++i) {
      KOLO_RETURN_IF_ERROR(
          Failed(gradient_requests_[w][i].Wait(), w,
                 "receiving the gradient of " + shards_[i].name + step));
      state_.statistics.bytes_received +=
          shards_[i].count * DataTypeSize(ParameterOf(shards_[i]).type);
      if (synchronous) {
        sums_[i].add_(gradients_[w][i]);
      } else {
        values_[i].mutable_grad() = gradients_[w][i];
      }
    }
    double rate = 0;
    std::memcpy(&rate, &header[3], sizeof(rate));
    if (rate > 0) learning_rate_ = rate;
    if (!synchronous) {
      const int64_t lag = updates_ - read_at_[w];
      state_.statistics.max_update_lag =
          std::max(state_.statistics.max_update_lag, lag);
      StepOptimizer(1.0 / static_cast<double>(std::max<int64_t>(1, lag)));
    }
    ++clocks_[w];
    pending_.push_back(w);
    // Before the answer goes out, so the next push finds its receives.
    return PostReceives(w);
  }

  // One update at the configured learning rate times `lr_scale`.
  void StepOptimizer(double lr_scale = 1.0) {
    if (optimizer_) {
      ::torch::NoGradGuard no_grad;
      for (auto& group : optimizer_->param_groups()) {
        group.options().set_lr(learning_rate_ * lr_scale);
      }
      optimizer_->step();
    }
    ++updates_;
    ++state_.statistics.steps;
  }

  // Answers the pulls that may be answered now.
  Status Resolve() {
    switch (state_.options.mode) {
      case ParameterServerMode::kSynchronous: {
        // Every unfinished worker pushed this step: one averaged update.
        if (pending_.empty() ||
            static_cast<int32_t>(pending_.size()) < Unfinished()) {
          return Status::Ok();
        }
        const double n = static_cast<double>(pending_.size());
        for (size_t i = 0; i < values_.size(); ++i) {
          values_[i].mutable_grad() = sums_[i] / n;
          sums_[i].zero_();
        }
        StepOptimizer();
        break;
      }
      case ParameterServerMode::kAsynchronous: break;
      case ParameterServerMode::kBoundedStaleness: {
        std::deque<int32_t> held;
        for (int32_t w : pending_) {
          if (Staleness(w) > state_.options.staleness) {
            held.push_back(w);
            if (!was_held_[w]) ++state_.statistics.held_pulls;
            was_held_[w] = true;
          } else {
            was_held_[w] = false;
            KOLO_RETURN_IF_ERROR(Answer(w, Staleness(w)));
          }
        }
        pending_ = std::move(held);
        return Status::Ok();
      }
    }
    for (int32_t w : pending_) KOLO_RETURN_IF_ERROR(Answer(w, Staleness(w)));
    pending_.clear();
    return Status::Ok();
  }

  // How many steps worker w is ahead of the slowest unfinished worker.
  int64_t Staleness(int32_t w) const {
    int64_t slowest = std::numeric_limits<int64_t>::max();
    for (int32_t v = 0; v < worker_count_; ++v) {
      if (!finished_[v]) slowest = std::min(slowest, clocks_[v]);
    }
    return slowest == std::numeric_limits<int64_t>::max()
               ? 0
               : clocks_[w] - slowest;
  }

  // Sends worker w a reply header and a snapshot of every shard.
  Status Answer(int32_t w, int64_t staleness) {
    read_at_[w] = updates_;
    state_.statistics.max_staleness =
        std::max(state_.statistics.max_staleness, staleness);
    auto header = std::make_shared<std::vector<int64_t>>(
        std::vector<int64_t>{ps_wire::kReply, clocks_[w], staleness, 0});
    auto values = std::make_shared<std::vector<::torch::Tensor>>();
    StatusOr<Request> request =
        Isend(header->data(), ps_wire::kHeaderWords, DataType::kInt64,
              WorldRank(w), ps_wire::kReplyTag);
    KOLO_RETURN_IF_ERROR(Failed(request.status(), w, "answering a pull"));
    outgoing_.push_back({w, std::move(request).value(), header, values});
    for (size_t i = 0; i < shards_.size(); ++i) {
      values->push_back(values_[i].detach().clone());
      StatusOr<Request> sent =
          Isend(values->back().data_ptr(), shards_[i].count,
                ParameterOf(shards_[i]).type, WorldRank(w), ps_wire::kValueTag);
      KOLO_RETURN_IF_ERROR(
          Failed(sent.status(), w, "sending " + shards_[i].name));
      outgoing_.push_back({w, std::move(sent).value(), header, values});
      state_.statistics.bytes_sent +=
          shards_[i].count * DataTypeSize(ParameterOf(shards_[i]).type);
    }
    return Status::Ok();
  }

  // Drops the answers that arrived; with `all`, waits for every one.
  Status ReapAnswers(bool all) {
    while (!outgoing_.empty() && (all || outgoing_.front().request.Test())) {
      Outgoing& front = outgoing_.front();
      KOLO_RETURN_IF_ERROR(
          Failed(front.request.Wait(), front.worker, "sending an answer"));
      outgoing_.pop_front();
    }
    return Status::Ok();
  }

  // An answer on its way to one worker, with the buffers it reads.
  struct Outgoing {
    int32_t worker;
    Request request;
    std::shared_ptr<std::vector<int64_t>> header;
    std::shared_ptr<std::vector<::torch::Tensor>> values;
  };

  ParameterServerState& state_;
  const std::vector<ParameterShard>& shards_;
  const int32_t worker_count_;
  std::vector<::torch::Tensor> values_;  // this server's shards, flattened
  std::vector<::torch::Tensor> sums_;    // synchronous: the step's sum
  std::unique_ptr<::torch::optim::Optimizer> optimizer_;
  int64_t updates_ = 0;           // optimizer steps applied so far
  std::vector<int64_t> read_at_;  // updates_ when each worker read values
  // The rate the last push asked for, or the options'.
  double learning_rate_ = state_.options.optimizer.lr;
  std::vector<int64_t> init_header_ =
      std::vector<int64_t>(ps_wire::kHeaderWords, 0);
  std::vector<Request> init_requests_;
  std::vector<std::vector<int64_t>> headers_;  // one posted receive each
  std::vector<Request> header_requests_;
  std::vector<std::vector<::torch::Tensor>> gradients_;  // posted, per worker
  std::vector<std::vector<Request>> gradient_requests_;
  std::vector<int64_t> clocks_;  // pushes taken from each worker
  std::vector<bool> finished_;
  std::map<int32_t, bool> was_held_;  // held once already: counted
  std::deque<int32_t> pending_;       // pushed, not yet answered
  std::deque<Outgoing> outgoing_;
};

Status ParameterServerState::PrepareServer() {
  server_loop = std::make_shared<ServerLoop>(*this);
  return server_loop->PostInitialValues();
}

Status ParameterServerState::Serve() { return server_loop->Run(); }

}  // namespace kolo::torch::internal
