#include "child_watcher.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "test_signals.h"

namespace kolo {
namespace kolorun {
namespace {

SignalWatcher* Signals() { return TestSignals(); }

// A file that stands for kolorun's stdout or stderr.
class Capture {
 public:
  Capture() : file_(tmpfile()) {}
  ~Capture() { fclose(file_); }
  int fd() const { return fileno(file_); }
  std::string Text() const {
    std::string text;
    char buffer[4096];
    ssize_t n;
    off_t offset = 0;
    while ((n = pread(fd(), buffer, sizeof(buffer), offset)) > 0) {
      text.append(buffer, static_cast<size_t>(n));
      offset += n;
    }
    return text;
  }

 private:
  FILE* file_;
};

Child Start(const std::string& script) {
  ChildSpec spec;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  StatusOr<Child> child = SpawnChild(spec, Signals()->original_mask());
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  return *child;
}

RelayFormat Tagged(const std::string& tag, bool in_place = false) {
  RelayFormat format;
  format.stdout_prefix = tag + "<stdout>: ";
  format.stderr_prefix = tag + "<stderr>: ";
  format.stdout_in_place = in_place;
  return format;
}

// The owner's loop, reduced to its watching: until every child is reaped and
// every pipe closed, or 10 s.
void WatchToTheEnd(ChildWatcher* watcher) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((watcher->AnyRunning() || watcher->AnyStreamOpen()) &&
         std::chrono::steady_clock::now() < deadline) {
    ChildWatcher::Ready ready = watcher->Poll(100);
    ASSERT_EQ(ready.error, "");
    if (ready.signals) Signals()->ReadPending();
    watcher->ReapExited();
    if (!watcher->AnyRunning()) watcher->DrainAndCloseAll();
  }
  EXPECT_FALSE(watcher->AnyRunning());
}

struct Exit {
  size_t child;
  int wait_status;
  std::string stdout_then;  // what had been relayed on stdout by then
};

TEST(ChildWatcherTest, RelaysTaggedLinesThenReportsTheExitOnce) {
  Capture out, err;
  std::vector<Exit> exits;
  std::string noticed;
  ChildWatcher watcher(
      Signals(),
      [&](size_t child, int wait_status) {
        exits.push_back({child, wait_status, out.Text()});
      },
      out.fd(), err.fd());
  watcher.set_on_lines([&](const std::string& lines) { noticed += lines; });
  const size_t first = watcher.Add(
      Start("printf 'one\\ntwo'; echo oops >&2; exit 3"), Tagged("[0]"));
  const size_t second = watcher.Add(Start("echo fine"), Tagged("[1]"));
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(second, 1u);
  WatchToTheEnd(&watcher);

  const std::string stdout_text = out.Text();
  EXPECT_NE(stdout_text.find("[0]<stdout>: one\n"), std::string::npos);
  // The unterminated last line is relayed whole at the end of the stream.
  EXPECT_NE(stdout_text.find("[0]<stdout>: two\n"), std::string::npos);
  EXPECT_NE(stdout_text.find("[1]<stdout>: fine\n"), std::string::npos);
  EXPECT_EQ(err.Text(), "[0]<stderr>: oops\n");
  EXPECT_NE(noticed.find("[0]<stdout>: one\n"), std::string::npos);

  ASSERT_EQ(exits.size(), 2u);
  for (const Exit& exit : exits) {
    const bool is_first = exit.child == first;
    ASSERT_TRUE(WIFEXITED(exit.wait_status));
    EXPECT_EQ(WEXITSTATUS(exit.wait_status), is_first ? 3 : 0);
    // Its lines came before its exit was told.
    EXPECT_NE(exit.stdout_then.find(is_first ? "[0]<stdout>: one\n"
                                             : "[1]<stdout>: fine\n"),
              std::string::npos);
  }
  EXPECT_FALSE(watcher.running(first));
}

TEST(ChildWatcherTest, SignalAllReachesTheRunningChildren) {
  Capture out, err;
  std::vector<int> statuses;
  ChildWatcher watcher(
      Signals(),
      [&](size_t, int wait_status) { statuses.push_back(wait_status); },
      out.fd(), err.fd());
  watcher.Add(Start("echo up; exec sleep 30"), Tagged("[0]"));
  // Once it printed, it runs its sleep.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.Text().empty() && std::chrono::steady_clock::now() < deadline) {
    watcher.Poll(50);
  }
  watcher.SignalAll(SIGTERM);
  WatchToTheEnd(&watcher);
  ASSERT_EQ(statuses.size(), 1u);
  ASSERT_TRUE(WIFSIGNALED(statuses[0]));
  EXPECT_EQ(WTERMSIG(statuses[0]), SIGTERM);
}

TEST(ChildWatcherTest, KillAndReapAllEndsEverythingWithoutExitReports) {
  Capture out, err;
  int exits = 0;
  ChildWatcher watcher(
      Signals(), [&](size_t, int) { ++exits; }, out.fd(), err.fd());
  const size_t child = watcher.Add(Start("exec sleep 30"), Tagged("[0]"));
  watcher.KillAndReapAll();
  EXPECT_FALSE(watcher.running(child));
  EXPECT_FALSE(watcher.AnyRunning());
  EXPECT_FALSE(watcher.AnyStreamOpen());
  EXPECT_EQ(exits, 0);
  // Nothing is left to reap: the child is gone.
  EXPECT_EQ(waitpid(watcher.pid(child), nullptr, WNOHANG), -1);
}

TEST(ChildWatcherTest, MessagesGoAboveTheLineInPlace) {
  Capture out, err;
  ChildWatcher watcher(
      Signals(), [](size_t, int) {}, out.fd(), err.fd());
  // A pipe stands in for the terminal: the splitter is what is in place.
  watcher.Add(Start("printf 'a\\n\\rstep 1'; exec sleep 30"),
              Tagged("[0]", /*in_place=*/true));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.Text().find("step 1") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    watcher.Poll(50);
  }
  watcher.Message("hello");
  EXPECT_EQ(out.Text(),
            "[0]<stdout>: a\n[0]<stdout>: step 1\x1b[K"
            // Message(): the line is erased, the message written on stderr,
            // and the line drawn again.
            "\r\x1b[K[0]<stdout>: step 1\x1b[K");
  EXPECT_EQ(err.Text(), "kolorun: hello\n");
  watcher.KillAndReapAll();
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
