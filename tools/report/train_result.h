// The "result" object of a training job's --json file: what kolo-train
// writes (its --benchmark-steps and --epochs runs, pipeline and parameter
// server modes included) and what kolo-bench reads back from kolo-train
// and from the PyTorch peers, which write the same keys (bench/peers/).
//
// One struct, one writer (ToJson) and one reader (TrainResultFromJson), so
// that the key a figure goes by is spelled in one place. Every field but
// images_per_second is optional: a benchmark has no test accuracy, an
// epoch run no step time, a peer no parameter checksum. Keys the schema
// does not name (a model-parallel mode's statistics under the mode's name,
// the scrape counts kolo-bench adds) travel in `extra` as written.
#ifndef KOLO_TOOLS_REPORT_TRAIN_RESULT_H_
#define KOLO_TOOLS_REPORT_TRAIN_RESULT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::bench {

// Per rank, in rank order: the bytes each rank's optimizer holds (kolo-bench
// zero compares them between ZeRO stages). A pipeline's jobs report other
// per-stage bytes here instead (parameters, activations): they travel in
// `extra`.
struct RankMemory {
  std::optional<std::vector<int64_t>> optimizer_state_bytes;
  std::optional<std::vector<int64_t>> gradient_bytes;
  std::optional<std::vector<int64_t>> master_weight_bytes;
  nlohmann::json extra = nlohmann::json::object();
};

// Rank 0's mean milliseconds per timed step in each phase; `step` includes
// the time blocked on allreduces.
struct StepPhases {
  double data = 0;
  double forward = 0;
  double backward = 0;
  double step = 0;
};

struct TrainResult {
  // Every run: all ranks' images over the time spent training.
  double images_per_second = 0;
  std::optional<double> images_per_second_per_worker;
  std::optional<std::vector<int64_t>> peak_rss_bytes;  // per rank
  std::optional<RankMemory> memory;

  // Timed steps (--benchmark-steps).
  std::optional<double> seconds;  // the timed window
  std::optional<double> step_ms;
  std::optional<double> communication_seconds;  // kolo's engine statistics
  std::optional<double> negotiation_seconds;
  std::optional<double> waiting_seconds;  // rank 0 blocked on other ranks
  std::optional<StepPhases> phase_ms;
  std::optional<double> final_loss;

  // Epochs (--epochs): the final model's test accuracy as a fraction.
  std::optional<double> test_accuracy;
  std::optional<int64_t> test_correct;
  std::optional<int64_t> test_total;
  std::optional<double> train_loss;     // of the last epoch
  std::optional<double> wall_seconds;   // joining the job to the end
  std::optional<double> train_seconds;  // in training loops only
  std::optional<int64_t> images_trained;
  std::optional<int64_t> skipped_steps;  // float16 overflows
  std::optional<double> loss_scale;
  std::optional<std::string> parameter_checksum;

  // Every other key of the object, as written.
  nlohmann::json extra = nlohmann::json::object();
};

// The "result" object: the fields that are set, and `extra`'s keys.
nlohmann::json ToJson(const TrainResult& result);

// Reads a "result" object. `source` names where it came from (a file) in
// errors: kInvalidArgument naming the source and the key
// ("/tmp/x/result.json: result.step_ms is \"fast\", not a number") when a
// key has the wrong type or images_per_second is missing.
StatusOr<TrainResult> TrainResultFromJson(const nlohmann::json& result,
                                          const std::string& source);

// The same from a whole --json file's contents ({"tool", "config",
// "result", ...}): kInvalidArgument when it has no "result" object.
StatusOr<TrainResult> TrainResultOfJob(const nlohmann::json& job,
                                       const std::string& source);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_TRAIN_RESULT_H_
