#include "peer_python.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "environment.h"
#include "kolo/build_info.h"
#include "sibling_tools.h"

// The interpreter the build was configured with (tools/kolo-bench/
// CMakeLists.txt, from the cache variable KOLO_PYTHON); empty for none.
#ifndef KOLO_PEER_PYTHON
#define KOLO_PEER_PYTHON ""
#endif

namespace kolo::bench {
namespace {

// Prints torch's version, then whether CPU float16 autocast and a CPU
// GradScaler work, as torch_ddp.py's check_precision() tests them: torch
// 1.13 warns and turns the autocast off instead of failing.
constexpr char kProbe[] = R"(import warnings, torch
print(torch.__version__)
try:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.autocast("cpu", dtype=torch.float16):
            pass
        torch.amp.GradScaler("cpu")
    print("cpu-fp16")
except Exception:
    print("no-cpu-fp16")
)";

}  // namespace

std::string FindPython(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (!std::string(KOLO_PEER_PYTHON).empty()) return KOLO_PEER_PYTHON;
  // Debian's python3-torch installs into the system interpreter, which a
  // python3 earlier on PATH (pyenv, a virtualenv) may not see.
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                     : "python3";
}

void AddPythonFlag(CLI::App* cmd, std::string* python) {
  cmd->add_option("--python", *python,
                  fmt::format("the Python interpreter of the PyTorch peers "
                              "(default: {})",
                              FindPython("")));
}

std::string PeerPython::Missing() const {
  if (!torch_version.empty()) return "";
  return "not installed (" + path +
         " cannot import torch; run scripts/setup.sh, which makes the "
         "project's .venv with it, or name an interpreter with --python)";
}

std::string PeerPython::Missing(const std::string& script) const {
  std::string missing = Missing();
  if (missing.empty() && !std::filesystem::exists(script)) {
    missing = "script not found: " + script;
  }
  return missing;
}

const PeerPython& TorchPeer::Probe(const std::string& python,
                                   const std::string& script) {
  if (!python_) {
    python_ = ProbePeerPython(python);
    missing_ = python_->Missing(script);
  }
  return *python_;
}

PeerPython ParsePeerProbe(const std::string& python, bool ran,
                          const std::string& output) {
  PeerPython peer;
  peer.path = python;
  if (!ran) return peer;
  std::istringstream lines(output);
  std::string version, fp16;
  std::getline(lines, version);
  std::getline(lines, fp16);
  peer.torch_version = version;
  peer.cpu_fp16 = fp16 == "cpu-fp16";
  return peer;
}

PeerPython ProbePeerPython(const std::string& python) {
  const std::string command =
      ShellQuote(python) + " -c " + ShellQuote(kProbe) + " 2>/dev/null";
  std::string output;
  int status = -1;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    status = pclose(pipe);
  }
  const bool ran = status != -1 && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0 && !output.empty();
  return ParsePeerProbe(python, ran, output);
}

std::string KoloTorchVersion() {
  const std::string& version = BuildInfo().torch_version;
  return version.empty() ? "none" : version;
}

Status CheckPeerPrecision(const std::string& precision, const PeerPython& peer,
                          const std::string& who) {
  if (precision != "fp16" || peer.torch_version.empty() || peer.cpu_fp16) {
    return Status::Ok();
  }
  return InvalidArgument(fmt::format(
      "--precision fp16: {} runs in {}, whose torch {} has no CPU float16 "
      "autocast (torch 2.x has; scripts/setup.sh makes .venv with one, or "
      "pass --python); leave {} out or use bf16",
      who, peer.path, peer.torch_version, who));
}

std::string TorchVersionsLine(const PeerPython* peer) {
  // kolo-train's jobs (kolo and kolo-train --no-kolo) and the checkpoint
  // worker come from kolo-bench's own build.
  std::string line =
      "# torch: kolo's side built with LibTorch " + KoloTorchVersion();
  if (peer == nullptr) return line;
  if (peer->torch_version.empty()) {
    return line + "; the PyTorch peers did not run (" + peer->path +
           " cannot import torch)";
  }
  return line + "; the PyTorch peers ran torch " + peer->torch_version + " (" +
         peer->path + ")";
}

nlohmann::json RunEnvironment(const PeerPython* peer) {
  return peer == nullptr ? Environment()
                         : Environment(peer->path, peer->torch_version);
}

}  // namespace kolo::bench
