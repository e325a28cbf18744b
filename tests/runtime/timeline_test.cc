#include "runtime/timeline.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace kolo {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "kolo_timeline_" + name + "_" +
         std::to_string(::getpid()) + ".json";
}

std::unique_ptr<Timeline> OpenOrDie(const std::string& path, int32_t rank) {
  StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Open(path, rank);
  if (!timeline.ok()) ADD_FAILURE() << timeline.status().ToString();
  return std::move(timeline).value();
}

// Parses the whole file as it is on disk now; a discarded value fails the
// test with the file's tail, which is where a torn write would show.
json ParseFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json trace = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const std::string& s = text.str();
  EXPECT_FALSE(trace.is_discarded())
      << path << " does not parse; it ends with: "
      << s.substr(s.size() > 200 ? s.size() - 200 : 0);
  return trace;
}

struct Summary {
  std::string process_name;
  std::map<int64_t, std::string> rows;    // tid -> thread_name
  std::map<std::string, int64_t> begins;  // row name -> "B" events
  std::set<std::string> phases;
  int64_t marks = 0;
};

// Checks what every timeline file must satisfy: rows are named before use,
// ts is non-negative and never goes back on a row, no "E" without an open
// "B", and (when `closed`) every "B" has its "E".
Summary Summarize(const json& trace, bool closed) {
  Summary summary;
  EXPECT_TRUE(trace.is_array());
  std::map<int64_t, int64_t> depth;
  std::map<int64_t, int64_t> last_ts;
  for (const json& event : trace) {
    const std::string ph = event.at("ph");
    EXPECT_EQ(event.at("pid"), 0) << event;
    if (ph == "M") {
      if (event.at("name") == "process_name") {
        summary.process_name = event.at("args").at("name");
      } else {
        EXPECT_EQ(event.at("name"), "thread_name") << event;
        const int64_t tid = event.at("tid");
        EXPECT_EQ(summary.rows.count(tid), 0u) << "row named twice: " << event;
        summary.rows[tid] = event.at("args").at("name");
      }
      continue;
    }
    const int64_t tid = event.at("tid");
    const int64_t ts = event.at("ts");
    EXPECT_EQ(summary.rows.count(tid), 1u)
        << "row used before named: " << event;
    EXPECT_GE(ts, 0) << event;
    if (last_ts.count(tid)) {
      EXPECT_GE(ts, last_ts[tid]) << event;
    }
    last_ts[tid] = ts;
    if (ph == "B") {
      ++depth[tid];
      ++summary.begins[summary.rows[tid]];
      summary.phases.insert(event.at("name").get<std::string>());
    } else if (ph == "E") {
      EXPECT_GT(depth[tid], 0) << "E without B: " << event;
      --depth[tid];
    } else {
      EXPECT_EQ(ph, "i") << event;
      EXPECT_EQ(event.at("s"), "t") << event;
      EXPECT_EQ(tid, 0) << event;
      ++summary.marks;
    }
  }
  if (closed) {
    for (const auto& [tid, open] : depth) {
      EXPECT_EQ(open, 0) << "row " << tid << " (" << summary.rows[tid] << ")";
    }
  }
  return summary;
}

TEST(TimelineTest, ThreadsProduceMatchedPairsAndEscapedNames) {
  constexpr int kThreads = 4;
  constexpr int kSteps = 250;
  constexpr int kMarks = 100;
  const std::string path = TempPath("threads");
  auto name = [](int thread, int which) {
    return which == 0
               ? "layer" + std::to_string(thread) + ".weight"
               : "odd \"" + std::to_string(thread) + "\" \\ name\n\t\x01";
  };
  {
    std::unique_ptr<Timeline> timeline = OpenOrDie(path, 3);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int step = 0; step < kSteps; ++step) {
          timeline->Begin(name(t, 0), "NEGOTIATE", Clock::now());
          timeline->Begin(name(t, 0), "COLLECTIVE", Clock::now());
          timeline->End(name(t, 0), Clock::now());
          timeline->End(name(t, 0), Clock::now());
          timeline->Begin(name(t, 1), "COPY_IN", Clock::now());
          timeline->End(name(t, 1), Clock::now());
        }
      });
    }
    for (int i = 0; i < kMarks; ++i) timeline->Mark("cycle", Clock::now());
    for (std::thread& thread : threads) thread.join();
  }  // the destructor writes what is still queued

  const Summary summary = Summarize(ParseFile(path), /*closed=*/true);
  EXPECT_EQ(summary.process_name, "kolo rank 3");
  std::set<std::string> expected_rows = {"cycles"};
  for (int t = 0; t < kThreads; ++t) {
    expected_rows.insert(name(t, 0));
    expected_rows.insert(name(t, 1));
    EXPECT_EQ(summary.begins.at(name(t, 0)), 2 * kSteps) << name(t, 0);
    EXPECT_EQ(summary.begins.at(name(t, 1)), kSteps) << name(t, 1);
  }
  std::set<std::string> rows;
  for (const auto& [tid, row] : summary.rows) rows.insert(row);
  EXPECT_EQ(rows, expected_rows);
  EXPECT_EQ(summary.rows.at(0), "cycles");
  EXPECT_EQ(summary.phases,
            (std::set<std::string>{"NEGOTIATE", "COLLECTIVE", "COPY_IN"}));
  EXPECT_EQ(summary.marks, kMarks);
  std::remove(path.c_str());
}

TEST(TimelineTest, FileParsesAfterEveryFlush) {
  constexpr int kRounds = 10;
  constexpr int kTensors = 3;
  const std::string path = TempPath("flush");
  std::unique_ptr<Timeline> timeline = OpenOrDie(path, 0);
  Summarize(ParseFile(path), /*closed=*/true);  // parses before any event
  timeline->Begin("whole run", "WAIT_FOR_OTHERS", Clock::now());
  for (int round = 1; round <= kRounds; ++round) {
    for (int t = 0; t < kTensors; ++t) {
      const std::string tensor = "t" + std::to_string(t);
      timeline->Begin(tensor, "COLLECTIVE", Clock::now());
      timeline->End(tensor, Clock::now());
    }
    timeline->Mark("cycle", Clock::now());
    timeline->Flush();
    Summary summary = Summarize(ParseFile(path), /*closed=*/false);
    EXPECT_EQ(summary.marks, round);
    for (int t = 0; t < kTensors; ++t) {
      EXPECT_EQ(summary.begins["t" + std::to_string(t)], round);
    }
  }
  timeline->End("whole run", Clock::now());
  timeline.reset();
  EXPECT_EQ(Summarize(ParseFile(path), /*closed=*/true).begins["whole run"], 1);
  std::remove(path.c_str());
}

TEST(TimelineTest, SigkillMidStreamLeavesParseableFile) {
  const std::string path = TempPath("sigkill");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child writes like a training loop until it is killed; it never
    // returns into gtest. It pauses each step as a real loop does: a writer
    // that never catches up spends its time in multi-page writes, which a
    // SIGKILL can cut short (see the layout note in timeline.cc).
    ::close(ready[0]);
    StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Open(path, 1);
    if (!timeline.ok()) ::_exit(2);
    for (int64_t step = 0;; ++step) {
      for (int t = 0; t < 8; ++t) {
        const std::string tensor = "grad" + std::to_string(t);
        (*timeline)->Begin(tensor, "COLLECTIVE", Clock::now());
        (*timeline)->End(tensor, Clock::now());
      }
      (*timeline)->Mark("cycle", Clock::now());
      if (step == 0) {
        (*timeline)->Flush();
        if (::write(ready[1], "x", 1) != 1) ::_exit(3);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  ::close(ready[1]);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "child failed to open " << path;
  ::close(ready[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL);

  Summary summary = Summarize(ParseFile(path), /*closed=*/false);
  EXPECT_EQ(summary.process_name, "kolo rank 1");
  EXPECT_GE(summary.begins["grad0"], 1);
  EXPECT_GE(summary.marks, 1);
  std::printf("killed child left %lld marks\n",
              static_cast<long long>(summary.marks));
  std::remove(path.c_str());
}

TEST(TimelineTest, OpenInMissingDirectoryNamesThePath) {
  const std::string path = ::testing::TempDir() + "kolo_no_such_dir/t.json";
  StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Open(path, 0);
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(timeline.status().message(), HasSubstr(path));
}

bool SomeThreadIsNamed(const std::string& wanted) {
  bool found = false;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return false;
  while (dirent* entry = ::readdir(tasks)) {
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name +
                       "/comm");
    std::string name;
    if (std::getline(comm, name) && name == wanted) found = true;
  }
  ::closedir(tasks);
  return found;
}

TEST(TimelineTest, WriterThreadIsNamed) {
  const std::string path = TempPath("name");
  std::unique_ptr<Timeline> timeline = OpenOrDie(path, 0);
  // The writer names itself once it runs, which may be after Open returns.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  while (!SomeThreadIsNamed("kolo-timeline") && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(SomeThreadIsNamed("kolo-timeline"));
  timeline.reset();
  std::remove(path.c_str());
}

// Not a benchmark: it only shows that enqueueing costs the caller little and
// that nothing is lost. The time is logged; the bound is deliberately loose.
TEST(TimelineTest, HundredThousandEventsEnqueueQuickly) {
  constexpr int kPairs = 50'000;
  const std::string path = TempPath("many");
  std::unique_ptr<Timeline> timeline = OpenOrDie(path, 0);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < kPairs; ++i) {
    timeline->Begin("tensor", "COLLECTIVE", start);
    timeline->End("tensor", start);
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("enqueued %d events in %.1f ms (%.0f ns each)\n", 2 * kPairs,
              seconds * 1e3, seconds * 1e9 / (2 * kPairs));
  EXPECT_LT(seconds, 5.0);
  timeline.reset();
  EXPECT_EQ(Summarize(ParseFile(path), /*closed=*/true).begins["tensor"],
            kPairs);
  std::remove(path.c_str());
}

// A process that initialises again appends a section (a Chrome-trace pid)
// per Init; the earlier sections' events stay.
TEST(TimelineTest, LaterSectionsAppendAndKeepEarlierOnes) {
  const std::string path = TempPath("sections");
  for (int32_t section = 0; section < 3; ++section) {
    StatusOr<std::unique_ptr<Timeline>> timeline =
        Timeline::Open(path, 0, section);
    ASSERT_TRUE(timeline.ok()) << timeline.status().ToString();
    const std::string tensor = "t" + std::to_string(section);
    (*timeline)->Begin(tensor, "NEGOTIATE", Clock::now());
    (*timeline)->End(tensor, Clock::now());
  }
  const json trace = ParseFile(path);
  std::map<int64_t, std::set<std::string>> tensors_by_section;
  std::set<int64_t> named_sections;
  std::map<std::pair<int64_t, int64_t>, std::string> rows;
  for (const json& event : trace) {
    const int64_t pid = event["pid"].get<int64_t>();
    if (event["name"] == "process_name") named_sections.insert(pid);
    if (event["name"] == "thread_name") {
      rows[{pid, event["tid"].get<int64_t>()}] = event["args"]["name"];
    }
    if (event["ph"] == "B")
      tensors_by_section[pid].insert(rows[{pid, event["tid"]}]);
  }
  EXPECT_EQ(named_sections, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(tensors_by_section[0], std::set<std::string>{"t0"});
  EXPECT_EQ(tensors_by_section[1], std::set<std::string>{"t1"});
  EXPECT_EQ(tensors_by_section[2], std::set<std::string>{"t2"});
  std::remove(path.c_str());
}

TEST(TimelineTest, AppendingToAFileKoloDidNotWriteIsAnError) {
  const std::string path = TempPath("foreign");
  std::ofstream(path) << "my notes\n";
  StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Open(path, 0, 1);
  ASSERT_FALSE(timeline.ok());
  EXPECT_THAT(timeline.status().message(), HasSubstr(path));
  EXPECT_THAT(timeline.status().message(),
              HasSubstr("does not end as kolo's timelines do"));
  std::ifstream in(path);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "my notes");  // left as it was
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo
