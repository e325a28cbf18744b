// SharedFutex between threads of one process: a shared futex word behaves
// the same between threads as between processes.
#include "transport/futex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(FutexTest, ARingWakesASleeperLongBeforeItsLimit) {
  SharedFutex futex;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    // Loops as a caller must: a sleep may end spuriously.
    while (futex.word.load() == 0) {
      futex.Sleep(seconds(30), [](uint32_t seen) { return seen != 0; });
    }
    woke = true;
  });
  while (futex.sleepers.load() == 0) std::this_thread::yield();
  const Clock::time_point rang = Clock::now();
  futex.Ring();
  sleeper.join();
  EXPECT_TRUE(woke);
  EXPECT_LT(Clock::now() - rang, seconds(10));
  EXPECT_EQ(futex.word.load(), 1u);
  EXPECT_EQ(futex.sleepers.load(), 0u);
}

TEST(FutexTest, ASleepWhoseConditionHoldsReturnsAtOnce) {
  SharedFutex futex;
  const Clock::time_point began = Clock::now();
  futex.Sleep(seconds(30), [](uint32_t) { return true; });
  EXPECT_LT(Clock::now() - began, seconds(10));
  EXPECT_EQ(futex.sleepers.load(), 0u);
}

TEST(FutexTest, AnUnrungSleepEndsAtItsLimit) {
  SharedFutex futex;
  const Clock::time_point began = Clock::now();
  futex.Sleep(milliseconds(20), [](uint32_t) { return false; });
  EXPECT_GE(Clock::now() - began, milliseconds(15));
  // Zero or less does not sleep at all.
  futex.Sleep(milliseconds(0), [](uint32_t) { return false; });
  EXPECT_EQ(futex.sleepers.load(), 0u);
}

TEST(FutexTest, AWakeWithoutSleepersLeavesTheWordAlone) {
  SharedFutex futex;
  futex.WakeSleepers();
  EXPECT_EQ(futex.word.load(), 0u);
  futex.Ring();
  futex.Ring();
  EXPECT_EQ(futex.word.load(), 2u);
}

}  // namespace
}  // namespace kolo
