#include "elastic_trainer.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "json_file.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "kolo/torch.h"
#include "kolo/torch_elastic.h"
#include "plan.h"
#include "setup.h"

namespace kolo::train {
namespace {

using nlohmann::json;

// Seconds on the machine's monotonic clock, which every process of a host
// shares: a killed worker's last line and a survivor's step times compare.
double MonotonicSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The epoch's order of the training set: the same on every worker, in
// every round.
std::vector<int64_t> EpochOrder(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed * 1000003 + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), generator);
  return order;
}

struct KillOrder {
  int64_t rank = -1;
  int64_t step = -1;
};

KillOrder ParseKillOrder(const std::string& text) {
  KillOrder order;
  if (!text.empty())
    std::sscanf(text.c_str(), "%ld:%ld", &order.rank, &order.step);
  return order;
}

// One elastic run: the state it commits and what it reports.
class ElasticTraining {
 public:
  ElasticTraining(const Flags& f, Setup& setup)
      : f_(f),
        setup_(setup),
        model_(*setup.model),
        optimizer_(*setup.optimizer),
        state_(model_, optimizer_),
        kill_(ParseKillOrder(f.kill_rank_at_step)) {
    epoch_ = setup.epochs_done;
    history_text_ = setup.history.dump();
    state_.Track("epoch", &epoch_);
    state_.Track("step", &step_);
    state_.Track("global_batch", &global_batch_);
    state_.Track("loss_sum", &loss_sum_);
    state_.Track("images", &images_);
    state_.Track("history", &history_text_);
    state_.OnReset([this] { return OnReset(); });
  }

  Status Run() {
    return elastic::Run(state_, [this] { return TrainToTheEnd(); });
  }

  // Rank 0 of the last round's report, once Run returned ok.
  const json& report() const { return report_; }
  bool reported() const { return !report_.is_null(); }

 private:
  Status OnReset() {
    if (Rank() == 0) {
      const int64_t per_worker = (global_batch_ + Size() - 1) / Size();
      fmt::print(
          "kolo-train: reset {}: {} workers at epoch {} step {} (reached {}, "
          "lost {}); global batch {} stays, up to {} images per worker\n",
          state_.resets(), Size(), epoch_ + 1, step_, furthest_step_,
          std::max<int64_t>(0, furthest_step_ - GlobalStep()), global_batch_,
          per_worker);
      std::fflush(stdout);
    }
    ++resets_;
    return Status::Ok();
  }

  int64_t StepsPerEpoch() const {
    const int64_t n = setup_.data.train.size();
    return (n + global_batch_ - 1) / global_batch_;
  }
  int64_t GlobalStep() const { return epoch_ * StepsPerEpoch() + step_; }

  LrPlan Plan() const {
    const double scaled =
        f_.no_lr_scaling
            ? f_.lr
            : f_.lr * static_cast<double>(global_batch_) / f_.batch_size;
    LrPlan plan;
    plan.base_lr = f_.lr;
    plan.scaled_lr = scaled;
    plan.warmup_iterations =
        scaled == f_.lr ? 0 : f_.warmup_epochs * StepsPerEpoch();
    plan.total_iterations = f_.epochs * StepsPerEpoch();
    plan.schedule = f_.lr_schedule == "constant" ? LrSchedule::kConstant
                                                 : LrSchedule::kCosine;
    return plan;
  }

  Status TrainToTheEnd() {
    const int32_t rank = Rank();
    const int32_t size = Size();
    // The first round fixes the global batch; the state carries it on, so
    // a worker that joins later finds it set.
    in_first_round_ = global_batch_ == 0;
    if (global_batch_ == 0) {
      global_batch_ =
          f_.global_batch > 0 ? f_.global_batch : f_.batch_size * size;
      if (rank == 0) {
        fmt::print(
            "kolo-train: --elastic: {} ({} parameters) on {}, {} workers, "
            "global batch {}, {} steps per epoch, commit every {} steps\n",
            f_.model, models::CountParameters(model_), f_.dataset, size,
            global_batch_, StepsPerEpoch(), f_.commit_every);
        std::fflush(stdout);
      }
    }
    kolo::torch::DistributedOptimizerOptions options;
    options.op = ReduceOp::kSum;
    options.compression = ParseCompression(f_.compression);
    options.bucket_bytes = f_.bucket_kib * 1024;
    kolo::torch::DistributedOptimizer optimizer(
        optimizer_, model_.named_parameters(), options);
    const LrPlan plan = Plan();
    const data::Dataset& train = setup_.data.train;
    const bool has_buffers = !model_.buffers().empty();

    while (epoch_ < f_.epochs) {
      if (order_epoch_ != epoch_) {
        order_ = EpochOrder(train.size(), f_.seed, epoch_);
        order_epoch_ = epoch_;
      }
      model_.train();
      while (step_ < StepsPerEpoch()) {
        if (in_first_round_ && kill_.step == GlobalStep() &&
            kill_.rank == rank) {
          fmt::print(
              "kolo-train: fault injection: rank {} kills itself at "
              "step {} (t={:.6f})\n",
              rank, GlobalStep(), MonotonicSeconds());
          std::fflush(stdout);
          raise(SIGKILL);
        }
        const int64_t first = step_ * global_batch_;
        const int64_t count =
            std::min<int64_t>(global_batch_, train.size() - first);
        const int64_t begin = first + count * rank / size;
        const int64_t end = first + count * (rank + 1) / size;
        const double lr = LearningRate(plan, GlobalStep());
        for (auto& group : optimizer_.param_groups())
          group.options().set_lr(lr);
        ::torch::manual_seed(EpochSeed(f_.seed, GlobalStep(), rank));
        optimizer.ZeroGrad();
        double local_loss = 0;
        if (end > begin) {
          ::torch::Tensor rows = ::torch::from_blob(
              order_.data() + begin, {end - begin}, ::torch::kInt64);
          ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(
              model_.forward(train.images.index_select(0, rows)),
              train.labels.index_select(0, rows),
              ::torch::nn::functional::CrossEntropyFuncOptions().reduction(
                  ::torch::kSum));
          local_loss = loss.item<double>();
          (loss / static_cast<double>(count)).backward();
        }
        KOLO_RETURN_IF_ERROR(optimizer.Step().WithContext(
            fmt::format("epoch {} step {}", epoch_ + 1, step_ + 1)));
        KOLO_ASSIGN_OR_RETURN(
            ::torch::Tensor summed,
            kolo::torch::Allreduce(::torch::tensor({local_loss}),
                                   "kolo-train.loss", ReduceOp::kSum));
        loss_sum_ += summed.item<double>();
        images_ += count;
        ++step_;
        furthest_step_ = std::max(furthest_step_, GlobalStep());
        step_times_.push_back(
            {GlobalStep(), MonotonicSeconds(), size, state_.resets()});
        if (step_ % f_.commit_every == 0) KOLO_RETURN_IF_ERROR(state_.Commit());
      }
      KOLO_RETURN_IF_ERROR(EndEpoch(rank, size, has_buffers));
    }
    return Finish(rank, size);
  }

  Status EndEpoch(int32_t rank, int32_t size, bool has_buffers) {
    // Each worker's batch-norm statistics follow its own images; rank 0's
    // become everyone's.
    if (has_buffers) {
      KOLO_RETURN_IF_ERROR(kolo::torch::BroadcastParameters(model_, 0));
    }
    KOLO_ASSIGN_OR_RETURN(Evaluation eval,
                          kolo::torch::Evaluate(model_, setup_.data.test,
                                                kEvalBatchSize, "kolo-train"));
    json history = json::parse(history_text_, nullptr, false);
    if (!history.is_array()) history = json::array();
    const double loss =
        loss_sum_ / static_cast<double>(std::max<int64_t>(images_, 1));
    history.push_back({{"epoch", epoch_ + 1},
                       {"train_loss", loss},
                       {"test_accuracy", eval.accuracy()},
                       {"test_correct", eval.correct},
                       {"test_total", eval.total},
                       {"workers", size}});
    if (rank == 0) {
      fmt::print(
          "epoch {}/{}  train loss {:.4f}  test accuracy {:.2f}% ({}/{})  {} "
          "workers\n",
          epoch_ + 1, f_.epochs, loss, 100.0 * eval.accuracy(), eval.correct,
          eval.total, size);
      std::fflush(stdout);
    }
    Status saved;
    if (rank == 0 && !f_.checkpoint_dir.empty()) {
      saved =
          SaveCheckpoint(f_.checkpoint_dir, model_, optimizer_,
                         CheckpointInfoAfter(f_, epoch_ + 1, history.dump()));
    }
    if (!f_.checkpoint_dir.empty()) {
      // Every worker learns whether rank 0's write worked.
      int32_t failed = saved.ok() ? 0 : 1;
      KOLO_RETURN_IF_ERROR(
          Allreduce(&failed, &failed, 1, DataType::kInt32, ReduceOp::kMax));
      if (failed != 0) {
        return saved.ok() ? Aborted("rank 0 could not write the checkpoint")
                          : saved;
      }
    }
    history_text_ = history.dump();
    last_accuracy_ = eval.accuracy();
    ++epoch_;
    step_ = 0;
    loss_sum_ = 0;
    images_ = 0;
    return state_.Commit();
  }

  Status Finish(int32_t rank, int32_t size) {
    if (rank != 0) return Status::Ok();
    json steps = json::array();
    for (const StepTime& t : step_times_)
      steps.push_back({t.global_step, t.seconds, t.workers, t.resets});
    report_ = {{"mode", "elastic"},
               {"model", f_.model},
               {"dataset", f_.dataset},
               {"epochs", f_.epochs},
               {"global_batch", global_batch_},
               {"workers_at_end", size},
               {"resets", resets_},
               {"history", json::parse(history_text_, nullptr, false)},
               {"step_times", steps}};
    if (!std::isnan(last_accuracy_)) report_["test_accuracy"] = last_accuracy_;
    fmt::print(
        "kolo-train: --elastic: done after {} resets; test accuracy "
        "{:.2f}%\n",
        resets_, 100.0 * last_accuracy_);
    std::fflush(stdout);
    return Status::Ok();
  }

  // Each step this process completed (redone ones again): kolo-bench
  // elastic reads when the first one after a reset came.
  struct StepTime {
    int64_t global_step;
    double seconds;
    int32_t workers;
    int32_t resets;  // this process's resets before the step
  };

  const Flags& f_;
  Setup& setup_;
  models::Model& model_;
  ::torch::optim::Optimizer& optimizer_;
  kolo::torch::ElasticState state_;
  const KillOrder kill_;
  // The committed state.
  int64_t epoch_ = 0;
  int64_t step_ = 0;
  int64_t global_batch_ = 0;
  double loss_sum_ = 0;
  int64_t images_ = 0;
  std::string history_text_;
  // This process's own record.
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  int64_t furthest_step_ = 0;
  int32_t resets_ = 0;
  // A kill order names a rank of the job as it started.
  bool in_first_round_ = false;
  double last_accuracy_ = std::nan("");
  std::vector<StepTime> step_times_;
  json report_;
};

}  // namespace

int RunElasticTraining(const Flags& f) {
  if (!elastic::IsElasticWorker()) {
    fmt::print(stderr,
               "kolo-train: --elastic runs under kolorun --elastic (this "
               "process was not started by it)\n");
    return 1;
  }
  ::torch::set_num_threads(f.threads > 0 ? f.threads : 1);
  try {
    Setup setup;
    // Every worker reads the checkpoint when resuming; the first round's
    // rank 0 then syncs its copy to all.
    Status prepared = Prepare(f, /*rank=*/0, &setup);
    if (!prepared.ok()) {
      fmt::print(stderr, "kolo-train: {}\n", prepared.message());
      return 1;
    }
    ElasticTraining training(f, setup);
    Status done = training.Run();
    if (done.code() == StatusCode::kNotFound) {
      // Removed from the job (its host left): not a failure of the job.
      fmt::print(stderr, "kolo-train: {}\n", done.message());
      return 0;
    }
    if (!done.ok()) {
      fmt::print(stderr, "kolo-train: {}\n", done.ToString());
      return 1;
    }
    if (training.reported() && !f.json_path.empty()) {
      Status written = bench::WriteJsonFile(f.json_path, training.report());
      if (!written.ok()) {
        fmt::print(stderr, "kolo-train: {}\n", written.message());
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    const std::string message = e.what();
    fmt::print(stderr, "kolo-train: {}\n",
               message.substr(0, message.find('\n')));
    return 1;
  }
}

}  // namespace kolo::train
