#include "launcher.h"

#include <errno.h>
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
  DrawInPlaceThrough(terminal_fd, spec->stdout_prefix.size(), &spec->child);
}

void DrawInPlaceThrough(int terminal_fd, size_t tag_width, ChildSpec* child) {
  const char* term = std::getenv("TERM");
  if (!isatty(terminal_fd) ||
      (term != nullptr && std::strcmp(term, "dumb") == 0))
    return;
  winsize window{};
  TerminalSize size;
  if (ioctl(terminal_fd, TIOCGWINSZ, &window) == 0) {
    size.rows = window.ws_row;
    // Never narrower than a short progress line, though it wraps then.
    size.columns = window.ws_col > tag_width + 20
                       ? static_cast<uint16_t>(window.ws_col - tag_width)
                       : window.ws_col;
  }
  child->stdout_terminal = size;
}

Launcher::Launcher(LauncherOptions options, SignalWatcher* signals)
    : options_(std::move(options)),
      signals_(signals),
      watcher_(signals, [this](size_t child, int wait_status) {
        OnExit(child, wait_status);
      }) {
  if (options_.failure_in_line) {
    watcher_.set_on_lines(
        [this](const std::string& lines) { NoticeReportedFailures(lines); });
  }
}

int Launcher::Run(const std::vector<ProcessSpec>& specs) {
  for (const ProcessSpec& spec : specs) {
    // A signal or a failed start stops the launch; what started is then
    // wound down like any failed job.
    HandleSignals();
    if (phase_ != Phase::kRunning) break;
    Start(spec);
  }

  stop_fd_open_ = options_.stop_fd >= 0;
  while (watcher_.AnyRunning() || watcher_.AnyStreamOpen()) {
    TimePoint now = steady_clock::now();
    AdvanceDeadlines(now);
    if (!watcher_.AnyRunning() && !watcher_.AnyStreamOpen()) break;
    const ChildWatcher::Ready ready = watcher_.Poll(
        PollTimeoutMs(now), stop_fd_open_ ? options_.stop_fd : -1);
    if (!ready.error.empty()) {
      Message("poll failed: " + ready.error + "; killing the job");
      watcher_.KillAndReapAll();
      RecordFailure(1);
      break;
    }
    if (ready.signals) HandleSignals();
    if (ready.extra) HandleStopFd();
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
    if (watcher_.AnyRunning()) {
      // Nothing to wait for: the job cannot run without this process.
      watcher_.SignalAll(SIGTERM);
      phase_ = Phase::kTerminating;
      deadline_ = steady_clock::now() + options_.term_grace;
    }
    // Without a running process the loop in Run() simply ends; the phase
    // still stops the launch of the rest.
    if (phase_ == Phase::kRunning) phase_ = Phase::kKilled;
    return;
  }
  RelayFormat format;
  format.format = spec.format;
  format.stdout_prefix = spec.stdout_prefix;
  format.stderr_prefix = spec.stderr_prefix;
  format.stdout_in_place = spec.child.stdout_terminal.has_value();
  watcher_.Add(*child, format);
  names_.push_back(spec.name);
}

void Launcher::HandleSignals() {
  for (int signal : signals_->ReadPending()) {
    if (signal == SIGCHLD) continue;  // reaped below, whatever arrived
    if (phase_ == Phase::kTerminating || phase_ == Phase::kKilled) {
      // The job is stopping already and the user wants it gone now.
      Message("received signal " + std::to_string(signal) +
              " while stopping the job; killing it");
      watcher_.SignalAll(SIGKILL);
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
  watcher_.ReapExited();
}

void Launcher::StopFromOutside(int signal, const std::string& why) {
  Message(why);
  // A failure already recorded stays the reason kolorun exits.
  RecordFailure(128 + signal, /*killed=*/true);
  watcher_.SignalAll(signal);
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

void Launcher::OnExit(size_t child, int wait_status) {
  bool failed = !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  if (options_.on_exit) {
    options_.on_exit(watcher_.pid(child),
                     failed ? DescribeWaitStatus(wait_status) : "finished",
                     failed);
  }
  // Exits caused by kolorun's own SIGTERM or SIGKILL are expected; only the
  // verbose log mentions them.
  bool expected = phase_ == Phase::kTerminating || phase_ == Phase::kKilled;
  if (options_.verbose || (failed && !expected)) {
    Message(names_[child] + " " + DescribeWaitStatus(wait_status));
  }
  if (!failed || expected) return;
  RecordFailure(ExitCodeOf(wait_status), WIFSIGNALED(wait_status));
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kFailureGrace;
    deadline_ = steady_clock::now() + options_.failure_grace;
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

void Launcher::AdvanceDeadlines(TimePoint now) {
  if (phase_ == Phase::kFailureGrace && now >= deadline_) {
    watcher_.SignalAll(SIGTERM);
    phase_ = Phase::kTerminating;
    deadline_ = now + options_.term_grace;
  } else if (phase_ == Phase::kTerminating && now >= deadline_) {
    watcher_.SignalAll(SIGKILL);
    phase_ = Phase::kKilled;
  }
  if (watcher_.AnyRunning() || !watcher_.AnyStreamOpen()) return;
  // Every process exited, yet a pipe is open: something they started still
  // holds it. Kill those groups and give the output a moment to arrive.
  if (!drain_deadline_) {
    drain_deadline_ = now + options_.drain_limit;
    watcher_.SignalAll(SIGKILL);
  } else if (now >= *drain_deadline_) {
    watcher_.DrainAndCloseAll();
  }
}

void Launcher::RecordFailure(int exit_code, bool killed) {
  if (exit_code_ != 0 && (exit_code_from_signal_ || !killed)) return;
  exit_code_ = exit_code == 0 ? 1 : exit_code;
  exit_code_from_signal_ = killed;
}

int Launcher::PollTimeoutMs(TimePoint now) const {
  std::optional<TimePoint> next;
  if (phase_ == Phase::kFailureGrace || phase_ == Phase::kTerminating)
    next = deadline_;
  if (drain_deadline_ && (!next || *drain_deadline_ < *next))
    next = drain_deadline_;
  if (!watcher_.AnyRunning() && watcher_.AnyStreamOpen() && !drain_deadline_)
    return 0;
  if (!next) return -1;
  if (*next <= now) return 0;
  // Round up, so that the loop does not wake just before the deadline.
  return static_cast<int>(duration_cast<milliseconds>(*next - now).count()) + 1;
}

}  // namespace kolorun
}  // namespace kolo
