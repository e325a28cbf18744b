// A job's scratch directory: where kolo-bench's commands have their jobs
// write result JSON, logs and checkpoints. Removed, with everything in it,
// when the ScratchDir goes, on every return path, so that no command leaves
// /tmp/kolo-bench-* behind.
#ifndef KOLO_TOOLS_KOLO_BENCH_SCRATCH_DIR_H_
#define KOLO_TOOLS_KOLO_BENCH_SCRATCH_DIR_H_

#include <filesystem>
#include <string>

#include "kolo/status.h"

namespace kolo::bench {

// Owns a fresh directory /tmp/kolo-bench-<name>-XXXXXX. Move-only; the
// moved-from object owns nothing. Not thread-safe.
class ScratchDir {
 public:
  // kInternal when the directory cannot be made.
  static StatusOr<ScratchDir> Create(const std::string& name);

  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&& other) noexcept;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();

  const std::filesystem::path& path() const { return path_; }
  // `name` inside the directory.
  std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 private:
  explicit ScratchDir(std::filesystem::path path) : path_(std::move(path)) {}
  void Remove();

  std::filesystem::path path_;
};

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_SCRATCH_DIR_H_
