// The state a Handle shares with the runtime: set once by the runtime's
// thread when the operation completes, read by any number of waiters.
#ifndef KOLO_RUNTIME_HANDLE_STATE_H_
#define KOLO_RUNTIME_HANDLE_STATE_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/spin_wait.h"
#include "kolo/runtime.h"

namespace kolo::internal {

struct HandleState {
  explicit HandleState(std::string operation_name, CompletionCallback on_done)
      : name(std::move(operation_name)), callback(std::move(on_done)) {}

  // Publishes the result, wakes waiters, then runs the callback. The
  // outputs must be filled before this call.
  void Complete(const Status& final_status);

  const std::string name;
  const CompletionCallback callback;
  // Called by Handle::Wait before it blocks on an unfinished operation, so
  // that the runtime stops pacing (a waiting caller enqueues nothing more
  // that could join the batch). Set before the handle is returned; may be
  // empty.
  std::function<void()> on_wait;
  // How Handle::Wait spins before it blocks (the runtime's choice).
  SpinStyle spin_style = SpinStyle::kYield;
  // Written by the runtime's thread before Complete(), read after it.
  std::vector<char> output;
  std::vector<int64_t> output_counts;

  Mutex mutex;
  CondVar completed;
  // Written under mutex (waiters block on `completed`), read without it
  // by Poll and by a spinning waiter.
  std::atomic<bool> done{false};
  Status status KOLO_GUARDED_BY(mutex);  // final once done
};

}  // namespace kolo::internal

#endif  // KOLO_RUNTIME_HANDLE_STATE_H_
