// Writing a benchmark's results: never a half-written file, even when the
// run is killed (the contents go to PATH.tmp, then are renamed over PATH,
// and a rename within one directory is atomic).
#ifndef KOLO_TOOLS_REPORT_JSON_FILE_H_
#define KOLO_TOOLS_REPORT_JSON_FILE_H_

#include <nlohmann/json.hpp>

#include <string>

#include "kolo/status.h"

namespace kolo::bench {

// Writes `contents` to `path` through PATH.tmp. Errors name the path and
// `flag`, the option the path came from ("--json", "-o").
Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           const std::string& flag);

// `json`, indented, through WriteFileAtomically; errors name --json.
Status WriteJsonFile(const std::string& path, const nlohmann::json& json);

// Adds `record` to the array of records in `path`, so one file collects the
// runs a report is drawn from. A missing file starts a new array; a file
// holding one object (what kolo-bench wrote before it appended) becomes the
// array's first record; anything else is refused rather than overwritten.
// Written through WriteJsonFile, so the file is never half-written.
Status AppendJsonRecord(const std::string& path, nlohmann::json record);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_JSON_FILE_H_
