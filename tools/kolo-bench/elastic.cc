#include "elastic.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "job_runner.h"
#include "json_file.h"
#include "kolo_internal/config.h"
#include "list_flag.h"
#include "scratch_dir.h"
#include "sibling_tools.h"
#include "statistics.h"
#include "train.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The rank the faulty runs kill: not rank 0, whose step times are read.
constexpr int kKilledRank = 1;

// Images per second of the steps in [first, last) of `times` (pairs of
// step and seconds): the global batch over the median time between two
// consecutive completions, so that one slow step (an epoch's evaluation, a
// worker joining) does not stand for the rest.
double Rate(const std::vector<std::pair<int64_t, double>>& times, size_t first,
            size_t last, int64_t global_batch) {
  std::vector<double> intervals;
  for (size_t i = first + 1; i < last; ++i)
    intervals.push_back(times[i].second - times[i - 1].second);
  const double median = SpreadOf(intervals).median;
  return median > 0 ? static_cast<double>(global_batch) / median : 0;
}

std::vector<std::string> JobCommand(const ElasticFlags& f,
                                    const std::string& kolorun,
                                    const std::string& kolo_train,
                                    const std::string& model, int32_t np,
                                    const fs::path& json_path, bool faulty) {
  std::vector<std::string> c = {
      kolorun, "--elastic", "-np",       std::to_string(np), "--min-np",
      "1",     kolo_train,  "--elastic", "--model",          model};
  const auto count = [&c](const char* flag, int64_t value) {
    c.insert(c.end(), {flag, std::to_string(value)});
  };
  count("--epochs", f.epochs);
  count("--batch-size", f.batch_size);
  count("--global-batch", f.global_batch);
  count("--commit-every", f.commit_every);
  count("--train-subset", f.train_subset);
  count("--test-subset", f.test_subset);
  c.insert(c.end(), {"--json", json_path.string()});
  if (model == "lenet") {
    c.insert(c.end(), {"--dataset", "fashion-mnist"});
  } else {
    c.insert(c.end(), {"--dataset", "synthetic", "--image-size", "32"});
  }
  if (faulty) {
    c.insert(c.end(), {"--kill-rank-at-step",
                       fmt::format("{}:{}", kKilledRank, f.kill_step)});
  }
  return c;
}

}  // namespace

StatusOr<double> FindKillTime(const std::string& output) {
  static const std::regex kLine(
      R"(fault injection: rank \d+ kills itself at step \d+ \(t=([0-9.]+)\))");
  std::smatch match;
  if (!std::regex_search(output, match, kLine)) {
    return NotFound("the run printed no fault-injection line");
  }
  return std::stod(match[1].str());
}

StatusOr<RecoveryMeasurement> MeasureRecovery(const json& step_times,
                                              double kill_time,
                                              int64_t kill_step,
                                              int64_t global_batch) {
  std::vector<std::pair<int64_t, double>> times;
  std::vector<int64_t> resets;
  for (const json& entry : step_times) {
    if (!entry.is_array() || entry.size() < 4 || !entry[0].is_number() ||
        !entry[1].is_number() || !entry[3].is_number()) {
      return InvalidArgument(
          "step_times entries are [step, seconds, workers, resets]");
    }
    times.emplace_back(entry[0].get<int64_t>(), entry[1].get<double>());
    resets.push_back(entry[3].get<int64_t>());
  }
  // The first step completed after the reset the kill caused. (Rank 0 may
  // complete the kill's own step a moment after the killed worker did, so
  // the clock alone cannot tell.)
  size_t after = 0;
  while (after < times.size() &&
         (times[after].second <= kill_time || resets[after] == 0)) {
    ++after;
  }
  if (after == times.size()) {
    return InvalidArgument(fmt::format(
        "rank 0 completed no step after a reset following the kill at "
        "t={:.6f}",
        kill_time));
  }
  size_t before = after;
  while (before > 0 && times[before - 1].second > kill_time) --before;
  RecoveryMeasurement m;
  m.recovery_seconds = times[after].second - kill_time;
  // Step numbers count steps completed: the first redone one is the last
  // commit's step + 1.
  m.steps_lost = std::max<int64_t>(0, kill_step - (times[after].first - 1));
  m.images_per_second_before = Rate(times, 0, before, global_batch);
  m.images_per_second_after = Rate(times, after, times.size(), global_batch);
  return m;
}

CLI::App* AddElasticCommand(CLI::App& app, ElasticFlags* f) {
  CLI::App* cmd = app.add_subcommand(
      "elastic",
      "what a killed worker costs an elastic job: recovery time, steps "
      "lost, throughput and accuracy against an uninterrupted run");
  cmd->add_option("--models", f->models, "models, comma-separated")
      ->capture_default_str();
  AddNpFlag(cmd, &f->np);
  cmd->add_option("--repeat", f->repeat, "runs of each kind (median)")
      ->capture_default_str();
  cmd->add_option("--kill-step", f->kill_step,
                  "global step at which rank 1 kills itself")
      ->capture_default_str();
  cmd->add_option("--commit-every", f->commit_every,
                  "kolo-train --commit-every")
      ->capture_default_str();
  cmd->add_option("--batch-size", f->batch_size,
                  "batch per worker of the first round")
      ->capture_default_str();
  cmd->add_option("--global-batch", f->global_batch,
                  "images per step at every worker count")
      ->capture_default_str();
  cmd->add_option("--epochs", f->epochs, "epochs of each run")
      ->capture_default_str();
  cmd->add_option("--train-subset", f->train_subset, "training images")
      ->capture_default_str();
  cmd->add_option("--test-subset", f->test_subset, "test images")
      ->capture_default_str();
  AddToolFlags(cmd, &f->kolorun, &f->kolo_train);
  cmd->add_option("--json", f->json_path, "write every measurement here");
  return cmd;
}

namespace {

// One (model, np) row's samples over its repeats.
struct ElasticSamples {
  std::vector<double> recovery, before, after, lost, plain_acc, fault_acc;
};

// The worker counts of --np: each at least 2, since a kill needs a
// survivor; kInvalidArgument naming the flag.
StatusOr<std::vector<int32_t>> ParseElasticNps(const ElasticFlags& f) {
  if (f.repeat < 1 || f.kill_step < 1 || f.commit_every < 1 ||
      f.batch_size < 1 || f.epochs < 1 || f.global_batch < 1) {
    return InvalidArgument(
        "--repeat, --kill-step, --commit-every, --batch-size, --global-batch "
        "and --epochs must be at least 1");
  }
  std::vector<int32_t> nps;
  for (const std::string& item : SplitList(f.np)) {
    StatusOr<int64_t> np = ParseInt(item, 2, 1024, "--np");
    if (!np.ok()) {
      return InvalidArgument(np.status().message() + " (a kill needs 2)");
    }
    nps.push_back(static_cast<int32_t>(*np));
  }
  return nps;
}

// One job, plain or with a rank killed: its record (into `records`) and
// its samples.
Status MeasureElasticJob(const ElasticFlags& f, const TrainTools& tools,
                         const ScratchDir& scratch, const std::string& model,
                         int32_t np, int32_t run, bool faulty,
                         ElasticSamples* samples, json* records) {
  const fs::path json_path =
      scratch / fmt::format("{}-{}-{}-{}.json", model, np, run, faulty);
  KOLO_ASSIGN_OR_RETURN(
      JobOutput out, RunJob(JobCommand(f, tools.kolorun, tools.kolo_train,
                                       model, np, json_path, faulty),
                            json_path.string(), (scratch / "log.txt").string(),
                            JobJson::kObject));
  const double accuracy = out.json.value("test_accuracy", 0.0);
  json record = {{"model", model},
                 {"np", np},
                 {"run", run},
                 {"faulty", faulty},
                 {"test_accuracy", accuracy},
                 {"resets", out.json.value("resets", 0)}};
  if (!faulty) {
    samples->plain_acc.push_back(accuracy);
    records->push_back(record);
    return Status::Ok();
  }
  samples->fault_acc.push_back(accuracy);
  KOLO_ASSIGN_OR_RETURN(double kill_time, FindKillTime(out.output));
  KOLO_ASSIGN_OR_RETURN(
      RecoveryMeasurement m,
      MeasureRecovery(out.json["step_times"], kill_time, f.kill_step,
                      out.json.value("global_batch", int64_t{1})));
  samples->recovery.push_back(m.recovery_seconds);
  samples->lost.push_back(static_cast<double>(m.steps_lost));
  samples->before.push_back(m.images_per_second_before);
  samples->after.push_back(m.images_per_second_after);
  record["recovery_seconds"] = m.recovery_seconds;
  record["steps_lost"] = m.steps_lost;
  record["images_per_second_before"] = m.images_per_second_before;
  record["images_per_second_after"] = m.images_per_second_after;
  records->push_back(record);
  return Status::Ok();
}

}  // namespace

Status RunElastic(const ElasticFlags& f) {
  KOLO_ASSIGN_OR_RETURN(const std::vector<int32_t> nps, ParseElasticNps(f));
  const std::vector<std::string> models = SplitList(f.models);
  if (nps.empty() || models.empty()) {
    return InvalidArgument("--np and --models are empty");
  }
  KOLO_ASSIGN_OR_RETURN(const TrainTools tools,
                        FindTrainTools(f.kolorun, f.kolo_train, "", ""));
  KOLO_ASSIGN_OR_RETURN(const ScratchDir scratch,
                        ScratchDir::Create("elastic"));
  json records = json::array();
  fmt::print("{:<10} {:>3}  {:>11}  {:>10}  {:>12}  {:>12}  {:>9}  {:>9}\n",
             "model", "np", "recovery s", "steps lost", "img/s before",
             "img/s after", "acc plain", "acc fault");
  for (const std::string& model : models) {
    for (int32_t np : nps) {
      ElasticSamples s;
      for (int32_t run = 0; run < f.repeat; ++run) {
        for (bool faulty : {false, true}) {
          KOLO_RETURN_IF_ERROR(MeasureElasticJob(f, tools, scratch, model, np,
                                                 run, faulty, &s, &records));
        }
      }
      fmt::print(
          "{:<10} {:>3}  {:>11.3f}  {:>10.0f}  {:>12.0f}  {:>12.0f}  "
          "{:>8.2f}%  {:>8.2f}%\n",
          model, np, SpreadOf(s.recovery).median, SpreadOf(s.lost).median,
          SpreadOf(s.before).median, SpreadOf(s.after).median,
          100 * SpreadOf(s.plain_acc).median,
          100 * SpreadOf(s.fault_acc).median);
      std::fflush(stdout);
    }
  }
  if (f.json_path.empty()) return Status::Ok();
  return WriteJsonFile(f.json_path, {{"benchmark", "elastic"},
                                     {"kill_step", f.kill_step},
                                     {"commit_every", f.commit_every},
                                     {"records", records}});
}

}  // namespace kolo::bench
