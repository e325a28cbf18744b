#include "scratch_dir.h"

#include <stdlib.h>

#include <utility>
#include <vector>

namespace kolo::bench {

namespace fs = std::filesystem;

StatusOr<ScratchDir> ScratchDir::Create(const std::string& name) {
  const std::string pattern = "/tmp/kolo-bench-" + name + "-XXXXXX";
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  if (mkdtemp(path.data()) == nullptr) {
    return Internal("cannot create a temporary directory in /tmp");
  }
  return ScratchDir(fs::path(path.data()));
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept
    : path_(std::exchange(other.path_, fs::path())) {}

ScratchDir& ScratchDir::operator=(ScratchDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, fs::path());
  }
  return *this;
}

ScratchDir::~ScratchDir() { Remove(); }

void ScratchDir::Remove() {
  if (path_.empty()) return;
  std::error_code ignored;
  fs::remove_all(path_, ignored);
  path_.clear();
}

}  // namespace kolo::bench
