#include "runtime/stall_inspector.h"

#include <algorithm>

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Seconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

}  // namespace

StallInspector::StallInspector(std::chrono::seconds warning,
                               std::chrono::seconds shutdown)
    : warning_(std::chrono::duration_cast<Clock::duration>(warning)),
      shutdown_(shutdown) {}

bool StallInspector::Due(SteadyTime now) const {
  const auto period =
      std::min<Clock::duration>(std::chrono::seconds(1), warning_ / 2);
  return now - last_check_ >= period;
}

std::vector<std::string> StallInspector::Inspect(
    const std::vector<WaitingOperation>& waiting, SteadyTime now) {
  last_check_ = now;
  const auto shutdown = std::chrono::duration_cast<Clock::duration>(shutdown_);
  std::vector<std::string> warnings;
  std::string worst;
  auto still_waiting = [&](const std::string& name) {
    return std::any_of(waiting.begin(), waiting.end(),
                       [&](const WaitingOperation& w) {
                         return w.name == name && w.waited >= warning_;
                       });
  };
  for (const WaitingOperation& w : waiting) {
    if (w.waited < warning_) continue;
    const std::string line = DescribeWait(w, Seconds(w.waited));
    auto warned = warned_.find(w.name);
    if (warned == warned_.end() || now - warned->second >= warning_) {
      warnings.push_back("stall: " + line +
                         " (the other ranks announced it; a rank that never "
                         "does hangs the job)");
      warned_[w.name] = now;
    }
    if (shutdown.count() > 0 && w.waited >= shutdown && worst.empty())
      worst = line;
  }
  for (auto it = warned_.begin(); it != warned_.end();) {
    it = still_waiting(it->first) ? std::next(it) : warned_.erase(it);
  }
  // Reported in the next exchange, after which every rank fails together.
  if (!worst.empty() && verdict_.empty()) verdict_ = worst;
  return warnings;
}

Status StallInspector::ShutdownError(
    const std::vector<WaitingOperation>& waiting) const {
  std::string line = verdict_;
  if (line.empty()) {
    // Another rank's clock got there first: name the operation this rank
    // has seen waiting longest, which waited the shutdown time there.
    auto longest = std::max_element(
        waiting.begin(), waiting.end(),
        [](const WaitingOperation& a, const WaitingOperation& b) {
          return a.waited < b.waited;
        });
    if (longest == waiting.end()) {
      line = "another rank saw an operation wait past the shutdown time";
    } else {
      line = DescribeWait(
          *longest,
          std::max<int64_t>(shutdown_.count(), Seconds(longest->waited)));
    }
  }
  return Aborted("stall: " + line + " (KOLO_STALL_SHUTDOWN_S=" +
                 std::to_string(shutdown_.count()) + ")");
}

}  // namespace kolo
