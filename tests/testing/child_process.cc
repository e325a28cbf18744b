#include "testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <regex>
#include <sstream>

namespace kolo::testing {

using Clock = std::chrono::steady_clock;

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::perror("pipe2");
    return;
  }
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv;
  for (std::string& arg : args) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  start_ = Clock::now();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    unsetenv("KOLO_BACKEND");
    for (const auto& [name, value] : env)
      setenv(name.c_str(), value.c_str(), 1);
    execv(c_argv[0], c_argv.data());
    _exit(126);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void ChildProcess::Signal(int signal) {
  start_ = Clock::now();
  kill(pid_, signal);
}

RunResult ChildProcess::Wait(std::chrono::seconds limit) {
  RunResult result;
  const Clock::time_point deadline = Clock::now() + limit;
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(pid_, SIGKILL);
      break;
    }
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0)
      continue;
    for (const pollfd& entry : fds) {
      if (entry.revents == 0) continue;
      const bool is_out = entry.fd == out_fd_;
      char buffer[4096];
      ssize_t n = read(entry.fd, buffer, sizeof(buffer));
      if (n > 0) {
        (is_out ? result.out : result.err)
            .append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(entry.fd);
        (is_out ? out_fd_ : err_fd_) = -1;
      }
    }
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  result.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

std::string Describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " +
         std::to_string(r.signal) + (r.timed_out ? " (timed out)" : "") +
         "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  return lines;
}

int CountMatches(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                    std::sregex_iterator()));
}

}  // namespace kolo::testing
