// What a person sees of `kolorun -np 2 kolo-train` in a terminal: rank 0's
// progress line redrawn in place through kolorun, behind its tag, and one
// line per epoch when kolorun's stdout is a file. The terminal is a tmux
// session of a fixed size on a private socket; its screen is read with
// capture-pane while the job runs, and the bytes the job wrote to it with
// pipe-pane.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

namespace fs = std::filesystem;
using kolo::testing::Describe;
using kolo::testing::Lines;
using kolo::testing::OnPath;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kKoloTrain = KOLO_TRAIN_PATH;
constexpr auto kLimit = std::chrono::seconds(120);

// Two epochs of 16,000 synthetic images at batch 16 per rank: 500 steps per
// epoch, a few seconds, long enough to see the line change.
std::string TrainCommand() {
  return std::string(kKolorun) + " -np 2 " + kKoloTrain +
         " --threads 1 --model lenet --dataset synthetic --image-size 28"
         " --epochs 2 --train-subset 16000 --test-subset 64 --batch-size 16";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + part.size())) {
    ++n;
  }
  return n;
}

// A progress line of rank 0 as relayed: "[0]<stdout>: epoch 1/2  step
// 37/500  loss ...".
bool IsProgressLine(const std::string& line) {
  static const std::regex kProgress(
      R"(\[0\]<stdout>: epoch [0-9]+/2  step [0-9]+/[0-9]+  loss .*ETA .*)");
  return std::regex_match(line, kProgress);
}

// A tmux server of its own, on a socket in a fresh directory; killed, with
// whatever runs in it, and the directory removed when the test ends.
class Tmux {
 public:
  Tmux() {
    std::string pattern = (fs::temp_directory_path() / "kolo_tmux_XXXXXX");
    dir_ = mkdtemp(pattern.data());
  }
  ~Tmux() {
    Run({"kill-server"});
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  const fs::path& dir() const { return dir_; }

  RunResult Run(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {TmuxPath(), "-S", dir_ / "socket"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv, {}, std::chrono::seconds(20));
  }
  // The visible screen, one string per line, trailing blank lines dropped.
  std::vector<std::string> Screen() const {
    std::vector<std::string> lines = Lines(Run({"capture-pane", "-p"}).out);
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    return lines;
  }

  // tmux as found on $PATH (RunProgram takes a path).
  static std::string TmuxPath() {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path != nullptr ? path : "");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (access((dir + "/tmux").c_str(), X_OK) == 0) return dir + "/tmux";
    }
    return "tmux";
  }

 private:
  fs::path dir_;
};

TEST(KoloTrainProgress, RedrawnInPlaceThroughKolorunOnATerminal) {
  KOLO_REQUIRE_OR_SKIP(OnPath("tmux"), "tmux (Debian package tmux)");
  Tmux tmux;
  const fs::path go = tmux.dir() / "go";
  const fs::path exit_file = tmux.dir() / "exit";
  const fs::path raw = tmux.dir() / "raw";
  // The job waits for pipe-pane to be in place; the pane then stays open so
  // that its last screen can be read.
  const std::string script =
      "while [ ! -e " + go.string() + " ]; do sleep 0.05; done; " +
      TrainCommand() + "; echo $? > " + exit_file.string() + ".tmp; mv " +
      exit_file.string() + ".tmp " + exit_file.string() + "; sleep 600";
  RunResult started = tmux.Run(
      {"new-session", "-d", "-x", "160", "-y", "40", "/bin/sh", "-c", script});
  ASSERT_EQ(started.exit_code, 0) << Describe(started);
  RunResult piped = tmux.Run({"pipe-pane", "-O", "cat > " + raw.string()});
  ASSERT_EQ(piped.exit_code, 0) << Describe(piped);
  std::ofstream(go).close();

  // Every distinct progress line seen, and the most on one screen.
  std::set<std::string> seen;
  size_t most_on_one_screen = 0;
  const auto deadline = std::chrono::steady_clock::now() + kLimit;
  while (!fs::exists(exit_file) &&
         std::chrono::steady_clock::now() < deadline) {
    size_t on_screen = 0;
    for (const std::string& line : tmux.Screen()) {
      if (!IsProgressLine(line)) continue;
      ++on_screen;
      seen.insert(line);
    }
    most_on_one_screen = std::max(most_on_one_screen, on_screen);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(exit_file))
      << "the job did not end in " << kLimit.count() << " s";
  const std::vector<std::string> screen = tmux.Screen();
  std::string shown;
  for (const std::string& line : screen) shown += line + "\n";
  EXPECT_EQ(ReadFile(exit_file), "0\n") << shown;

  // The line changed in place: several states, never two lines at once.
  EXPECT_GE(seen.size(), 2u) << shown;
  EXPECT_EQ(most_on_one_screen, 1u) << shown;
  // At the end, each epoch's line in its place and no progress line left.
  int epoch_lines = 0;
  for (const std::string& line : screen) {
    EXPECT_FALSE(IsProgressLine(line)) << shown;
    if (line.rfind("[0]<stdout>: epoch ", 0) == 0 &&
        line.find("test accuracy") != std::string::npos) {
      ++epoch_lines;
    }
  }
  EXPECT_EQ(epoch_lines, 2) << shown;
  EXPECT_THAT(shown, HasSubstr("[0]<stdout>: # parameter checksum"));

  // The bytes: rank 0's redraws, each behind its tag, come back to the
  // line's start with '\r'.
  const std::string bytes = ReadFile(raw);
  EXPECT_GE(Count(bytes, "\r[0]<stdout>: epoch 1/2  step "), 2) << bytes;
  EXPECT_GE(Count(bytes, "\r[0]<stdout>: epoch 2/2  step "), 2);
  // Rank 1's stdout is a pipe: it draws nothing in place.
  EXPECT_EQ(Count(bytes, "[1]<stdout>: epoch"), 0);
}

TEST(KoloTrainProgress, OneLinePerEpochWhenStdoutIsAFile) {
  std::string pattern = (fs::temp_directory_path() / "kolo_progress_XXXXXX");
  const fs::path dir = mkdtemp(pattern.data());
  const fs::path out = dir / "out.txt";
  RunResult run = RunProgram(
      {"/bin/sh", "-c", TrainCommand() + " > " + out.string()}, {}, kLimit);
  const std::string text = ReadFile(out);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  ASSERT_EQ(run.exit_code, 0) << Describe(run) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(Count(text, "[0]<stdout>: epoch 1/2  train loss"), 1) << text;
  EXPECT_EQ(Count(text, "[0]<stdout>: epoch 2/2  train loss"), 1) << text;
  EXPECT_THAT(text, Not(HasSubstr("  step ")));
}

}  // namespace
