#include "trainer.h"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "json_file.h"
#include "kolo/elastic.h"
#include "kolo/elastic_trainer.h"
#include "kolo/kolo.h"
#include "kolo/torch.h"
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

// One elastic run: kolo-train's lines, history, checkpoints and report as
// hooks of the library's ElasticTrainer, which trains.
class ElasticTraining {
 public:
  ElasticTraining(const Flags& f, Setup& setup)
      : f_(f),
        setup_(setup),
        trainer_(*setup.model, *setup.optimizer, Options(f)),
        kill_(ParseKillOrder(f.kill_rank_at_step)),
        history_text_(setup.history.dump()) {
    // Committed with the rest of the state, so a joining worker has it.
    trainer_.state().Track("history", &history_text_);
    kolo::torch::ElasticHooks& hooks = trainer_.hooks();
    hooks.resume = [this]() -> StatusOr<int64_t> { return setup_.epochs_done; };
    hooks.learning_rate = [this](const kolo::torch::StepPosition& p) {
      return LearningRate(Plan(), p.iteration);
    };
    hooks.on_start = [this](int64_t, int64_t steps) { PrintStart(steps); };
    hooks.on_reset = [this](const kolo::torch::ElasticReset& r) {
      PrintReset(r);
    };
    hooks.before_step = [this](const kolo::torch::ElasticPosition& p) {
      InjectFault(p);
    };
    hooks.on_step = [this](const kolo::torch::StepReport& r) {
      step_times_.push_back({r.steps_taken, MonotonicSeconds(), Size(),
                             trainer_.state().resets()});
    };
    hooks.on_epoch = [this](const kolo::torch::EpochReport& e) {
      RecordEpoch(e);
    };
    hooks.checkpoint = [this](int64_t epochs_done) {
      return Checkpoint(epochs_done);
    };
  }

  Status Run() {
    KOLO_ASSIGN_OR_RETURN(kolo::torch::ElasticFitResult fit,
                          trainer_.Fit(setup_.data.train, setup_.data.test));
    if (fit.rank == 0) Report(fit);
    return Status::Ok();
  }

  // Rank 0 of the last round's report, once Run returned ok.
  const json& report() const { return report_; }
  bool reported() const { return !report_.is_null(); }

 private:
  static kolo::torch::ElasticTrainerOptions Options(const Flags& f) {
    kolo::torch::ElasticTrainerOptions options;
    options.epochs = f.epochs;
    options.global_batch = f.global_batch;
    options.batch_size = f.batch_size;
    options.commit_every = f.commit_every;
    options.seed = f.seed;
    options.eval_batch_size = kEvalBatchSize;
    options.communication.compression = ParseCompression(f.compression);
    options.communication.bucket_bytes = f.bucket_kib * 1024;
    options.name = "kolo-train";
    return options;
  }

  // The learning rate is scaled for G as a plain run at G / --batch-size
  // workers scales it, and stays when workers come and go.
  LinearScalingSchedule Plan() const {
    const double scaled =
        f_.no_lr_scaling
            ? f_.lr
            : f_.lr * static_cast<double>(trainer_.global_batch()) /
                  static_cast<double>(f_.batch_size);
    return ScheduleOf(f_, scaled, trainer_.StepsPerEpoch());
  }

  void PrintStart(int64_t steps_per_epoch) {
    if (Rank() != 0) return;
    fmt::print(
        "kolo-train: --elastic: {} ({} parameters) on {}, {} workers, "
        "global batch {}, {} steps per epoch, commit every {} steps\n",
        f_.model, models::CountParameters(*setup_.model), f_.dataset, Size(),
        trainer_.global_batch(), steps_per_epoch, f_.commit_every);
    std::fflush(stdout);
  }

  void PrintReset(const kolo::torch::ElasticReset& r) {
    if (Rank() != 0) return;
    fmt::print(
        "kolo-train: reset {}: {} workers at epoch {} step {} (reached {}, "
        "lost {}); global batch {} stays, up to {} images per worker\n",
        r.resets, r.workers, r.epoch + 1, r.step, r.reached, r.lost,
        r.global_batch, (r.global_batch + r.workers - 1) / r.workers);
    std::fflush(stdout);
  }

  // A kill order names a rank of the job as it started.
  void InjectFault(const kolo::torch::ElasticPosition& p) {
    if (!p.first_round || kill_.step != p.global_step || kill_.rank != Rank())
      return;
    fmt::print(
        "kolo-train: fault injection: rank {} kills itself at step {} "
        "(t={:.6f})\n",
        Rank(), p.global_step, MonotonicSeconds());
    std::fflush(stdout);
    raise(SIGKILL);
  }

  void RecordEpoch(const kolo::torch::EpochReport& e) {
    json history = json::parse(history_text_, nullptr, false);
    if (!history.is_array()) history = json::array();
    history.push_back({{"epoch", e.epoch},
                       {"train_loss", e.train_loss},
                       {"test_accuracy", e.eval.accuracy()},
                       {"test_correct", e.eval.correct},
                       {"test_total", e.eval.total},
                       {"workers", Size()}});
    if (Rank() == 0) {
      fmt::print(
          "epoch {}/{}  train loss {:.4f}  test accuracy {:.2f}% ({}/{})  {} "
          "workers\n",
          e.epoch, f_.epochs, e.train_loss, 100.0 * e.eval.accuracy(),
          e.eval.correct, e.eval.total, Size());
      std::fflush(stdout);
    }
    // A reset before the epoch's commit restores the history before it.
    history_text_ = history.dump();
    last_accuracy_ = e.eval.accuracy();
  }

  Status Checkpoint(int64_t epochs_done) {
    if (f_.checkpoint_dir.empty()) return Status::Ok();
    Status saved;
    if (Rank() == 0) {
      saved =
          SaveCheckpoint(f_.checkpoint_dir, *setup_.model, *setup_.optimizer,
                         CheckpointInfoAfter(f_, epochs_done, history_text_));
    }
    // Every worker learns whether rank 0's write worked.
    int32_t failed = saved.ok() ? 0 : 1;
    KOLO_RETURN_IF_ERROR(
        Allreduce(&failed, &failed, 1, DataType::kInt32, ReduceOp::kMax));
    if (failed == 0) return Status::Ok();
    return saved.ok() ? Aborted("rank 0 could not write the checkpoint")
                      : saved;
  }

  void Report(const kolo::torch::ElasticFitResult& fit) {
    json steps = json::array();
    for (const StepTime& t : step_times_)
      steps.push_back({t.global_step, t.seconds, t.workers, t.resets});
    report_ = {{"mode", "elastic"},
               {"model", f_.model},
               {"dataset", f_.dataset},
               {"epochs", f_.epochs},
               {"global_batch", fit.global_batch},
               {"workers_at_end", fit.workers},
               {"resets", fit.resets},
               {"history", json::parse(history_text_, nullptr, false)},
               {"step_times", steps}};
    if (!std::isnan(last_accuracy_)) report_["test_accuracy"] = last_accuracy_;
    fmt::print(
        "kolo-train: --elastic: done after {} resets; test accuracy "
        "{:.2f}%\n",
        fit.resets, 100.0 * last_accuracy_);
    std::fflush(stdout);
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
  kolo::torch::ElasticTrainer trainer_;
  const KillOrder kill_;
  std::string history_text_;  // committed: the JSON history so far
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
