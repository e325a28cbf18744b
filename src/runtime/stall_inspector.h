// StallInspector: notices operations that some ranks announced long ago
// and others never did, names the ranks that are missing, and decides when
// the job should end instead of hanging.
//
// A rank that never announces an operation the others announced (a branch
// taken on one rank only, a rank stuck in data loading) leaves the others
// waiting forever. The inspector looks at what is waiting, each with the
// ranks it waits for and how long: past the warning time it yields one
// warning per operation, repeated every warning time while the operation
// still waits; past the shutdown time (when there is one) it reaches a
// verdict, which the runtime reports in its next exchange so that every
// rank fails together.
//
// Inputs are values (the waiting operations, the time), outputs are values
// (warning lines, the verdict, the error every rank fails with), so it is
// tested without threads, ranks or an engine.
//
// Thread-safety: none; owned by the runtime's thread.
#ifndef KOLO_RUNTIME_STALL_INSPECTOR_H_
#define KOLO_RUNTIME_STALL_INSPECTOR_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "runtime/coordinator.h"

namespace kolo {

class StallInspector {
 public:
  // `shutdown` 0: warn, never end the job.
  StallInspector(std::chrono::seconds warning, std::chrono::seconds shutdown);

  // Operations younger than this are not worth a look.
  std::chrono::steady_clock::duration warning_time() const { return warning_; }
  // True when Inspect should run at `now`: every second, or twice per
  // warning time when that is shorter.
  bool Due(SteadyTime now) const;
  // Looks at what waits at `now` (operations younger than the warning time
  // are ignored) and returns the warnings to log, e.g.
  //   stall: tensor 'x' has waited 3 s for rank 1 (the other ranks ...)
  // An operation is warned about again only after another warning time.
  std::vector<std::string> Inspect(const std::vector<WaitingOperation>& waiting,
                                   SteadyTime now);
  // Some operation waited the shutdown time: this rank calls for shutdown.
  bool stalled() const { return !verdict_.empty(); }
  // The error every rank fails with once some rank called for shutdown.
  // `waiting` is everything this rank sees waiting now: when the verdict is
  // another rank's, it names the operation that waited longest here.
  Status ShutdownError(const std::vector<WaitingOperation>& waiting) const;

 private:
  const std::chrono::steady_clock::duration warning_;
  const std::chrono::seconds shutdown_;
  SteadyTime last_check_;
  std::map<std::string, SteadyTime> warned_;  // operation -> last warning
  std::string verdict_;  // set once an operation waited past shutdown
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_STALL_INSPECTOR_H_
