#include "remote.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include <cstring>

#include "hosts.h"
#include "launcher.h"

namespace kolo {
namespace kolorun {
namespace {

void ReplaceAll(std::string* text, const std::string& from,
                const std::string& to) {
  size_t at = 0;
  while ((at = text->find(from, at)) != std::string::npos) {
    text->replace(at, from.size(), to);
    at += to.size();
  }
}

std::vector<std::string> SshCommand(const LaunchOptions& options,
                                    const std::string& host) {
  std::vector<std::string> argv = {
      "ssh",
      "-o",
      "BatchMode=yes",
      "-o",
      "ConnectTimeout=" + std::to_string(options.start_timeout_seconds),
      "-o",
      "StrictHostKeyChecking=accept-new",
  };
  if (options.ssh_port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(options.ssh_port));
  }
  if (!options.ssh_identity_file.empty()) {
    argv.push_back("-i");
    argv.push_back(options.ssh_identity_file);
  }
  if (!options.ssh_config_file.empty()) {
    argv.push_back("-F");
    argv.push_back(options.ssh_config_file);
  }
  argv.push_back(host);
  return argv;
}

}  // namespace

std::vector<std::string> RemoteCommand(const LaunchOptions& options,
                                       const std::string& host,
                                       const std::vector<std::string>& agent) {
  if (IsLocalHost(host)) return agent;
  const std::string command = JoinCommand(agent);
  if (options.remote_shell.empty()) {
    // ssh hands its arguments to the remote user's shell as one string.
    std::vector<std::string> argv = SshCommand(options, host);
    argv.push_back(command);
    return argv;
  }
  std::vector<std::string> argv;
  bool has_command = false;
  for (std::string piece : SplitOnWhitespace(options.remote_shell)) {
    ReplaceAll(&piece, "{host}", host);
    if (piece.find("{command}") != std::string::npos) {
      ReplaceAll(&piece, "{command}", command);
      has_command = true;
    }
    argv.push_back(std::move(piece));
  }
  if (!has_command) argv.insert(argv.end(), agent.begin(), agent.end());
  return argv;
}

StatusOr<std::string> SelfPath() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    return Internal(std::string("cannot read /proc/self/exe: ") +
                    std::strerror(errno));
  }
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace kolorun
}  // namespace kolo
