#include "common/spin_wait.h"
#include "kolo/runtime.h"
#include "runtime/handle_state.h"

namespace kolo {

namespace internal {

void HandleState::Complete(const Status& final_status) {
  {
    MutexLock lock(&mutex);
    status = final_status;
    done.store(true, std::memory_order_release);
  }
  completed.NotifyAll();
  if (callback) callback(final_status);
}

}  // namespace internal

namespace {
const std::string kNoName;
const std::vector<char> kNoOutput;
const std::vector<int64_t> kNoCounts;
}  // namespace

Handle::Handle(std::shared_ptr<internal::HandleState> state)
    : state_(std::move(state)) {}

bool Handle::Poll() const {
  if (!state_) return true;
  return state_->done.load(std::memory_order_acquire);
}

Status Handle::Wait(std::chrono::milliseconds timeout) const {
  if (!state_) return FailedPrecondition("waiting on an empty kolo::Handle");
  if (state_->on_wait && !Poll()) state_->on_wait();
  // One spin record per waiting thread: a thread's waits are alike.
  thread_local AdaptiveSpin spin;
  const auto began = AdaptiveSpin::Clock::now();
  const bool finished =
      spin.Spin([&] { return state_->done.load(std::memory_order_acquire); },
                state_->spin_style, began);
  MutexLock lock(&state_->mutex);
  if (!finished) {
    // now() + milliseconds::max() would overflow; a year is forever enough.
    const auto cap = std::chrono::hours(24 * 365);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::min<std::chrono::milliseconds>(timeout, cap);
    while (!state_->done.load()) {
      if (!state_->completed.WaitUntil(&state_->mutex, deadline) &&
          !state_->done.load()) {
        return Timeout("operation '" + state_->name +
                       "' did not complete within " +
                       std::to_string(timeout.count()) + " ms");
      }
    }
  }
  spin.Finished(began);
  return state_->status;
}

const std::string& Handle::name() const {
  return state_ ? state_->name : kNoName;
}
const std::vector<char>& Handle::output() const {
  return state_ ? state_->output : kNoOutput;
}
const std::vector<int64_t>& Handle::output_counts() const {
  return state_ ? state_->output_counts : kNoCounts;
}

}  // namespace kolo
