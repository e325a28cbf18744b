// ScratchDir: a fresh directory for one test, under gtest's temporary
// directory ($TEST_TMPDIR or /tmp), removed with everything in it when the
// ScratchDir goes. Header-only, so that any test target can use it.
//
//   kolo::testing::ScratchDir dir("kolo_report");
//   ASSERT_FALSE(dir.path().empty());  // "" when it could not be made
//   std::ofstream(dir.path() + "/train.json") << text;
#ifndef KOLO_TESTS_TESTING_SCRATCH_DIR_H_
#define KOLO_TESTS_TESTING_SCRATCH_DIR_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kolo::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = ::testing::TempDir() + prefix + "_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_SCRATCH_DIR_H_
