// ChildWatcher: the children one kolorun loop watches, their exits and their
// output. The Launcher (a job's ranks, or a multi-host job's agents) and the
// elastic driver (its workers) both watch their children through it, and
// keep to themselves only their policy: whom to signal when, and what an
// exit means.
//
// Contract:
//  - Ownership. For each child given to Add(), the watcher owns the write
//    end of its stdin (closed when the child exits) and its stdout and
//    stderr (read until their end, then closed); the destructor closes
//    whatever is still open. It does not own the SignalWatcher, and it never
//    signals or reaps a child on its own: the owner calls Signal(),
//    ReapExited(), KillAndReapAll().
//  - Output. Every line a child prints is relayed whole, behind its tag
//    (output.h), to kolorun's stdout or stderr (the descriptors given at
//    construction). At most one child's stdout may be in place (its
//    splitter redraws a line, see launcher.h): that line is kept below
//    everything else written through the watcher, Message() included, which
//    first erases it and then draws it again underneath. A child's last
//    lines are relayed before on_exit hears of its exit. Each batch of
//    lines relayed is also handed to on_lines, if set, so that an owner can
//    read what its children report (NoticeReportedFailures).
//  - Signals. Poll() says that kolorun's signals are pending but leaves
//    them unread: the owner reads them (SignalWatcher::ReadPending), acts,
//    and then calls ReapExited(), so that an exit its own action caused is
//    seen after that action.
//  - Exits. ReapExited() never blocks; for each child that has exited it
//    closes the child's stdin, relays what its pipes hold, and then calls
//    on_exit once. A child is running from Add() until then.
//  - Threads: none of its own; every call from the owner's thread, the one
//    that created the SignalWatcher.
#ifndef KOLO_TOOLS_KOLORUN_CHILD_WATCHER_H_
#define KOLO_TOOLS_KOLORUN_CHILD_WATCHER_H_

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "output.h"
#include "process.h"

namespace kolo {
namespace kolorun {

// How a child's output is tagged when relayed.
struct RelayFormat {
  LineFormat format = LineFormat::kPrefix;
  std::string stdout_prefix;  // "[1]<stdout>: "
  std::string stderr_prefix;  // "[1]<stderr>: "
  // Its stdout is a pseudo-terminal whose progress line is redrawn in place.
  bool stdout_in_place = false;
};

class ChildWatcher {
 public:
  // `child` is the number Add() returned; `wait_status` as from waitpid.
  using ExitHandler = std::function<void(size_t child, int wait_status)>;
  // Whole lines, as relayed (with their tags), each ending in '\n'.
  using LinesHandler = std::function<void(const std::string& lines)>;

  // What one Poll() saw.
  struct Ready {
    bool signals = false;  // kolorun's signals are pending (unread)
    bool extra = false;    // `extra_fd` is readable, or at its end
    std::string error;     // poll() failed: why; empty otherwise
  };

  // `signals` must outlive the watcher.
  ChildWatcher(SignalWatcher* signals, ExitHandler on_exit,
               int stdout_fd = STDOUT_FILENO, int stderr_fd = STDERR_FILENO);
  ~ChildWatcher();
  ChildWatcher(const ChildWatcher&) = delete;
  ChildWatcher& operator=(const ChildWatcher&) = delete;

  void set_on_lines(LinesHandler on_lines) { on_lines_ = std::move(on_lines); }

  // Takes over `child`'s pipes; returns the number that names it from now
  // on (0, 1, 2, ... in the order added).
  size_t Add(const Child& child, const RelayFormat& format);

  // Waits up to `timeout_ms` (-1: without limit) for output, for kolorun's
  // signals and for `extra_fd` (-1: none), and relays the output that
  // arrived. An interrupted wait returns with nothing ready.
  Ready Poll(int timeout_ms, int extra_fd = -1);
  // Reaps every child that has exited (see the contract).
  void ReapExited();

  // Sends `signal` to `child`'s process group.
  void Signal(size_t child, int signal) const;
  // Sends `signal` to every group that may still hold something: of a
  // running child, or of an exited one whose pipes something it started
  // still holds open.
  void SignalAll(int signal) const;
  // Relays what every pipe holds now, then closes them all: the output of
  // children that exited, which a grandchild must not hold open forever.
  void DrainAndCloseAll();
  // The last resort: SIGKILL to every group, a blocking reap of every
  // running child (without on_exit), and every pipe closed.
  void KillAndReapAll();

  bool running(size_t child) const { return children_[child].running; }
  pid_t pid(size_t child) const { return children_[child].pid; }
  bool AnyRunning() const;
  bool AnyStreamOpen() const;

  // Writes "kolorun: <text>\n" on stderr, above the line in place.
  void Message(const std::string& text) const;

 private:
  struct Stream {
    int fd = -1;  // -1 once closed
    int out_fd = -1;
    std::optional<LineSplitter> splitter;
    // Its splitter is in place, and the line it redraws is status_.
    bool in_place = false;
  };

  struct Watched {
    pid_t pid = -1;
    int stdin_fd = -1;  // the write end of its stdin, if it has one
    bool running = false;
    Stream out;
    Stream err;
  };

  // Reads what `stream` holds now (a bounded amount); closes it at its end.
  void Drain(Stream* stream);
  void CloseStream(Stream* stream);
  // Writes the `lines` `stream` completed, and for an in-place stream
  // redraws the line it shows now.
  void Relay(const Stream& stream, const std::string& lines);
  // Writes `text` (whole lines) to `fd` above the line in place, if one is
  // shown.
  void WriteAbove(int fd, const std::string& text) const;
  void CloseStdin(Watched* child);

  SignalWatcher* const signals_;
  const ExitHandler on_exit_;
  LinesHandler on_lines_;
  const int stdout_fd_;
  const int stderr_fd_;
  std::vector<Watched> children_;
  // The line an in-place stream shows now on stdout, its tag included; the
  // cursor stands at its end. Empty when none is shown.
  std::string status_;
};

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_CHILD_WATCHER_H_
