#include "environment.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

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

nlohmann::json Environment() {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return {
      {"cpu_model", cpu},
      {"cores", std::thread::hardware_concurrency()},
      {"kernel", CommandOutput("uname -r 2>/dev/null")},
      {"kolo_commit", CommandOutput("git -C " + SingleQuoted(KOLO_SOURCE_DIR) +
                                    " rev-parse --short HEAD 2>/dev/null")},
      {"libtorch", CommandOutput("dpkg-query -W -f='${Version}' libtorch-dev "
                                 "2>/dev/null")},
      {"python3_torch", CommandOutput("dpkg-query -W -f='${Version}' "
                                      "python3-torch 2>/dev/null")},
  };
}

}  // namespace kolo::bench
