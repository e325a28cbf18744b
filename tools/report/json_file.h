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

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_JSON_FILE_H_
