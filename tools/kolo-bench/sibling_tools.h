// Where kolo-bench finds the programs it runs (kolorun, kolo-train, the
// PyTorch peers), and how it quotes their command lines for the shell.
#ifndef KOLO_TOOLS_KOLO_BENCH_SIBLING_TOOLS_H_
#define KOLO_TOOLS_KOLO_BENCH_SIBLING_TOOLS_H_

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::bench {

// `text` in single quotes, for /bin/sh.
std::string ShellQuote(const std::string& text);

// kolo-bench sits beside kolorun and kolo-train when installed (bin/) and
// one directory over in the build tree (build/tools/<tool>/): the path of
// `name` in the first place that has it, or the first place (so that the
// error names where it was looked for).
std::string FindTool(const std::string& name);

// A PyTorch peer's script (bench/peers/`file`: torch_ddp.py,
// torch_pipeline.py, torch_checkpoint.py), installed or in the source tree.
std::string FindPeerScript(const std::string& file);

// A Python script of the source tree at `relative`
// ("examples/python/synthetic_benchmark.py"), installed under share/kolo/
// or in the source tree.
std::string FindSourceScript(const std::string& relative);

// scripts/netns_cluster.sh, which makes clusters of network namespaces
// (kolo-bench soak's): installed or in the source tree.
std::string FindClusterScript();

// Runs `command` through /bin/sh with stdout and stderr in the file `log`,
// after removing `json_path` (the file the command is to write). Then:
// kInternal quoting the last lines of its output when it failed or wrote no
// `json_path`; otherwise everything it printed.
StatusOr<std::string> RunLogged(const std::vector<std::string>& command,
                                const std::string& json_path,
                                const std::string& log);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_SIBLING_TOOLS_H_
