// The entries of /dev/shm that this process's shm segments could have
// left (transport/shm_segments.h names them /kolo-<pid>-...): a test of an
// shm user expects none once its groups or links are gone.
#ifndef KOLO_TESTING_OWN_SHM_SEGMENTS_H_
#define KOLO_TESTING_OWN_SHM_SEGMENTS_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace kolo::testing {

inline std::vector<std::string> OwnShmSegments() {
  std::vector<std::string> found;
  const std::string prefix = "kolo-" + std::to_string(getpid()) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  return found;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTING_OWN_SHM_SEGMENTS_H_
