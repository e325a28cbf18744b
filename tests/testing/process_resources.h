// What a process holds that a leak would grow: its threads, its file
// descriptors and its mappings of kolo's shared-memory segments
// (/dev/shm/kolo-*, also once unlinked). The workers that re-initialise
// kolo again and again compare a count early on with one at the end.
#ifndef KOLO_TESTS_TESTING_PROCESS_RESOURCES_H_
#define KOLO_TESTS_TESTING_PROCESS_RESOURCES_H_

#include <dirent.h>

#include <cstdint>
#include <fstream>
#include <string>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KOLO_TESTING_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KOLO_TESTING_SANITIZER_ALLOCATOR 1
#endif
#endif
#ifdef KOLO_TESTING_SANITIZER_ALLOCATOR
#include <sanitizer/allocator_interface.h>
#endif

namespace kolo::testing {

struct ProcessResources {
  int threads = 0;
  int fds = 0;
  int shm_mappings = 0;

  std::string ToString() const {
    return "threads " + std::to_string(threads) + ", fds " +
           std::to_string(fds) + ", shm mappings " +
           std::to_string(shm_mappings);
  }
  // Whether anything grew since `earlier`.
  bool GrewSince(const ProcessResources& earlier) const {
    return threads > earlier.threads || fds > earlier.fds ||
           shm_mappings > earlier.shm_mappings;
  }
};

inline int CountDirectoryEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

inline ProcessResources MeasureProcessResources() {
  ProcessResources r;
  r.threads = CountDirectoryEntries("/proc/self/task");
  // opendir holds one descriptor while counting: the same in every count.
  r.fds = CountDirectoryEntries("/proc/self/fd");
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/kolo-") != std::string::npos) ++r.shm_mappings;
  }
  return r;
}

// The process's resident set (VmRSS in /proc/self/status), in bytes; -1
// when it cannot be read.
inline int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// The memory a process holds on to, in bytes, for tests that check that
// many requests leave it flat: the resident set, except under
// AddressSanitizer, whose quarantine keeps freed blocks resident (several
// MiB after a thousand connections) until it recycles them, and
// ThreadSanitizer, whose shadow memory grows with every new thread's
// stack; there the sanitizer allocator's count of blocks still allocated,
// which a kept buffer grows and a freed one does not.
inline int64_t HeldMemoryBytes() {
#ifdef KOLO_TESTING_SANITIZER_ALLOCATOR
  return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
  return ResidentBytes();
#endif
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_PROCESS_RESOURCES_H_
