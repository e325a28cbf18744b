// Launcher: runs a job's processes to the end and decides kolorun's exit
// status.
//
// The policy, which a user can rely on:
//  - Every line a process prints is relayed whole, tagged (see output.h), to
//    kolorun's stdout or stderr; output is drained until every pipe closes.
//  - When kolorun's stdout is a terminal, rank 0's stdout is one too
//    (DrawInPlaceThrough), so that it may redraw a progress line in place;
//    kolorun relays each redraw at once, behind rank 0's tag, and keeps that
//    line below everything else it prints: another line first erases it,
//    then draws it again underneath.
//  - When a process exits non-zero or is killed, kolorun names it
//    ("kolorun: rank 1 exited with code 3") and gives the others
//    failure_grace to exit on their own, long enough to print their own
//    error naming the dead rank. Then it sends SIGTERM to each remaining
//    process group and, term_grace later, SIGKILL. kolorun's exit status is
//    the first failure's: its exit code, or 128 + the signal that killed it;
//    but a process killed by a signal (that kolorun did not send) outranks
//    one that exited with an error before it was noticed. The ranks that
//    fail because a peer died exit with codes of their own, and across hosts
//    their exits can reach kolorun before the killed rank's: the death is
//    the cause, the exit codes its consequences.
//  - SIGINT or SIGTERM sent to kolorun is forwarded to every process group;
//    signal_grace later whatever is left gets SIGKILL. A second signal kills
//    at once. kolorun then exits 128 + the signal (130, 143).
//  - kolorun returns only when every process has been reaped, so nothing it
//    started is left behind.
//  - A host's agent also watches its stdin (stop_fd): at its end, the
//    launching kolorun is gone, and the agent stops its ranks as if it had
//    received SIGTERM.
//
// One poll() loop (ChildWatcher, which watches the processes and relays
// their output) waits for output, for SIGCHLD and for kolorun's own signals
// (all as file descriptors) and for the next deadline; nothing spins.
//
// Thread-safety: Run() from one thread, the one that created the
// SignalWatcher.
#ifndef KOLO_TOOLS_KOLORUN_LAUNCHER_H_
#define KOLO_TOOLS_KOLORUN_LAUNCHER_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "child_watcher.h"
#include "output.h"
#include "process.h"

namespace kolo {
namespace kolorun {

// One process of the job: a rank, or mpirun standing for all of them.
struct ProcessSpec {
  std::string name;  // "rank 1" or "mpirun": how messages name it
  ChildSpec child;
  LineFormat format = LineFormat::kPrefix;
  std::string stdout_prefix;  // "[1]<stdout>: "
  std::string stderr_prefix;  // "[1]<stderr>: "
  // A process started already (a host's agent, after its preflight): the
  // launcher adopts it instead of starting `child`, and closes its stdin
  // when it exits.
  std::optional<Child> started;
};

struct LauncherOptions {
  bool verbose = false;
  std::chrono::milliseconds failure_grace{2000};
  std::chrono::milliseconds term_grace{1000};
  std::chrono::milliseconds signal_grace{3000};
  // How long output may still arrive after every process has exited; only a
  // grandchild that escaped its group can hold a pipe open that long.
  std::chrono::milliseconds drain_limit{1000};
  // A descriptor whose end of file (or error) stops the job like SIGTERM;
  // anything read from it before that is ignored. -1: none.
  int stop_fd = -1;
  std::string stop_message;  // said when stop_fd ends
  // The host an agent serves: a signal it forwards is reported as this
  // host's, not as if the user had signalled kolorun.
  std::string host;
  // Reads a line a process printed (as relayed, with its tag) and returns
  // the exit code of a failure it reports, if it reports one. The driver of
  // a multi-host job learns from its agents' "rank 5 on h2 was killed by
  // signal 9" that a rank failed, when it fails rather than when the
  // agent exits, so the first failure anywhere decides kolorun's exit
  // status and starts the failure grace.
  std::function<std::optional<int>(const std::string& line)> failure_in_line;
  // Told of every process's exit, with how it ended ("exited with code 3",
  // "finished") and whether that is a failure: for the metrics' job page.
  std::function<void(pid_t pid, const std::string& how, bool failed)> on_exit;
};

// When `terminal_fd` (kolorun's stdout) is a terminal that can redraw a
// line in place (TERM is not "dumb"), gives `spec` a pseudo-terminal as its
// stdout: as tall as that terminal, and as wide less the width of its tag,
// so that a program fitting its progress line to its terminal fits
// kolorun's. Elsewhere `spec` keeps its pipe, and its program sees no
// terminal. Resizing kolorun's terminal later does not resize the rank's.
void DrawInPlaceThrough(int terminal_fd, ProcessSpec* spec);
// The same for a child whose lines carry a tag `tag_width` bytes wide.
void DrawInPlaceThrough(int terminal_fd, size_t tag_width, ChildSpec* child);

// The failure a line of a host's agent reports ("kolorun: rank 5 on h2 was
// killed by signal 9 (Killed)", "kolorun: rank 2 on h1 exited with code
// 3"), as the exit code a shell would show (137, 3); nullopt for any other
// line. Lines a rank prints carry its tag and never match.
std::optional<int> AgentReportedFailure(const std::string& line);

class Launcher {
 public:
  // `signals` must outlive the launcher.
  Launcher(LauncherOptions options, SignalWatcher* signals);
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Starts every process in order and supervises them to the end; returns
  // the exit status kolorun should exit with.
  int Run(const std::vector<ProcessSpec>& specs);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  enum class Phase {
    kRunning,       // no failure yet
    kFailureGrace,  // a process failed; the others may still exit alone
    kTerminating,   // SIGTERM (or the user's signal) sent; SIGKILL at deadline
    kKilled,        // SIGKILL sent; waiting for the exits
  };

  void Start(const ProcessSpec& spec);
  void HandleSignals();
  // Reads stop_fd; at its end, stops the job as a signal would.
  void HandleStopFd();
  // The job is asked to stop from outside (a signal, stop_fd).
  void StopFromOutside(int signal, const std::string& why);
  // Told by watcher_ of `child`'s exit, once its output is relayed.
  void OnExit(size_t child, int wait_status);
  void AdvanceDeadlines(TimePoint now);
  // `killed`: by a signal, which outranks an exit code recorded earlier.
  void RecordFailure(int exit_code, bool killed = false);
  // A failure reported in output (failure_in_line): as if a process had
  // failed.
  void NoticeReportedFailures(const std::string& text);
  int PollTimeoutMs(TimePoint now) const;
  void Message(const std::string& text) const { watcher_.Message(text); }

  const LauncherOptions options_;
  SignalWatcher* const signals_;
  // The processes started, and how messages name them (by watcher_'s
  // numbers).
  ChildWatcher watcher_;
  std::vector<std::string> names_;
  Phase phase_ = Phase::kRunning;
  TimePoint deadline_{};  // of the current phase, if it has one
  std::optional<TimePoint> drain_deadline_;
  int exit_code_ = 0;
  bool exit_code_from_signal_ = false;
  bool stop_fd_open_ = false;
};

// `args` joined with spaces, quoted where a shell would need it, for
// messages.
std::string JoinCommand(const std::vector<std::string>& args);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_LAUNCHER_H_
