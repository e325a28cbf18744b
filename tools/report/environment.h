// Where a benchmark's figures were measured, recorded beside them so that a
// report can tell runs from different machines or builds apart.
#ifndef KOLO_TOOLS_REPORT_ENVIRONMENT_H_
#define KOLO_TOOLS_REPORT_ENVIRONMENT_H_

#include <nlohmann/json.hpp>

namespace kolo::bench {

// {"cpu_model", "cores", "kernel", "kolo_commit", "libtorch",
// "python3_torch"}; what cannot be found reads "unknown". Runs a few short
// commands (uname, git, dpkg-query), so call it once per run, not per row.
nlohmann::json Environment();

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_ENVIRONMENT_H_
