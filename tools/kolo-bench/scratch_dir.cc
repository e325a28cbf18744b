#include "scratch_dir.h"

#include <stdlib.h>

#include <system_error>
#include <utility>

namespace kolo::bench {

StatusOr<ScratchDir> ScratchDir::Create(const std::string& command) {
  std::string path = "/tmp/kolo-bench-" + command + "-XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    return Internal("cannot create a temporary directory in /tmp");
  }
  return ScratchDir(std::filesystem::path(path));
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept
    : path_(std::exchange(other.path_, {})) {}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ignored;  // a scratch dir left behind is no error
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace kolo::bench
