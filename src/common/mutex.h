// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// the capability attributes of common/thread_annotations.h, so that clang
// checks every KOLO_GUARDED_BY field. They cost nothing over the standard
// types they wrap.
//
// Waiting on a condition is written as a loop, because the analysis does
// not look inside a predicate lambda:
//
//   MutexLock lock(&mutex_);
//   while (!done_) {
//     if (!wake_.WaitUntil(&mutex_, deadline)) break;  // timed out
//   }
//
// Thread-safety: as std::mutex and std::condition_variable.
#ifndef KOLO_COMMON_MUTEX_H_
#define KOLO_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace kolo {

class KOLO_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() KOLO_ACQUIRE() { mutex_.lock(); }
  void Unlock() KOLO_RELEASE() { mutex_.unlock(); }
  bool TryLock() KOLO_TRY_ACQUIRE(true) { return mutex_.try_lock(); }
  // Tells the analysis the caller holds the lock where it cannot see it.
  void AssertHeld() const KOLO_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mutex_;
};

// Holds a Mutex for its scope.
class KOLO_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) KOLO_ACQUIRE(mutex) : mutex_(mutex) {
    mutex_->Lock();
  }
  ~MutexLock() KOLO_RELEASE() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

// A condition variable bound to a Mutex at each wait. Waits may wake
// spuriously: callers loop on their condition.
class CondVar {
 public:
  void Wait(Mutex* mutex) KOLO_REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when the deadline passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mutex,
                 const std::chrono::time_point<Clock, Duration>& deadline)
      KOLO_REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    const bool woken =
        cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  // False when the time passed.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mutex, const std::chrono::duration<Rep, Period>& timeout)
      KOLO_REQUIRES(mutex) {
    return WaitUntil(mutex, std::chrono::steady_clock::now() + timeout);
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace kolo

#endif  // KOLO_COMMON_MUTEX_H_
