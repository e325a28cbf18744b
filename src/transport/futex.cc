#include "transport/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace kolo {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::nanoseconds span) {
  if (span.count() <= 0) return;
  const struct timespec timeout = {
      static_cast<time_t>(span.count() / 1000000000),
      static_cast<long>(span.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          &timeout, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

}  // namespace kolo
