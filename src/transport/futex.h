// SharedFutex: a futex word in memory that processes share, with the count
// of the threads asleep on it, so that a waker skips the system call when
// nobody sleeps.
//
// The handshake. A sleeper registers (sleepers + 1), reads the word, looks
// at its condition once more, and sleeps only while the word still reads
// what it saw. A waker first changes what the sleeper looks at (the word
// itself, or a value beside it), then reads `sleepers`. Both sides are
// seq_cst, so either the waker sees the sleeper registered, or the
// sleeper's last look sees the change; a wake-up is never lost, and a
// waker that sees no sleeper makes no system call. A sleep ends at a
// wake, at its time limit, or spuriously: callers loop on their condition.
//
// Not FUTEX_PRIVATE: the word lives in a mapping shared between processes.
// The struct is two plain 32-bit words, so it can be placed in a shared
// segment (placement new) and read by every process that maps it.
#ifndef KOLO_TRANSPORT_FUTEX_H_
#define KOLO_TRANSPORT_FUTEX_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kolo {

// Sleeps while *word == expected, for at most `span` (rounded to whole
// nanoseconds; zero or less returns at once).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::nanoseconds span);
// Wakes every thread in FutexWait on `word`.
void FutexWakeAll(std::atomic<uint32_t>* word);

struct SharedFutex {
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> sleepers{0};  // threads between register and return

  // Wakes the sleepers, if there are any; the caller has already published
  // what they wait for.
  void WakeSleepers() {
    if (sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&word);
  }
  // Bumps the word and wakes its sleepers: "something changed, look".
  void Ring() {
    word.fetch_add(1, std::memory_order_seq_cst);
    WakeSleepers();
  }
  // The sleeper's side of the handshake: unless `done(seen)` holds for the
  // word's value `seen` read after registering, sleeps for at most `span`
  // or until the word moves on from `seen`.
  template <typename Done>
  void Sleep(std::chrono::nanoseconds span, Done done) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t seen = word.load(std::memory_order_seq_cst);
    if (!done(seen)) FutexWait(&word, seen, span);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
};
static_assert(sizeof(SharedFutex) == 8 &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "futex words are plain words");

}  // namespace kolo

#endif  // KOLO_TRANSPORT_FUTEX_H_
