// WriteFileAtomically: a plain write, two writers of one path that never
// tear it, a crash between the write and the rename that leaves the old
// file (and later writes working), and errors that name the path.
#include "common/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/scratch_dir.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

std::string Read(const std::string& path) {
  StatusOr<std::string> text = ReadWholeFile(path);
  return text.ok() ? *text : "<" + text.status().ToString() + ">";
}

// The names in `dir`, so that a test sees leftover temporary files.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  return names;
}

TEST(AtomicFileTest, WritesAndReplacesTheWholeFile) {
  ScratchDir dir("kolo_atomic_file");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/state.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  EXPECT_EQ(Read(path), "first");
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(Read(path), "second, longer");
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(Read(path), "");
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"state.json"});
  EXPECT_EQ(
      std::filesystem::status(path).permissions() & std::filesystem::perms::all,
      std::filesystem::perms(0644));
}

// Two threads write one path over and over, each its own contents, while a
// third reads it: every read finds one writer's contents whole.
TEST(AtomicFileTest, TwoWritersOfOnePathNeverTearIt) {
  ScratchDir dir("kolo_atomic_file");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/shared.bin";
  const std::string a(1 << 20, 'a');
  const std::string b((1 << 20) + 4096, 'b');
  ASSERT_TRUE(WriteFileAtomically(path, a).ok());
  std::atomic<int> writing{2};
  std::atomic<int> failures{0};
  auto writer = [&](const std::string& contents) {
    for (int i = 0; i < 40; ++i)
      if (!WriteFileAtomically(path, contents).ok()) ++failures;
    --writing;
  };
  std::thread first(writer, a);
  std::thread second(writer, b);
  int reads = 0;
  int torn = 0;
  while (writing.load() > 0) {
    const std::string seen = Read(path);
    ++reads;
    if (seen != a && seen != b) ++torn;
  }
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(torn, 0) << "of " << reads << " reads";
  const std::string last = Read(path);
  EXPECT_TRUE(last == a || last == b) << last.size() << " bytes";
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"shared.bin"});
}

// A child process dies where a crash hurts most: the new contents durable
// in the temporary file, not yet renamed.
TEST(AtomicFileTest, ACrashBeforeTheRenameLeavesTheOldFile) {
  ScratchDir dir("kolo_atomic_file");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/checkpoint.pt";
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SetBeforeRenameHookForTesting(
        [](const std::string&, const std::string&) { ::_exit(42); });
    (void)WriteFileAtomically(path, "new contents");
    ::_exit(0);  // the hook did not run
  }
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status));
  ASSERT_EQ(WEXITSTATUS(wait_status), 42) << "the hook never ran";
  EXPECT_EQ(Read(path), "old contents");
  // The crash left its temporary file, hidden, beside the old one.
  EXPECT_EQ(Names(dir.path()).size(), 2u);
  ASSERT_TRUE(WriteFileAtomically(path, "after the crash").ok());
  EXPECT_EQ(Read(path), "after the crash");
}

TEST(AtomicFileTest, AnUnwritableDirectoryIsNamed) {
  ScratchDir dir("kolo_atomic_file");
  ASSERT_FALSE(dir.path().empty());
  // A regular file where the directory should be: unwritable even for root.
  const std::string not_a_directory = dir.path() + "/plain";
  std::ofstream(not_a_directory) << "x";
  const std::string path = not_a_directory + "/out.json";
  Status status = WriteFileAtomically(path, "{}");
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_THAT(status.message(),
              HasSubstr("cannot create a temporary file to write " + path +
                        ": Not a directory"));
  // Renaming over a directory fails after the write: the temporary goes.
  const std::string directory = dir.path() + "/taken";
  std::filesystem::create_directory(directory);
  status = WriteFileAtomically(directory, "{}");
  EXPECT_THAT(status.message(), HasSubstr("cannot rename"));
  EXPECT_THAT(status.message(), HasSubstr(directory));
  EXPECT_EQ(Names(dir.path()).size(), 2u);  // plain, taken
}

}  // namespace
}  // namespace kolo
