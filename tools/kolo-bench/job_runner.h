// How kolo-bench runs its jobs. Every measuring command (train, zero,
// pipeline, checkpoint) has the same skeleton: a table of jobs, each a
// program started the way a user would (kolorun -np N kolo-train ..., a
// PyTorch peer) with its output in a log and its JSON read back; the table
// run --repeat times, one repeat through every job before the next, with a
// progress line; then a table printed from the measurements and a record
// returned and, with --json, appended to a file. This file holds the parts
// that are the same; each command keeps its job table and row reader.
#ifndef KOLO_TOOLS_KOLO_BENCH_JOB_RUNNER_H_
#define KOLO_TOOLS_KOLO_BENCH_JOB_RUNNER_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "table.h"
#include "train_result.h"

namespace kolo::bench {

// What one job printed and the JSON it wrote.
struct JobOutput {
  nlohmann::json json;
  std::string output;
};

// What a job's JSON must be: an object with a "result" object (kolo-train's
// benchmarks and epochs, the PyTorch peers), any object (kolo-train
// --elastic's report, a Python script's line), or a non-empty array of
// objects (the file a --json of kolo-bench collectives appends to).
enum class JobJson { kResult, kObject, kRecords };

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

// Runs the jobs named `labels` `repeat` times, one repeat through all of
// them before the next, so that drift on a noisy machine spreads over every
// configuration alike. On a terminal a progress line says which job is on
// ("<label> repeat <r>") and how long the rest will take. `run(job, repeat)`
// (repeat from 0) runs one and returns the line that reports it, printed
// above the progress line; its error ends the runs, prefixed with the job's
// label unless its message already starts with it.
Status RunRepeats(
    const std::vector<std::string>& labels, int32_t repeat,
    const std::function<StatusOr<std::string>(size_t, int32_t)>& run);

// A command's record: appended to `json_path` when one is given (one file
// collects the runs a report is drawn from), then returned.
StatusOr<nlohmann::json> FinishRecord(nlohmann::json record,
                                      const std::string& json_path);

// Prints a table's header lines.
void PrintHeader(const Table& table);

// The last `lines` lines of `output`, each indented on a line of its own:
// how an error quotes a job.
std::string OutputTail(const std::string& output, int lines = 8);

// kInternal: "`what`; the job's output ends:" and the OutputTail of the
// job's `output`: how a command reports a job whose result is wrong.
Status JobError(const std::string& output, const std::string& what);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_JOB_RUNNER_H_
