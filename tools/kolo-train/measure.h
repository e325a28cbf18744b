// What kolo-train measures about itself: elapsed time and peak memory.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>

namespace kolo::train {

inline double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The process's peak resident set so far, in bytes (0 if unknown).
inline int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

}  // namespace kolo::train
