#include "job_runner.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "json_file.h"
#include "progress_line.h"
#include "sibling_tools.h"

namespace kolo::bench {

using nlohmann::json;

StatusOr<JobOutput> RunJob(const std::vector<std::string>& command,
                           const std::string& json_path, const std::string& log,
                           JobJson expect) {
  JobOutput job;
  KOLO_ASSIGN_OR_RETURN(job.output, RunLogged(command, json_path, log));
  std::ifstream in(json_path);
  job.json = json::parse(in, nullptr, /*allow_exceptions=*/false);
  const bool has_result = job.json.is_object() && job.json.contains("result") &&
                          job.json["result"].is_object();
  const bool records =
      job.json.is_array() && !job.json.empty() && job.json.back().is_object();
  const bool wanted = expect == JobJson::kRecords  ? records
                      : expect == JobJson::kResult ? has_result
                                                   : job.json.is_object();
  if (!wanted) {
    return Internal(fmt::format("{} wrote no {}JSON to {}:{}", command.front(),
                                expect == JobJson::kResult    ? "result "
                                : expect == JobJson::kRecords ? "record "
                                                              : "",
                                json_path, OutputTail(job.output)));
  }
  return job;
}

StatusOr<TrainResult> ReadTimedResult(const json& job,
                                      const std::string& output) {
  StatusOr<TrainResult> result = TrainResultOfJob(job, "its JSON");
  if (!result.ok()) return JobError(output, result.status().message());
  for (auto [key, value] : {std::pair<const char*, std::optional<double>>{
                                "images_per_second", result->images_per_second},
                            {"step_ms", result->step_ms}}) {
    if (!value || !(*value > 0) || !std::isfinite(*value)) {
      return JobError(output,
                      fmt::format("result.{} is missing or not positive", key));
    }
  }
  return result;
}

Status RunRepeats(
    const std::vector<std::string>& labels, int32_t repeat,
    const std::function<StatusOr<std::string>(size_t, int32_t)>& run) {
  RunsProgress progress(static_cast<int64_t>(labels.size()) * repeat);
  for (int32_t r = 0; r < repeat; ++r) {
    for (size_t job = 0; job < labels.size(); ++job) {
      progress.Start(fmt::format("{} repeat {}", labels[job], r + 1));
      StatusOr<std::string> line = run(job, r);
      if (!line.ok()) {
        const std::string named = labels[job] + ": ";
        if (line.status().message().rfind(named, 0) == 0) return line.status();
        return line.status().WithContext(labels[job]);
      }
      progress.Print(*line);
    }
  }
  progress.Finish();
  return Status::Ok();
}

StatusOr<json> FinishRecord(json record, const std::string& json_path) {
  if (!json_path.empty()) {
    KOLO_RETURN_IF_ERROR(AppendJsonRecord(json_path, record));
  }
  return record;
}

void PrintHeader(const Table& table) {
  for (const std::string& line : table.HeaderLines()) fmt::print("{}\n", line);
}

std::string OutputTail(const std::string& output, int lines) {
  std::vector<std::string> all;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string tail;
  const size_t first =
      all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  for (size_t i = first; i < all.size(); ++i) tail += "\n  " + all[i];
  return tail;
}

Status JobError(const std::string& output, const std::string& what) {
  return Internal(
      fmt::format("{}; the job's output ends:{}", what, OutputTail(output)));
}

}  // namespace kolo::bench
