// The operating-system side of kolorun: finding a program, starting a child
// with its output on pipes, and receiving signals as readable file
// descriptors so that one poll() loop can wait for output, child exits and
// Ctrl-C at once.
#ifndef KOLO_TOOLS_KOLORUN_PROCESS_H_
#define KOLO_TOOLS_KOLORUN_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {
namespace kolorun {

// Resolves `program` the way execvp does: a name with a '/' is taken as a
// path, any other is searched for in $PATH. Returns the path of an
// executable regular file, or kNotFound ("program 'foo' not found") /
// kInvalidArgument ("program './x' is not executable").
StatusOr<std::string> FindExecutable(const std::string& program);

// SIGINT, SIGTERM and SIGCHLD delivered through a signalfd.
//
// Contract: create it before the process starts any thread (the store
// server's), because the signals must be blocked in every thread for the
// signalfd to receive them; children started by SpawnChild get the original
// mask and default dispositions back.
//
// Thread-safety: one owner thread.
class SignalWatcher {
 public:
  static StatusOr<SignalWatcher> Create();
  ~SignalWatcher();
  SignalWatcher(SignalWatcher&& other) noexcept;
  SignalWatcher& operator=(SignalWatcher&&) = delete;
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  int fd() const { return fd_; }
  // The signals pending on fd(), in arrival order (SIGCHLDs may merge).
  std::vector<int> ReadPending();
  // The mask to give children: the one kolorun started with.
  const sigset_t& original_mask() const { return original_mask_; }

 private:
  SignalWatcher(int fd, const sigset_t& original_mask);

  int fd_ = -1;
  sigset_t original_mask_;
};

// The size of a pseudo-terminal kolorun gives a child (ChildSpec).
struct TerminalSize {
  uint16_t rows = 0;
  uint16_t columns = 0;  // 0: unknown
};

struct ChildSpec {
  std::string path;               // resolved by FindExecutable
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "K=V", the child's whole environment
  std::vector<int> cores;         // the CPUs it may run on; empty: any
  // Give the child a pipe as its stdin (Child::stdin_fd) instead of
  // /dev/null: a host's agent reads its orders there, and reads the pipe's
  // end as the sign that the launching kolorun is gone.
  bool stdin_pipe = false;
  // Give the child a pseudo-terminal of this size as its stdout instead of
  // a pipe (Child::stdout_fd is then the terminal's master side), because
  // programs redraw their progress in place only on a terminal. The
  // terminal is raw: the bytes the program writes arrive unchanged ('\n'
  // stays '\n'). Reading the master once the child has exited gives EIO
  // rather than end of file. Stderr stays a pipe.
  std::optional<TerminalSize> stdout_terminal;
};

// A started child. Its output pipes are non-blocking, and all of its pipes
// are close-on-exec.
struct Child {
  pid_t pid = -1;
  int stdin_fd = -1;  // the write end of its stdin, with stdin_pipe
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Forks and execs `spec` with stdin from /dev/null (or a pipe, with
// stdin_pipe) and stdout/stderr on new pipes (stdout on a pseudo-terminal,
// with stdout_terminal). The child leads a new process group (its pgid is its pid), so that
// signalling the group also reaches whatever the program starts, and it gets
// SIGKILL if kolorun dies, so that no rank outlives a killed launcher.
// Returns an error naming the program when exec fails; the child has then
// been reaped.
StatusOr<Child> SpawnChild(const ChildSpec& spec, const sigset_t& child_mask);

// Sends `signal` to the process group led by `pid` (a child of SpawnChild).
// A group whose members are all gone is silently skipped.
void SignalGroup(pid_t pid, int signal);

// "exited with code 3" or "was killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);
// The exit code a shell would report: the code, or 128 + the signal.
int ExitCodeOf(int wait_status);

// The environment of this process as "K=V" strings.
std::vector<std::string> CurrentEnvironment();

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_PROCESS_H_
