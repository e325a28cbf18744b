// Writing a benchmark's results: never a half-written file, even when the
// run is killed (the JSON goes to PATH.tmp, then is renamed over PATH).
#ifndef KOLO_TOOLS_REPORT_JSON_FILE_H_
#define KOLO_TOOLS_REPORT_JSON_FILE_H_

#include <nlohmann/json.hpp>

#include <string>

#include "kolo/status.h"

namespace kolo::bench {

// Errors name the path and the flag (--json) it came from.
Status WriteJsonFile(const std::string& path, const nlohmann::json& json);

// Adds `record` to the array of records in `path`, so one file collects the
// runs a report is drawn from. A missing file starts a new array; a file
// holding one object (what kolo-bench wrote before it appended) becomes the
// array's first record; anything else is refused rather than overwritten.
// Written through WriteJsonFile, so the file is never half-written.
Status AppendJsonRecord(const std::string& path, nlohmann::json record);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_JSON_FILE_H_
