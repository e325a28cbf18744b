// How kolo-bench runs one job: a program started the way a user would
// (kolorun -np N kolo-train ..., a PyTorch peer), its output in a log, the
// JSON it wrote read back.
#ifndef KOLO_TOOLS_KOLO_BENCH_JOB_RUNNER_H_
#define KOLO_TOOLS_KOLO_BENCH_JOB_RUNNER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "train_result.h"

namespace kolo::bench {

// What one job printed and the JSON it wrote.
struct JobOutput {
  nlohmann::json json;
  std::string output;
};

// What a job's JSON must be: an object with a "result" object (kolo-train's
// benchmarks and epochs, the PyTorch peers), or any object (kolo-train
// --elastic's report).
enum class JobJson { kResult, kObject };

// Runs `command` with its output in `log` and reads the JSON it wrote to
// `json_path`: kInternal quoting the last lines of its output when it
// failed, wrote nothing, or wrote something that is not what `expect` says.
StatusOr<JobOutput> RunJob(const std::vector<std::string>& command,
                           const std::string& json_path, const std::string& log,
                           JobJson expect = JobJson::kResult);

// The result of a --benchmark-steps job (kolo-train's or a peer's JSON,
// `job`) through the one schema, with a positive, finite images_per_second
// and step_ms; kInternal naming the key and quoting the job's `output`
// otherwise.
StatusOr<TrainResult> ReadTimedResult(const nlohmann::json& job,
                                      const std::string& output);

// The last `lines` lines of `output`, each indented on a line of its own:
// how an error quotes a job.
std::string OutputTail(const std::string& output, int lines = 8);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_JOB_RUNNER_H_
