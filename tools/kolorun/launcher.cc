#include "launcher.h"

#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <utility>

namespace kolo {
namespace kolorun {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// "\x1b[K" erases from the cursor to the end of the line.
constexpr const char* kEraseToEnd = "\x1b[K";
constexpr const char* kEraseLine = "\r\x1b[K";

bool NeedsQuoting(const std::string& arg) {
  if (arg.empty()) return true;
  return arg.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
             "_-+=./:,@%") != std::string::npos;
}

std::string Quote(const std::string& arg) {
  if (!NeedsQuoting(arg)) return arg;
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted.push_back(c);
    }
  }
  quoted.push_back('\'');
  return quoted;
}

}  // namespace

std::string JoinCommand(const std::vector<std::string>& args) {
  std::string joined;
  for (const std::string& arg : args) {
    if (!joined.empty()) joined.push_back(' ');
    joined += Quote(arg);
  }
  return joined;
}

void DrawInPlaceThrough(int terminal_fd, ProcessSpec* spec) {
  const char* term = std::getenv("TERM");
  if (!isatty(terminal_fd) ||
      (term != nullptr && std::strcmp(term, "dumb") == 0))
    return;
  winsize window{};
  TerminalSize size;
  if (ioctl(terminal_fd, TIOCGWINSZ, &window) == 0) {
    size.rows = window.ws_row;
    // Never narrower than a short progress line, though it wraps then.
    const size_t tag = spec->stdout_prefix.size();
    size.columns = window.ws_col > tag + 20
                       ? static_cast<uint16_t>(window.ws_col - tag)
                       : window.ws_col;
  }
  spec->child.stdout_terminal = size;
}

Launcher::Launcher(LauncherOptions options, SignalWatcher* signals)
    : options_(std::move(options)), signals_(signals) {}

int Launcher::Run(const std::vector<ProcessSpec>& specs) {
  // Process addresses must stay put: streams are drained through pointers.
  processes_.reserve(specs.size());
  for (const ProcessSpec& spec : specs) {
    // A signal or a failed start stops the launch; what started is then
    // wound down like any failed job.
    HandleSignals();
    if (phase_ != Phase::kRunning) break;
    Start(spec);
  }

  stop_fd_open_ = options_.stop_fd >= 0;
  std::vector<pollfd> fds;
  std::vector<Stream*> polled;
  while (AnyRunning() || AnyStreamOpen()) {
    TimePoint now = steady_clock::now();
    AdvanceDeadlines(now);
    if (!AnyRunning() && !AnyStreamOpen()) break;

    fds.clear();
    polled.clear();
    fds.push_back({signals_->fd(), POLLIN, 0});
    // Polled with a negative descriptor (ignored) once it has ended.
    fds.push_back({stop_fd_open_ ? options_.stop_fd : -1, POLLIN, 0});
    for (Process& process : processes_) {
      for (Stream* stream : {&process.out, &process.err}) {
        if (stream->fd < 0) continue;
        fds.push_back({stream->fd, POLLIN, 0});
        polled.push_back(stream);
      }
    }
    int ready = poll(fds.data(), fds.size(), PollTimeoutMs(now));
    if (ready < 0) {
      if (errno == EINTR) continue;
      Message("poll failed: " + std::string(std::strerror(errno)) +
              "; killing the job");
      KillAndReapAll();
      RecordFailure(1);
      break;
    }
    // Output first, so that a process's last lines come before the line
    // saying how it exited.
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) Drain(polled[i - 2]);
    }
    if (fds[0].revents != 0) HandleSignals();
    if (fds[1].revents != 0) HandleStopFd();
  }
  for (Process& process : processes_) {
    if (process.stdin_fd >= 0) close(process.stdin_fd);
    process.stdin_fd = -1;
  }
  return exit_code_;
}

void Launcher::Start(const ProcessSpec& spec) {
  if (options_.verbose) {
    std::string where;
    for (int core : spec.child.cores)
      where += (where.empty() ? " (cores " : ",") + std::to_string(core);
    if (!where.empty()) where += ")";
    Message(spec.name + where + ": " +
            (spec.started ? "pid " + std::to_string(spec.started->pid)
                          : JoinCommand(spec.child.argv)));
  }
  StatusOr<Child> child =
      spec.started ? StatusOr<Child>(*spec.started)
                   : SpawnChild(spec.child, signals_->original_mask());
  if (!child.ok()) {
    Message(spec.name + ": " + child.status().message());
    RecordFailure(127);
    if (AnyRunning()) {
      // Nothing to wait for: the job cannot run without this process.
      SignalAll(SIGTERM);
      phase_ = Phase::kTerminating;
      deadline_ = steady_clock::now() + options_.term_grace;
    }
    // Without a running process the loop in Run() simply ends; the phase
    // still stops the launch of the rest.
    if (phase_ == Phase::kRunning) phase_ = Phase::kKilled;
    return;
  }
  Process process;
  process.name = spec.name;
  process.pid = child->pid;
  process.stdin_fd = child->stdin_fd;
  process.running = true;
  process.out.fd = child->stdout_fd;
  process.out.out_fd = STDOUT_FILENO;
  process.out.in_place = spec.child.stdout_terminal.has_value();
  process.out.splitter.emplace(spec.format, spec.stdout_prefix,
                               process.out.in_place);
  process.err.fd = child->stderr_fd;
  process.err.out_fd = STDERR_FILENO;
  process.err.splitter.emplace(spec.format, spec.stderr_prefix);
  processes_.push_back(std::move(process));
}

void Launcher::HandleSignals() {
  for (int signal : signals_->ReadPending()) {
    if (signal == SIGCHLD) continue;  // reaped below, whatever arrived
    if (phase_ == Phase::kTerminating || phase_ == Phase::kKilled) {
      // The job is stopping already and the user wants it gone now.
      Message("received signal " + std::to_string(signal) +
              " while stopping the job; killing it");
      SignalAll(SIGKILL);
      phase_ = Phase::kKilled;
      continue;
    }
    // An agent is signalled by the launching kolorun, which has said why.
    StopFromOutside(signal, options_.host.empty()
                                ? "received signal " + std::to_string(signal) +
                                      " (" + strsignal(signal) +
                                      "); forwarding it to the job"
                                : "stopping the ranks on " + options_.host +
                                      " (signal " + std::to_string(signal) +
                                      ", " + strsignal(signal) + ")");
  }
  ReapExited();
}

void Launcher::StopFromOutside(int signal, const std::string& why) {
  Message(why);
  // A failure already recorded stays the reason kolorun exits.
  RecordFailure(128 + signal, /*killed=*/true);
  SignalAll(signal);
  phase_ = Phase::kTerminating;
  deadline_ = steady_clock::now() + options_.signal_grace;
}

void Launcher::HandleStopFd() {
  char buffer[4096];
  ssize_t n;
  do {
    n = read(options_.stop_fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) return;
  stop_fd_open_ = false;
  if (phase_ == Phase::kTerminating || phase_ == Phase::kKilled) return;
  StopFromOutside(SIGTERM, options_.stop_message);
}

void Launcher::ReapExited() {
  for (Process& process : processes_) {
    if (!process.running) continue;
    int wait_status = 0;
    pid_t pid;
    do {
      pid = waitpid(process.pid, &wait_status, WNOHANG);
    } while (pid < 0 && errno == EINTR);
    if (pid == 0) continue;
    if (pid < 0) {
      // Not our child any more; nothing left to wait for.
      wait_status = 0;
    }
    OnExit(&process, wait_status);
  }
}

void Launcher::OnExit(Process* process, int wait_status) {
  process->running = false;
  if (process->stdin_fd >= 0) close(process->stdin_fd);
  process->stdin_fd = -1;
  // Whatever it wrote is in the pipes already; relay it before its epitaph.
  Drain(&process->out);
  Drain(&process->err);
  bool failed = !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  if (options_.on_exit) {
    options_.on_exit(process->pid,
                     failed ? DescribeWaitStatus(wait_status) : "finished",
                     failed);
  }
  // Exits caused by kolorun's own SIGTERM or SIGKILL are expected; only the
  // verbose log mentions them.
  bool expected = phase_ == Phase::kTerminating || phase_ == Phase::kKilled;
  if (options_.verbose || (failed && !expected)) {
    Message(process->name + " " + DescribeWaitStatus(wait_status));
  }
  if (!failed || expected) return;
  RecordFailure(ExitCodeOf(wait_status), WIFSIGNALED(wait_status));
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kFailureGrace;
    deadline_ = steady_clock::now() + options_.failure_grace;
  }
}

void Launcher::Drain(Stream* stream) {
  if (stream->fd < 0) return;
  // Enough for a full default pipe several times over, yet bounded, so that
  // one rank printing without pause cannot starve the others or the
  // signals; what is left is read on the next turn of the loop.
  constexpr int kMaxReads = 4;
  char buffer[65536];
  for (int reads = 0; reads < kMaxReads; ++reads) {
    ssize_t n = read(stream->fd, buffer, sizeof(buffer));
    if (n > 0) {
      const std::string text =
          stream->splitter->Append(buffer, static_cast<size_t>(n));
      Relay(*stream, text);
      if (options_.failure_in_line) NoticeReportedFailures(text);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file, or an error that leaves nothing more to read: a
    // pseudo-terminal's master reads EIO once every holder of its other end
    // has closed it.
    CloseStream(stream);
    return;
  }
}

void Launcher::NoticeReportedFailures(const std::string& text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::optional<int> code =
        options_.failure_in_line(text.substr(begin, end - begin));
    begin = end + 1;
    // Once kolorun stops the job, what the agents report is its doing.
    if (!code ||
        (phase_ != Phase::kRunning && phase_ != Phase::kFailureGrace)) {
      continue;
    }
    // The agents report deaths by signal as 128 + the signal.
    RecordFailure(*code, /*killed=*/*code > 128);
    if (phase_ == Phase::kRunning) {
      phase_ = Phase::kFailureGrace;
      deadline_ = steady_clock::now() + options_.failure_grace;
    }
  }
}

std::optional<int> AgentReportedFailure(const std::string& line) {
  static const std::regex kReport(
      "kolorun: rank [0-9]+ on \\S+ (was killed by signal ([0-9]+)|exited "
      "with code ([0-9]+)).*");
  std::smatch match;
  if (!std::regex_match(line, match, kReport)) return std::nullopt;
  if (match[2].matched) return 128 + std::stoi(match[2].str());
  const int code = std::stoi(match[3].str());
  if (code == 0) return std::nullopt;
  return code;
}

void Launcher::CloseStream(Stream* stream) {
  if (stream->fd < 0) return;
  Relay(*stream, stream->splitter->Finish());
  close(stream->fd);
  stream->fd = -1;
}

void Launcher::Relay(const Stream& stream, const std::string& lines) {
  if (!stream.in_place) {
    if (!lines.empty()) WriteAbove(stream.out_fd, lines);
    return;
  }
  const std::string status = stream.splitter->Status();
  if (lines.empty() && status == status_) return;
  // One write: the finished lines replace the line shown, and the new one
  // is drawn below them; without lines, it is drawn over the old one.
  std::string bytes;
  if (!status_.empty()) bytes = lines.empty() ? "\r" : kEraseLine;
  bytes += lines;
  if (!status.empty()) {
    bytes += status + kEraseToEnd;
  } else if (lines.empty()) {
    bytes += kEraseToEnd;  // the line is gone without a trace
  }
  status_ = status;
  WriteAll(STDOUT_FILENO, bytes);
}

void Launcher::WriteAbove(int fd, const std::string& text) const {
  if (status_.empty()) {
    WriteAll(fd, text);
    return;
  }
  const std::string redraw = status_ + kEraseToEnd;
  if (fd == STDOUT_FILENO) {
    WriteAll(fd, kEraseLine + text + redraw);
    return;
  }
  // Stderr is most likely the same terminal; the order of the writes keeps
  // the line in place below the text there too.
  WriteAll(STDOUT_FILENO, kEraseLine);
  WriteAll(fd, text);
  WriteAll(STDOUT_FILENO, redraw);
}

void Launcher::AdvanceDeadlines(TimePoint now) {
  if (phase_ == Phase::kFailureGrace && now >= deadline_) {
    SignalAll(SIGTERM);
    phase_ = Phase::kTerminating;
    deadline_ = now + options_.term_grace;
  } else if (phase_ == Phase::kTerminating && now >= deadline_) {
    SignalAll(SIGKILL);
    phase_ = Phase::kKilled;
  }
  if (AnyRunning() || !AnyStreamOpen()) return;
  // Every process exited, yet a pipe is open: something they started still
  // holds it. Kill those groups and give the output a moment to arrive.
  if (!drain_deadline_) {
    drain_deadline_ = now + options_.drain_limit;
    SignalAll(SIGKILL);
  } else if (now >= *drain_deadline_) {
    for (Process& process : processes_) {
      CloseStream(&process.out);
      CloseStream(&process.err);
    }
  }
}

void Launcher::SignalAll(int signal) {
  for (const Process& process : processes_) {
    // An exited leader's group may live on in its children, which hold the
    // pipes open.
    if (process.running || process.out.fd >= 0 || process.err.fd >= 0) {
      SignalGroup(process.pid, signal);
    }
  }
}

void Launcher::KillAndReapAll() {
  SignalAll(SIGKILL);
  for (Process& process : processes_) {
    if (process.running) {
      int wait_status = 0;
      while (waitpid(process.pid, &wait_status, 0) < 0 && errno == EINTR) {
      }
      process.running = false;
    }
    CloseStream(&process.out);
    CloseStream(&process.err);
  }
}

void Launcher::RecordFailure(int exit_code, bool killed) {
  if (exit_code_ != 0 && (exit_code_from_signal_ || !killed)) return;
  exit_code_ = exit_code == 0 ? 1 : exit_code;
  exit_code_from_signal_ = killed;
}

bool Launcher::AnyRunning() const {
  return std::any_of(processes_.begin(), processes_.end(),
                     [](const Process& p) { return p.running; });
}

bool Launcher::AnyStreamOpen() const {
  return std::any_of(
      processes_.begin(), processes_.end(),
      [](const Process& p) { return p.out.fd >= 0 || p.err.fd >= 0; });
}

int Launcher::PollTimeoutMs(TimePoint now) const {
  std::optional<TimePoint> next;
  if (phase_ == Phase::kFailureGrace || phase_ == Phase::kTerminating)
    next = deadline_;
  if (drain_deadline_ && (!next || *drain_deadline_ < *next))
    next = drain_deadline_;
  if (!AnyRunning() && AnyStreamOpen() && !drain_deadline_) return 0;
  if (!next) return -1;
  if (*next <= now) return 0;
  // Round up, so that the loop does not wake just before the deadline.
  return static_cast<int>(duration_cast<milliseconds>(*next - now).count()) + 1;
}

void Launcher::Message(const std::string& text) const {
  WriteAbove(STDERR_FILENO, "kolorun: " + text + "\n");
}

}  // namespace kolorun
}  // namespace kolo
