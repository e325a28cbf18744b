// A command's scratch directory under /tmp: where its jobs write their
// results, logs and checkpoints while it runs.
#pragma once

#include <filesystem>
#include <string>

#include "kolo/status.h"

namespace kolo::bench {

// Owns a fresh directory /tmp/kolo-bench-<command>-XXXXXX (mkdtemp, so no
// two runs share one) and removes it, with all it holds, when destroyed.
// Move-only; a moved-from ScratchDir removes nothing.
class ScratchDir {
 public:
  static StatusOr<ScratchDir> Create(const std::string& command);
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir();

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScratchDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace kolo::bench
