#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

extern char** environ;

namespace kolo {
namespace kolorun {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

bool IsExecutableFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

void CloseIfOpen(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Opens a pseudo-terminal of `size` for a child's stdout: `fds[0]` is the
// master, kolorun's end, read like a pipe's; `fds[1]` the child's end.
// Both are close-on-exec, as pipe2(O_CLOEXEC) would make them. Raw mode
// turns off the output processing that would make "\r\n" of every '\n'.
// Returns false with errno set.
bool OpenTerminal(const TerminalSize& size, int fds[2]) {
  fds[0] = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fds[0] < 0) return false;
  char name[128];
  if (grantpt(fds[0]) != 0 || unlockpt(fds[0]) != 0 ||
      ptsname_r(fds[0], name, sizeof(name)) != 0) {
    return false;
  }
  fds[1] = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fds[1] < 0) return false;
  termios mode;
  if (tcgetattr(fds[1], &mode) != 0) return false;
  cfmakeraw(&mode);
  if (tcsetattr(fds[1], TCSANOW, &mode) != 0) return false;
  winsize window{};
  window.ws_row = size.rows;
  window.ws_col = size.columns;
  return ioctl(fds[1], TIOCSWINSZ, &window) == 0;
}

// Marks every descriptor from 3 up close-on-exec, so that a worker inherits
// none of kolorun's (the store's sockets, other workers' pipes) whatever
// flags the code that opened them used. Runs in the child between fork and
// exec, where only async-signal-safe calls are allowed.
void MarkInheritedDescriptorsCloexec() {
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  struct rlimit limit;
  int max_fd = 1 << 16;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < static_cast<rlim_t>(max_fd)) {
    max_fd = static_cast<int>(limit.rlim_cur);
  }
  for (int fd = 3; fd < max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// What the child needs between fork and exec, all prepared before fork.
struct ChildSetup {
  pid_t parent = -1;
  const char* path = nullptr;
  char* const* argv = nullptr;
  // /bin/sh, path, argv[1...]: for a script without a "#!" line, which
  // execve rejects with ENOEXEC and execvp hands to the shell.
  char* const* shell_argv = nullptr;
  char* const* envp = nullptr;
  int in_fd = -1;  // its stdin: /dev/null or the read end of a pipe
  int out_fd = -1;
  int err_fd = -1;
  int exec_error_fd = -1;  // the child writes its errno here if exec fails
  const sigset_t* mask = nullptr;
  const cpu_set_t* cores = nullptr;  // null: keep kolorun's affinity
};

// The child's half of SpawnChild. It calls only async-signal-safe
// functions, since kolorun has threads (the store server's) and fork copied
// only this one.
[[noreturn]] void RunChild(const ChildSetup& setup) {
  auto fail = [&setup](int error) {
    ssize_t ignored = write(setup.exec_error_fd, &error, sizeof(error));
    (void)ignored;
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(errno);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
  // kolorun may have died between fork and prctl; then nobody would kill us.
  if (getppid() != setup.parent) _exit(1);
  if (dup2(setup.in_fd, STDIN_FILENO) < 0 ||
      dup2(setup.out_fd, STDOUT_FILENO) < 0 ||
      dup2(setup.err_fd, STDERR_FILENO) < 0) {
    fail(errno);
  }
  if (setup.cores != nullptr &&
      sched_setaffinity(0, sizeof(cpu_set_t), setup.cores) != 0) {
    fail(errno);
  }
  MarkInheritedDescriptorsCloexec();
  // kolorun ignores SIGPIPE and an ignored signal stays ignored across exec;
  // the program expects the default.
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_DFL;
  for (int signal : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) {
    sigaction(signal, &action, nullptr);
  }
  sigprocmask(SIG_SETMASK, setup.mask, nullptr);
  execve(setup.path, setup.argv, setup.envp);
  if (errno == ENOEXEC) execve("/bin/sh", setup.shell_argv, setup.envp);
  fail(errno);
  _exit(127);  // not reached; fail() does not return
}

// The argument and environment vectors execve takes, pointing into `spec`
// (which must outlive them), all built before fork.
struct ExecArguments {
  explicit ExecArguments(const ChildSpec& spec) {
    for (const std::string& arg : spec.argv)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    shell_argv = {const_cast<char*>("/bin/sh"),
                  const_cast<char*>(spec.path.c_str())};
    for (size_t i = 1; i < spec.argv.size(); ++i) shell_argv.push_back(argv[i]);
    shell_argv.push_back(nullptr);
    for (const std::string& var : spec.env)
      envp.push_back(const_cast<char*>(var.c_str()));
    envp.push_back(nullptr);
  }

  std::vector<char*> argv;
  // /bin/sh, path, argv[1...]: for a script without a "#!" line.
  std::vector<char*> shell_argv;
  std::vector<char*> envp;
};

// The descriptors between kolorun and a child it starts: [0] reads, [1]
// writes. The destructor closes whatever Release() did not hand over.
struct ChildPipes {
  int in[2] = {-1, -1};    // stdin: /dev/null (in[0] only) or a pipe
  int out[2] = {-1, -1};   // stdout: a pipe or a pseudo-terminal
  int err[2] = {-1, -1};   // stderr
  int exec[2] = {-1, -1};  // the child's errno, if exec fails

  ChildPipes() = default;
  ChildPipes(const ChildPipes&) = delete;
  ChildPipes& operator=(const ChildPipes&) = delete;
  ~ChildPipes() {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1],
                    &exec[0], &exec[1]}) {
      CloseIfOpen(fd);
    }
  }

  // All of them close-on-exec; an error names the program.
  Status Open(const ChildSpec& spec) {
    if (spec.stdin_pipe) {
      if (pipe2(in, O_CLOEXEC) != 0) in[0] = in[1] = -1;
    } else {
      in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    if (spec.stdout_terminal && !OpenTerminal(*spec.stdout_terminal, out)) {
      return Internal("cannot open a pseudo-terminal for '" + spec.path +
                      "': " + ErrnoText(errno));
    }
    if (in[0] < 0 || (!spec.stdout_terminal && pipe2(out, O_CLOEXEC) != 0) ||
        pipe2(err, O_CLOEXEC) != 0 || pipe2(exec, O_CLOEXEC) != 0) {
      return Internal("cannot create pipes for '" + spec.path +
                      "': " + ErrnoText(errno));
    }
    return Status::Ok();
  }

  // In kolorun, after fork: the child holds its ends now.
  void CloseChildEnds() {
    CloseIfOpen(&out[1]);
    CloseIfOpen(&err[1]);
    CloseIfOpen(&exec[1]);
    CloseIfOpen(&in[0]);
  }

  // The errno of a failed exec, or 0 once the exec pipe closed on a
  // successful one.
  int WaitForExec() {
    int exec_errno = 0;
    ssize_t n;
    do {
      n = read(exec[0], &exec_errno, sizeof(exec_errno));
    } while (n < 0 && errno == EINTR);
    CloseIfOpen(&exec[0]);
    return n > 0 ? exec_errno : 0;
  }

  // The started child, with kolorun's ends, its output non-blocking.
  Child Release(pid_t pid) {
    for (int fd : {out[0], err[0]}) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    Child child;
    child.pid = pid;
    child.stdin_fd = std::exchange(in[1], -1);
    child.stdout_fd = std::exchange(out[0], -1);
    child.stderr_fd = std::exchange(err[0], -1);
    return child;
  }
};

}  // namespace

StatusOr<std::string> FindExecutable(const std::string& program) {
  if (program.empty()) return InvalidArgument("program name is empty");
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), F_OK) != 0) {
      return NotFound("program '" + program + "' not found");
    }
    if (!IsExecutableFile(program)) {
      return InvalidArgument("program '" + program + "' is not executable");
    }
    return program;
  }
  const char* path_env = std::getenv("PATH");
  // execvp's default search path when PATH is unset.
  std::string search = path_env != nullptr ? path_env : "/bin:/usr/bin";
  size_t begin = 0;
  while (begin <= search.size()) {
    size_t end = search.find(':', begin);
    if (end == std::string::npos) end = search.size();
    std::string dir = search.substr(begin, end - begin);
    // An empty entry means the current directory, as in execvp.
    std::string candidate =
        (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (IsExecutableFile(candidate)) return candidate;
    begin = end + 1;
  }
  return NotFound("program '" + program + "' not found");
}

StatusOr<SignalWatcher> SignalWatcher::Create() {
  sigset_t watched;
  sigemptyset(&watched);
  for (int signal : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&watched, signal);
  // A shell starts background jobs with SIGINT ignored, and an ignored signal
  // is discarded before any signalfd could see it.
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_DFL;
  for (int signal : {SIGINT, SIGTERM}) sigaction(signal, &action, nullptr);

  sigset_t original;
  if (sigprocmask(SIG_BLOCK, &watched, &original) != 0) {
    return Internal("cannot block signals: " + ErrnoText(errno));
  }
  int fd = signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) {
    int error = errno;
    sigprocmask(SIG_SETMASK, &original, nullptr);
    return Internal("cannot create a signalfd: " + ErrnoText(error));
  }
  return SignalWatcher(fd, original);
}

SignalWatcher::SignalWatcher(int fd, const sigset_t& original_mask)
    : fd_(fd), original_mask_(original_mask) {}

SignalWatcher::SignalWatcher(SignalWatcher&& other) noexcept
    : fd_(other.fd_), original_mask_(other.original_mask_) {
  other.fd_ = -1;
}

SignalWatcher::~SignalWatcher() {
  if (fd_ >= 0) close(fd_);
}

std::vector<int> SignalWatcher::ReadPending() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (true) {
    ssize_t n = read(fd_, &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) {
      signals.push_back(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EAGAIN: nothing more pending
  }
  return signals;
}

StatusOr<Child> SpawnChild(const ChildSpec& spec, const sigset_t& child_mask) {
  const ExecArguments exec(spec);
  ChildPipes pipes;
  KOLO_RETURN_IF_ERROR(pipes.Open(spec));
  cpu_set_t cores;
  CPU_ZERO(&cores);
  for (int core : spec.cores) CPU_SET(core, &cores);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    return Internal("cannot fork for '" + spec.path + "': " + ErrnoText(errno));
  }
  if (pid == 0) {
    ChildSetup setup;
    setup.parent = parent;
    setup.path = spec.path.c_str();
    setup.argv = exec.argv.data();
    setup.shell_argv = exec.shell_argv.data();
    setup.envp = exec.envp.data();
    setup.in_fd = pipes.in[0];
    setup.out_fd = pipes.out[1];
    setup.err_fd = pipes.err[1];
    setup.exec_error_fd = pipes.exec[1];
    setup.mask = &child_mask;
    setup.cores = spec.cores.empty() ? nullptr : &cores;
    RunChild(setup);
  }
  // Also set the group here, so that it exists before anyone signals it. The
  // child may have exec'd already (EACCES); it set its group itself then.
  setpgid(pid, pid);
  pipes.CloseChildEnds();
  const int exec_errno = pipes.WaitForExec();
  if (exec_errno != 0) {
    int ignored;
    while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    return Internal("cannot execute '" + spec.path +
                    "': " + ErrnoText(exec_errno));
  }
  return pipes.Release(pid);
}

void SignalGroup(pid_t pid, int signal) {
  if (pid > 0) kill(-pid, signal);
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    int signal = WTERMSIG(wait_status);
    const char* name = strsignal(signal);
    return "was killed by signal " + std::to_string(signal) + " (" +
           (name != nullptr ? name : "unknown") + ")";
  }
  return "stopped with status " + std::to_string(wait_status);
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> vars;
  for (char** var = environ; var != nullptr && *var != nullptr; ++var) {
    vars.emplace_back(*var);
  }
  return vars;
}

}  // namespace kolorun
}  // namespace kolo
