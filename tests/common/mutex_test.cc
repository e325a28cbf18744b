// Mutex, MutexLock and CondVar (src/common/mutex.h): mutual exclusion, and
// waits that end when notified or when their time is up.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace kolo {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class Counter {
 public:
  void Add() {
    MutexLock lock(&mutex_);
    ++value_;
    if (value_ == target_) reached_.NotifyAll();
  }
  // Waits until value() reaches `target` or `timeout` passes; false then.
  bool WaitFor(int64_t target, milliseconds timeout) {
    const auto deadline = steady_clock::now() + timeout;
    MutexLock lock(&mutex_);
    target_ = target;
    while (value_ < target_) {
      if (!reached_.WaitUntil(&mutex_, deadline)) return value_ >= target_;
    }
    return true;
  }
  int64_t value() {
    MutexLock lock(&mutex_);
    return value_;
  }

 private:
  Mutex mutex_;
  CondVar reached_;
  int64_t value_ KOLO_GUARDED_BY(mutex_) = 0;
  int64_t target_ KOLO_GUARDED_BY(mutex_) = -1;
};

TEST(MutexTest, IncrementsFromManyThreadsAreNotLost) {
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) counter.Add();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 40000);
}

TEST(MutexTest, TryLockFailsWhileAnotherHoldsIt) {
  Mutex mutex;
  mutex.Lock();
  bool got = true;
  std::thread([&] { got = mutex.TryLock(); }).join();
  EXPECT_FALSE(got);
  mutex.Unlock();
  if (mutex.TryLock()) {
    mutex.Unlock();
  } else {
    ADD_FAILURE() << "TryLock failed on a free mutex";
  }
}

TEST(CondVarTest, AWaiterWakesWhenNotified) {
  Counter counter;
  std::thread adder([&] {
    std::this_thread::sleep_for(milliseconds(20));
    for (int i = 0; i < 3; ++i) counter.Add();
  });
  EXPECT_TRUE(counter.WaitFor(3, milliseconds(10000)));
  adder.join();
}

TEST(CondVarTest, AWaitEndsAtItsDeadlineWithoutANotification) {
  Counter counter;
  const auto start = steady_clock::now();
  EXPECT_FALSE(counter.WaitFor(1, milliseconds(50)));
  const auto waited = steady_clock::now() - start;
  EXPECT_GE(waited, milliseconds(50));
  EXPECT_LT(waited, milliseconds(5000));

  Mutex mutex;
  CondVar never;
  MutexLock lock(&mutex);
  EXPECT_FALSE(never.WaitFor(&mutex, milliseconds(10)));
}

}  // namespace
}  // namespace kolo
