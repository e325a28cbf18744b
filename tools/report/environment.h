// Where a benchmark's figures were measured, recorded beside them so that a
// report can tell runs from different machines or builds apart.
#ifndef KOLO_TOOLS_REPORT_ENVIRONMENT_H_
#define KOLO_TOOLS_REPORT_ENVIRONMENT_H_

#include <nlohmann/json.hpp>
#include <string>

namespace kolo::bench {

// {"cpu_model", "cores", "kernel", "kolo_commit", "libtorch"}: "libtorch"
// is the LibTorch kolo was built with (kolo::BuildInfo(); "none" without
// one). With `peer_python` (the interpreter a run's PyTorch peers ran in)
// also "peer_python" and "peer_torch", its torch.__version__
// (`peer_torch`, which the caller has probed; empty reads "not
// installed"). What cannot be found reads "unknown". Runs a few short
// commands (uname, git), so call it once per run, not per row.
nlohmann::json Environment(const std::string& peer_python = "",
                           const std::string& peer_torch = "");

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_ENVIRONMENT_H_
