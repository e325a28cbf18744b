// Launcher: runs a job's processes to the end and decides kolorun's exit
// status.
//
// The policy, which a user can rely on:
//  - Every line a process prints is relayed whole, tagged (see output.h), to
//    kolorun's stdout or stderr; output is drained until every pipe closes.
//  - When a process exits non-zero or is killed, kolorun names it
//    ("kolorun: rank 1 exited with code 3") and gives the others
//    failure_grace to exit on their own, long enough to print their own
//    error naming the dead rank. Then it sends SIGTERM to each remaining
//    process group and, term_grace later, SIGKILL. kolorun's exit status is
//    the first failure's: its exit code, or 128 + the signal that killed it.
//  - SIGINT or SIGTERM sent to kolorun is forwarded to every process group;
//    signal_grace later whatever is left gets SIGKILL. A second signal kills
//    at once. kolorun then exits 128 + the signal (130, 143).
//  - kolorun returns only when every process has been reaped, so nothing it
//    started is left behind.
//
// One poll() loop waits for output, for SIGCHLD and for kolorun's own
// signals (all as file descriptors) and for the next deadline; nothing spins.
//
// Thread-safety: Run() from one thread, the one that created the
// SignalWatcher.
#ifndef KOLO_TOOLS_KOLORUN_LAUNCHER_H_
#define KOLO_TOOLS_KOLORUN_LAUNCHER_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

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
};

struct LauncherOptions {
  bool verbose = false;
  std::chrono::milliseconds failure_grace{2000};
  std::chrono::milliseconds term_grace{1000};
  std::chrono::milliseconds signal_grace{3000};
  // How long output may still arrive after every process has exited; only a
  // grandchild that escaped its group can hold a pipe open that long.
  std::chrono::milliseconds drain_limit{1000};
};

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

  struct Stream {
    int fd = -1;  // -1 once closed
    int out_fd = -1;
    std::optional<LineSplitter> splitter;
  };

  struct Process {
    std::string name;
    pid_t pid = -1;
    bool running = false;
    Stream out;
    Stream err;
  };

  void Start(const ProcessSpec& spec);
  void HandleSignals();
  void ReapExited();
  void OnExit(Process* process, int wait_status);
  // Reads what `stream` holds now; closes it at end of file.
  void Drain(Stream* stream);
  void CloseStream(Stream* stream);
  void AdvanceDeadlines(TimePoint now);
  void SignalAll(int signal);
  // The last resort when the loop cannot go on.
  void KillAndReapAll();
  void RecordFailure(int exit_code);
  bool AnyRunning() const;
  bool AnyStreamOpen() const;
  int PollTimeoutMs(TimePoint now) const;
  void Message(const std::string& text) const;

  const LauncherOptions options_;
  SignalWatcher* const signals_;
  std::vector<Process> processes_;
  Phase phase_ = Phase::kRunning;
  TimePoint deadline_{};  // of the current phase, if it has one
  std::optional<TimePoint> drain_deadline_;
  int exit_code_ = 0;
};

// `args` joined with spaces, quoted where a shell would need it, for
// messages.
std::string JoinCommand(const std::vector<std::string>& args);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_LAUNCHER_H_
