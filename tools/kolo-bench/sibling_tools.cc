#include "sibling_tools.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef KOLO_SOURCE_DIR
#define KOLO_SOURCE_DIR ""
#endif

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;

fs::path ExecutableDir() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::current_path() : self.parent_path();
}

// The first of `candidates` that exists, or the first one (so the error
// names where it was looked for).
std::string FirstExisting(const std::vector<fs::path>& candidates) {
  for (const fs::path& p : candidates) {
    if (fs::exists(p)) return p.string();
  }
  return candidates.front().string();
}

}  // namespace

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string FindTool(const std::string& name) {
  const fs::path dir = ExecutableDir();
  return FirstExisting({dir / name, dir.parent_path() / name / name});
}

std::string FindPeerScript(const std::string& file) {
  const fs::path dir = ExecutableDir();
  return FirstExisting({dir.parent_path() / "share" / "kolo" / "peers" / file,
                        fs::path(KOLO_SOURCE_DIR) / "bench" / "peers" / file});
}

std::string FindSourceScript(const std::string& relative) {
  return FirstExisting(
      {ExecutableDir().parent_path() / "share" / "kolo" / relative,
       fs::path(KOLO_SOURCE_DIR) / relative});
}

std::string FindClusterScript() {
  const fs::path dir = ExecutableDir();
  return FirstExisting(
      {dir.parent_path() / "share" / "kolo" / "scripts" / "netns_cluster.sh",
       fs::path(KOLO_SOURCE_DIR) / "scripts" / "netns_cluster.sh"});
}

StatusOr<std::string> RunLogged(const std::vector<std::string>& command,
                                const std::string& json_path,
                                const std::string& log) {
  std::string line;
  for (const std::string& word : command) line += ShellQuote(word) + " ";
  line += "> " + ShellQuote(log) + " 2>&1";
  std::error_code ignored;
  fs::remove(json_path, ignored);
  const int status = std::system(line.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::string output = text.str();
  if (status == 0 && fs::exists(json_path)) return output;
  std::vector<std::string> lines;
  std::istringstream again(output);
  for (std::string l; std::getline(again, l);) lines.push_back(l);
  std::string tail;
  for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size();
       ++i) {
    tail += "\n  " + lines[i];
  }
  return Internal(
      fmt::format("`{}` failed (status {}){}:{}", command.front(), status,
                  status == 0 ? " without writing " + json_path : "", tail));
}

}  // namespace kolo::bench
