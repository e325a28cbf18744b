// AdaptiveSpin: a bounded spin before a blocking wait, for waits that
// usually end within microseconds (a peer already on its way, a runtime
// thread that is about to answer). Sleeping and being woken costs a few
// microseconds of syscalls and scheduling on each side, which is the whole
// cost of a small collective; a short spin avoids it.
//
// The spin lasts at most kSpinWindow, and only while the previous wait
// ended within that window: when the awaited thread keeps arriving late
// (it is computing), the waiter goes straight to sleep and leaves the core
// to the compute threads. Where the awaited thread may need this very core
// (more threads than cores, or threads pinned to one core), the spin yields
// the core at every turn.
//
// Not thread-safe: one waiter per AdaptiveSpin.
#ifndef KOLO_COMMON_SPIN_WAIT_H_
#define KOLO_COMMON_SPIN_WAIT_H_

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace kolo {

enum class SpinStyle {
  kPause,           // the awaited thread has a core of its own
  kYield,           // it may share this core
  kYieldEveryWait,  // more ranks than cores: yield, and spin at every wait
};

// Whether `ranks_on_host` ranks outnumber this machine's cores, where the
// waits spin with SpinStyle::kYieldEveryWait.
inline bool RanksOutnumberCores(int32_t ranks_on_host) {
  return static_cast<unsigned>(ranks_on_host) >
         std::max(1u, std::thread::hardware_concurrency());
}

class AdaptiveSpin {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kSpinWindow{50};

  // Polls `ready` until it returns true (then true) or the spin is over
  // (then false; the caller blocks). `began` is when the wait began.
  template <typename Ready>
  bool Spin(Ready&& ready, SpinStyle style, Clock::time_point began) const {
    if (!enabled_ && style != SpinStyle::kYieldEveryWait) return false;
    const Clock::time_point until = began + kSpinWindow;
    for (int turn = 0;; ++turn) {
      if (ready()) return true;
      if (style != SpinStyle::kPause) {
        sched_yield();
        if (Clock::now() >= until) return false;
        continue;
      }
      if ((turn & 63) == 63 && Clock::now() >= until) return false;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  // Records that a wait ended in its spin, without reading the clock (a
  // wait whose spin succeeded ended within the window, give or take the 64
  // turns between the spin's looks at the clock).
  void Arrived() { enabled_ = true; }

  // Records that a wait which began at `began` is over.
  void Finished(Clock::time_point began) {
    enabled_ = Clock::now() - began < kSpinWindow;
  }

  // Calls Finished when it goes out of scope: for waits with many exits.
  struct FinishOnExit {
    AdaptiveSpin* spin;
    Clock::time_point began;
    ~FinishOnExit() { spin->Finished(began); }
  };

 private:
  bool enabled_ = true;
};

}  // namespace kolo

#endif  // KOLO_COMMON_SPIN_WAIT_H_
