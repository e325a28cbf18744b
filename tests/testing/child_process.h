// ChildProcess: runs a program with its stdout and stderr captured, for the
// multi-process tests. Every wait is bounded; a child still running when
// its ChildProcess is destroyed is killed, so a failing test leaves nothing
// behind.
#ifndef KOLO_TESTS_TESTING_CHILD_PROCESS_H_
#define KOLO_TESTS_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace kolo::testing {

struct RunResult {
  bool timed_out = false;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
  double seconds = 0;  // from start, or from the last Signal()
};

class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv; `env` entries are set in the child,
  // and KOLO_BACKEND is cleared unless `env` sets it.
  explicit ChildProcess(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `signal` and restarts the clock RunResult::seconds measures.
  void Signal(int signal);
  // Collects output until the child exits, or kills it after `limit`.
  RunResult Wait(std::chrono::seconds limit = std::chrono::seconds(60));

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::chrono::steady_clock::time_point start_;
};

inline RunResult RunProgram(
    const std::vector<std::string>& argv,
    const std::map<std::string, std::string>& env = {},
    std::chrono::seconds limit = std::chrono::seconds(60)) {
  return ChildProcess(argv, env).Wait(limit);
}

std::vector<std::string> Lines(const std::string& text);

// How many times the regular expression `pattern` matches in `text`.
int CountMatches(const std::string& text, const std::string& pattern);

// "exit 3 (timed out)" and both outputs, for failure messages.
std::string Describe(const RunResult& result);

// Whether `program` is an executable file in a directory of $PATH.
bool OnPath(const std::string& program);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_CHILD_PROCESS_H_
