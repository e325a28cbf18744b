#include "progress_line.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "gtest/gtest.h"

namespace kolo::bench {
namespace {

using std::chrono::milliseconds;

// A FILE* whose bytes the test reads back.
class Capture {
 public:
  Capture() : file_(open_memstream(&data_, &size_)) {}
  ~Capture() {
    std::fclose(file_);
    std::free(data_);
  }
  std::FILE* file() { return file_; }
  // What was written since the last call.
  std::string Take() {
    std::fflush(file_);
    std::string all(data_, size_);
    std::string fresh = all.substr(taken_);
    taken_ = all.size();
    return fresh;
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t taken_ = 0;
  std::FILE* file_;
};

// A clock the test moves by hand.
struct FakeClock {
  ProgressLine::Clock::time_point now{};
  std::function<ProgressLine::Clock::time_point()> Function() {
    return [this] { return now; };
  }
};

ProgressLine::Options InPlace(FakeClock* clock, int columns = 0) {
  ProgressLine::Options options;
  options.in_place = true;
  options.columns = columns;
  options.min_interval = milliseconds(100);
  options.now = clock->Function();
  return options;
}

TEST(ProgressLineTest, RedrawsInPlaceAtMostOncePerInterval) {
  Capture out;
  FakeClock clock;
  ProgressLine line(out.file(), InPlace(&clock, 80));
  line.Update("step 1");
  EXPECT_EQ(out.Take(), "\rstep 1\x1b[K");
  clock.now += milliseconds(99);
  line.Update("step 2");
  EXPECT_EQ(out.Take(), "");
  clock.now += milliseconds(1);
  line.Update("step 3");
  EXPECT_EQ(out.Take(), "\rstep 3\x1b[K");
  line.Update("step 4", /*force=*/true);
  EXPECT_EQ(out.Take(), "\rstep 4\x1b[K");
}

TEST(ProgressLineTest, PrintPutsALineAboveAndRedraws) {
  Capture out;
  FakeClock clock;
  ProgressLine line(out.file(), InPlace(&clock, 80));
  line.Print("before");
  EXPECT_EQ(out.Take(), "before\n");
  line.Update("step 1");
  out.Take();
  line.Print("warning");
  EXPECT_EQ(out.Take(), "\rwarning\x1b[K\n\rstep 1\x1b[K");
}

TEST(ProgressLineTest, FinishLeavesItsLineAndTheNextUpdateDrawsAtOnce) {
  Capture out;
  FakeClock clock;
  ProgressLine line(out.file(), InPlace(&clock, 80));
  line.Update("epoch 1 step 9");
  out.Take();
  line.Finish("epoch 1 done");
  EXPECT_EQ(out.Take(), "\repoch 1 done\x1b[K\n");
  line.Update("epoch 2 step 1");  // no time has passed
  EXPECT_EQ(out.Take(), "\repoch 2 step 1\x1b[K");
  line.Finish("");
  EXPECT_EQ(out.Take(), "\r\x1b[K");
  line.Finish("");
  EXPECT_EQ(out.Take(), "");
}

TEST(ProgressLineTest, CutsTheLineToTheTerminalWidth) {
  Capture out;
  FakeClock clock;
  ProgressLine line(out.file(), InPlace(&clock, 10));
  line.Update("0123456789abc");
  EXPECT_EQ(out.Take(), "\r012345678\x1b[K");
}

TEST(ProgressLineTest, ALineStillDrawnEndsWithANewline) {
  Capture out;
  FakeClock clock;
  {
    ProgressLine line(out.file(), InPlace(&clock, 80));
    line.Update("step 1");
    out.Take();
  }
  EXPECT_EQ(out.Take(), "\n");
}

TEST(ProgressLineTest, ElsewherePrintsOnlyTheLines) {
  Capture out;
  {
    ProgressLine::Options options;
    options.in_place = false;
    ProgressLine line(out.file(), options);
    line.Update("step 1");
    line.Update("step 2", /*force=*/true);
    EXPECT_EQ(out.Take(), "");
    line.Print("warning");
    line.Finish("epoch 1 done");
    line.Finish("");
    EXPECT_EQ(out.Take(), "warning\nepoch 1 done\n");
    line.Update("step 3");
  }
  EXPECT_EQ(out.Take(), "");
}

// A pseudo-terminal of `columns` columns, its slave end as a FILE*.
class Terminal {
 public:
  explicit Terminal(int columns) {
    master_ = posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0) return;
    const int slave = open(ptsname(master_), O_RDWR | O_NOCTTY);
    if (slave < 0) return;
    winsize size{};
    size.ws_row = 24;
    size.ws_col = static_cast<unsigned short>(columns);
    ioctl(slave, TIOCSWINSZ, &size);
    file_ = fdopen(slave, "w");
  }
  ~Terminal() {
    if (file_ != nullptr) std::fclose(file_);
    if (master_ >= 0) close(master_);
  }
  std::FILE* file() const { return file_; }
  // What reached the terminal so far.
  std::string Read() {
    std::string text;
    char buffer[256];
    pollfd ready{master_, POLLIN, 0};
    while (poll(&ready, 1, 200) > 0) {
      const ssize_t n = read(master_, buffer, sizeof(buffer));
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
    return text;
  }

 private:
  int master_ = -1;
  std::FILE* file_ = nullptr;
};

// Restores TERM when the test ends.
class ScopedTerm {
 public:
  explicit ScopedTerm(const char* value) {
    const char* old = std::getenv("TERM");
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    setenv("TERM", value, 1);
  }
  ~ScopedTerm() {
    if (had_) {
      setenv("TERM", old_.c_str(), 1);
    } else {
      unsetenv("TERM");
    }
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(ProgressLineTest, DrawsInPlaceOnlyOnATerminalThatIsNotDumb) {
  Terminal terminal(40);
  ASSERT_NE(terminal.file(), nullptr) << "cannot open a pseudo-terminal";
  Capture file;
  {
    ScopedTerm term("xterm");
    EXPECT_TRUE(DrawsInPlace(terminal.file()));
    EXPECT_FALSE(DrawsInPlace(file.file()));
    EXPECT_TRUE(ProgressLine(terminal.file()).in_place());
    EXPECT_FALSE(ProgressLine(file.file()).in_place());
  }
  ScopedTerm term("dumb");
  EXPECT_FALSE(DrawsInPlace(terminal.file()));
}

TEST(ProgressLineTest, AsksTheTerminalForItsWidth) {
  Terminal terminal(12);
  ASSERT_NE(terminal.file(), nullptr) << "cannot open a pseudo-terminal";
  FakeClock clock;
  ProgressLine line(terminal.file(), InPlace(&clock, /*columns=*/0));
  line.Update("0123456789abcdef");
  EXPECT_EQ(terminal.Read(), "\r0123456789a\x1b[K");
  line.Finish("");
  terminal.Read();
}

TEST(ProgressDurationTest, MinutesAndSecondsThenHours) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(42.4), "0:42");
  EXPECT_EQ(FormatDuration(725), "12:05");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
}

TEST(ProgressRunsTextTest, TheEtaAveragesTheFinishedRuns) {
  EXPECT_EQ(RunsProgressText(1, 12, "lenet kolo np 2", 0),
            "run 1/12: lenet kolo np 2  elapsed 0:00");
  // Two runs took 60 s: 30 s each, and 10 are left.
  EXPECT_EQ(RunsProgressText(3, 12, "lenet kolo np 2", 60),
            "run 3/12: lenet kolo np 2  elapsed 1:00  ETA 5:00");
}

TEST(ProgressRunsTest, DrawsEachRunAndPrintsAbove) {
  Capture out;
  {
    RunsProgress progress(2, out.file());
    progress.Start("a");
    progress.Print("a done");
    progress.Finish();
  }
  // A memstream is not a terminal: only the line about the run.
  EXPECT_EQ(out.Take(), "a done\n");
}

}  // namespace
}  // namespace kolo::bench
