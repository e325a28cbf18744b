#include "environment.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "kolo/build_info.h"

#ifndef KOLO_SOURCE_DIR
#define KOLO_SOURCE_DIR ""
#endif

namespace kolo::bench {
namespace {

std::string SingleQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

// First line of a command's output, or "unknown".
std::string CommandOutput(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    if (fgets(buffer, sizeof(buffer), pipe) != nullptr) out = buffer;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
    out.pop_back();
  }
  return out.empty() ? "unknown" : out;
}

}  // namespace

nlohmann::json Environment(const std::string& peer_python,
                           const std::string& peer_torch) {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  const std::string& libtorch = BuildInfo().torch_version;
  nlohmann::json out = {
      {"cpu_model", cpu},
      {"cores", std::thread::hardware_concurrency()},
      {"kernel", CommandOutput("uname -r 2>/dev/null")},
      {"kolo_commit", CommandOutput("git -C " + SingleQuoted(KOLO_SOURCE_DIR) +
                                    " rev-parse --short HEAD 2>/dev/null")},
      // What kolo-train (kolo, and --no-kolo's plain LibTorch) runs on,
      // whichever package it came from; not what a package manager holds.
      {"libtorch", libtorch.empty() ? "none" : libtorch},
  };
  if (!peer_python.empty()) {
    out["peer_python"] = peer_python;
    out["peer_torch"] = peer_torch.empty() ? "not installed" : peer_torch;
  }
  return out;
}

}  // namespace kolo::bench
