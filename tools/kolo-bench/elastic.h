// kolo-bench elastic: what a lost worker costs an elastic job.
//
//   kolo-bench elastic [--models lenet,resnet18] [--np 2,4,8] [--repeat 3]
//                      [--kill-step S] [--commit-every K] [--json FILE]
//
// For each model and worker count it runs `kolorun --elastic -np N
// kolo-train --elastic` twice per repetition: once uninterrupted, once with
// rank 1 of the first round killing itself (SIGKILL) at global step S. From
// the faulty run it reads the kill's time (the killed worker prints it on
// the host's monotonic clock just before it dies) and rank 0's step times,
// and reports:
//   - recovery: from the kill to the first step completed after it (the
//     survivors' failure detection, the new round, the state sync and the
//     steps redone are all inside);
//   - steps lost: the steps between the last commit and the kill;
//   - images/s before the kill and after the recovery (the global batch
//     over the median time between two steps);
//   - the test accuracy of both runs, and their difference.
// Medians over the repetitions. lenet trains on Fashion-MNIST, other models
// on synthetic images (--image-size 32).
#ifndef KOLO_TOOLS_KOLO_BENCH_ELASTIC_H_
#define KOLO_TOOLS_KOLO_BENCH_ELASTIC_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"

namespace kolo::bench {

struct ElasticFlags {
  std::string models = "lenet,resnet18";
  std::string np = "2,4,8";
  int32_t repeat = 3;
  int64_t kill_step = 15;
  int64_t commit_every = 10;
  // The learning rate is scaled for --global-batch as kolo-train scales
  // it for --batch-size times the workers; the same at every worker count,
  // so every run trains the same way.
  int64_t batch_size = 32;
  int64_t global_batch = 64;
  int64_t epochs = 3;
  int64_t train_subset = 12288;
  int64_t test_subset = 10000;
  std::string kolorun;     // default: beside kolo-bench
  std::string kolo_train;  // default: beside kolo-bench
  std::string json_path;
};

// What one faulty run showed, read from kolo-train's JSON and output.
struct RecoveryMeasurement {
  double recovery_seconds = 0;
  int64_t steps_lost = 0;
  double images_per_second_before = 0;
  double images_per_second_after = 0;
};

// `step_times` is kolo-train's [[global step, monotonic seconds, workers,
// resets], ...] of its rank 0; `kill_time` the killed worker's clock at the kill;
// `global_batch` images per step. kInvalidArgument when the run shows no
// step after the kill.
StatusOr<RecoveryMeasurement> MeasureRecovery(const nlohmann::json& step_times,
                                              double kill_time,
                                              int64_t kill_step,
                                              int64_t global_batch);

// The kill time in kolo-train's "fault injection: ... (t=SECONDS)" line of
// `output`; kNotFound without one.
StatusOr<double> FindKillTime(const std::string& output);

CLI::App* AddElasticCommand(CLI::App& app, ElasticFlags* flags);

// What `kolo-bench elastic` runs: both runs of every configuration, the
// table, and the records written to flags.json_path (when set).
Status RunElastic(const ElasticFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_ELASTIC_H_
