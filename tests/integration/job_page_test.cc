// The live job page end to end: a real two-rank LeNet job under
// `kolorun --metrics-port 0`, its page (src/metrics/job_page.html) opened
// in headless Chromium while the job trains, and the DOM Chromium built
// checked for what a person would look at: both charts drawn with data for
// every rank, the ranks running in the table, the slowest rank named. A
// screenshot is kept under $KOLO_TEST_ARTIFACTS when that is set.
//
// Every wait is bounded. kolorun is stopped with SIGTERM, which it forwards
// to the ranks; a kolorun that outlives its limit is SIGKILLed and takes the
// ranks with it (PR_SET_PDEATHSIG). Chromium runs under timeout(1) with a
// profile of its own, by which the test finds any process it left behind.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/socket.h"
#include "testing/child_process.h"
#include "testing/http_get.h"
#include "testing/requirements.h"
#include "testing/scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using kolo::testing::ChildProcess;
using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using kolo::testing::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kKoloTrain = KOLO_TRAIN_PATH;
constexpr const char* kFashionMnistDir = KOLO_FASHION_MNIST_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text between `open` (after it) and the next `close`, searching from
// `*at` and leaving `*at` past `close`; "" when either is missing.
std::string Between(const std::string& text, const std::string& open,
                    const std::string& close, size_t* at) {
  size_t start = text.find(open, *at);
  if (start == std::string::npos) return "";
  start += open.size();
  const size_t end = text.find(close, start);
  if (end == std::string::npos) return "";
  *at = end + close.size();
  return text.substr(start, end - start);
}

std::string Between(const std::string& text, const std::string& open,
                    const std::string& close) {
  size_t at = 0;
  return Between(text, open, close, &at);
}

// GET http://127.0.0.1:`port``path`; the body, or "" when there is no
// answer within two seconds.
std::string HttpGet(int port, const std::string& path) {
  return kolo::testing::HttpGet(port, path, std::chrono::seconds(2));
}

// How many values of history.ranks[rank][field] are not null.
int KnownPoints(const nlohmann::json& job, int rank, const char* field) {
  const nlohmann::json* values = nullptr;
  try {
    values = &job.at("history").at("ranks").at(std::to_string(rank)).at(field);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  int known = 0;
  for (const nlohmann::json& v : *values) known += v.is_number() ? 1 : 0;
  return known;
}

// Whether `pid` still runs: a zombie nobody reaps (kolorun's ranks once it
// has gone, where PID 1 does not reap) has stopped.
bool Running(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() &&
         stat[name_end + 2] != 'Z';
}

// Waits up to 10 s for the processes whose command line mentions `needle`
// (a browser profile of this test's) to exit, then kills those left and
// says how many there were. Chromium's helpers take a moment to notice that
// the browser has gone.
size_t KillLeftBehind(const std::string& needle) {
  std::vector<pid_t> left;
  for (auto end = Clock::now() + std::chrono::seconds(10);;) {
    left.clear();
    std::unique_ptr<DIR, int (*)(DIR*)> proc(opendir("/proc"), closedir);
    for (const dirent* entry; proc && (entry = readdir(proc.get()));) {
      const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (pid > 0 && pid != getpid() && Running(pid) &&
          ReadFile("/proc/" + std::to_string(pid) + "/cmdline").find(needle) !=
              std::string::npos) {
        left.push_back(pid);
      }
    }
    if (left.empty() || Clock::now() > end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (pid_t pid : left) kill(pid, SIGKILL);
  return left.size();
}

// Runs headless Chromium on `url` with `flags` under timeout(1), which
// kills its whole process group after 60 s; the profile lives in `home`.
RunResult RunChromium(const std::string& home,
                      const std::vector<std::string>& flags,
                      const std::string& url) {
  std::vector<std::string> argv = {
      "/usr/bin/timeout", "--kill-after=5", "60", "/usr/bin/chromium",
      "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
      "--no-first-run", "--user-data-dir=" + home + "/profile",
      // Virtual time: timers run as fast as the page lets them, and the
      // clock stops while a fetch is in flight, so the page's one-second
      // polls come about three times in this budget whatever the load.
      "--virtual-time-budget=3500"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(url);
  return RunProgram(argv, {{"HOME", home}}, std::chrono::seconds(90));
}

// `kolorun -np 2 --metrics-port 0 kolo-train ...` with its output in files,
// so that the test can read the page's address while the job runs.
// Stopped with SIGTERM, if it still runs, when it goes.
class TrainingJob {
 public:
  explicit TrainingJob(const std::string& dir)
      : out_(dir + "/kolorun.out"), err_(dir + "/kolorun.err") {
    // The shell sends kolorun's output to the files. Ten epochs take a
    // minute or more: the job is stopped once the page has been looked at.
    std::vector<std::string> argv = {"/bin/sh", "-c",
                                     "exec \"$@\" >\"$OUT\" 2>\"$ERR\"", "sh"};
    auto add = [&argv](const std::string& words) {
      std::istringstream in(words);
      for (std::string word; in >> word;) argv.push_back(word);
    };
    argv.push_back(kKolorun);
    add("-np 2 --metrics-port 0");
    argv.push_back(kKoloTrain);
    add("--threads 1 --model lenet --dataset fashion-mnist --epochs 10 "
        "--batch-size 32 --test-subset 500 --data-dir");
    argv.push_back(kFashionMnistDir);
    process_ = std::make_unique<ChildProcess>(
        argv, std::map<std::string, std::string>{{"OUT", out_}, {"ERR", err_}});
  }
  ~TrainingJob() {
    if (!stopped_) Stop();
  }

  // The port of the page's address that kolorun printed, or 0 when it
  // printed none within `limit`.
  int WaitForPort(std::chrono::seconds limit) {
    const std::string kPrefix = "the job's page at http://127.0.0.1:";
    for (auto end = Clock::now() + limit; Clock::now() < end;) {
      const std::string err = ReadFile(err_);
      const size_t at = err.find(kPrefix);
      if (at != std::string::npos && err.find('\n', at) != std::string::npos) {
        return std::atoi(err.c_str() + at + kPrefix.size());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }

  RunResult Stop() {
    stopped_ = true;
    process_->Signal(SIGTERM);
    RunResult result = process_->Wait(std::chrono::seconds(30));
    result.out = ReadFile(out_);
    result.err = ReadFile(err_);
    return result;
  }

  std::string Output() const { return ReadFile(out_) + ReadFile(err_); }

 private:
  const std::string out_;
  const std::string err_;
  std::unique_ptr<ChildProcess> process_;
  bool stopped_ = false;
};

// The <polyline> elements of the chart `id` whose data-rank is `rank` and
// that have at least two points.
int DrawnSeries(const std::string& dom, const std::string& id,
                const std::string& rank) {
  const std::string chart = Between(dom, "<svg id=\"" + id + "\"", "</svg>");
  int drawn = 0;
  size_t at = 0;
  for (std::string line;
       !(line = Between(chart, "<polyline", ">", &at)).empty();) {
    if (line.find(" data-rank=\"" + rank + "\"") == std::string::npos) {
      continue;
    }
    std::istringstream points(Between(line, " points=\"", "\""));
    int count = 0;
    for (std::string point; points >> point;) ++count;
    drawn += count >= 2 ? 1 : 0;
  }
  return drawn;
}

TEST(JobPage, ChromiumDrawsTheRunningJob) {
  KOLO_REQUIRE_OR_SKIP(access("/usr/bin/chromium", X_OK) == 0,
                       "/usr/bin/chromium (Debian package chromium; "
                       "scripts/setup.sh installs it)");
  KOLO_REQUIRE_OR_SKIP(
      fs::exists(fs::path(kFashionMnistDir) / "train-images-idx3-ubyte.gz"),
      "Fashion-MNIST at " << kFashionMnistDir << " (dataset-fashion-mnist)");
  ScratchDir dir("kolo_job_page");
  ASSERT_FALSE(dir.path().empty());
  const std::string home = dir.path() + "/home";
  fs::create_directories(home);

  TrainingJob job(dir.path());
  const int port = job.WaitForPort(std::chrono::seconds(30));
  ASSERT_GT(port, 0) << "no \"the job's page at\" line from kolorun:\n"
                     << job.Output();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";

  // Until both ranks have trained for a few sample periods: two points of
  // samples/s and of loss each, and step times enough to name the slowest.
  nlohmann::json state;
  auto trained = [&state] {
    if (!state.is_object() ||
        !state.value("slowest_rank", nlohmann::json()).is_number()) {
      return false;
    }
    for (int rank : {0, 1}) {
      if (KnownPoints(state, rank, "samples_per_second") < 2 ||
          KnownPoints(state, rank, "loss") < 2) {
        return false;
      }
    }
    return true;
  };
  for (auto end = Clock::now() + std::chrono::seconds(90);
       !trained() && Clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    state = nlohmann::json::parse(HttpGet(port, "/api/job"), nullptr,
                                  /*allow_exceptions=*/false);
  }
  ASSERT_TRUE(trained()) << "the job did not train within 90 s; api/job: "
                         << state.dump() << "\n"
                         << job.Output();
  std::set<pid_t> rank_pids;
  for (const nlohmann::json& rank : state.at("ranks")) {
    rank_pids.insert(rank.value("pid", pid_t{0}));
  }

  // The DOM the page built from its polls of api/job.
  RunResult dom = RunChromium(home, {"--dump-dom"}, url);
  ASSERT_EQ(dom.exit_code, 0) << Describe(dom);
  // For failure messages: the page as drawn, without its style and script.
  const std::string page = "<body" + Between(dom.out, "<body", "<script>");
  const std::string updates = Between(dom.out, "data-updates=\"", "\"");
  EXPECT_GE(std::atoi(updates.c_str()), 2) << page;
  for (const char* chart : {"throughput-chart", "loss-chart"}) {
    for (const char* rank : {"0", "1"}) {
      EXPECT_GE(DrawnSeries(dom.out, chart, rank), 1)
          << chart << " has no line of 2 points for rank " << rank << ":\n"
          << page;
    }
  }
  EXPECT_GE(DrawnSeries(dom.out, "throughput-chart", "sum"), 1) << page;
  for (const char* rank : {"0", "1"}) {
    const std::string row = Between(
        dom.out, "<tr data-rank=\"" + std::string(rank) + "\"", "</tr>");
    EXPECT_THAT(row, HasSubstr(">running</td>")) << "rank " << rank << ":\n"
                                                 << page;
  }
  // "slowest rank: <b>rank 1</b> on host (...)", and that row marked.
  const std::string slowest = Between(page, "<div id=\"slowest\">", "</div>");
  const std::string named = Between(slowest, "<b>rank ", "</b>");
  EXPECT_TRUE(named == "0" || named == "1") << slowest;
  EXPECT_THAT(page,
              HasSubstr("<tr data-rank=\"" + named + "\" class=\"slowest\">"))
      << page;
  EXPECT_THAT(page, Not(HasSubstr("class=\"shown\"")))
      << "the page says it is disconnected";

  // The page as drawn: a PNG of the window's size, larger than the page
  // without data (measured: 34 KB when every fetch failed, 68 KB for this
  // job 6 s in; the charts' anti-aliased lines compress poorly).
  const char* artifacts = std::getenv("KOLO_TEST_ARTIFACTS");
  const std::string screenshot =
      (artifacts != nullptr && *artifacts != '\0' ? std::string(artifacts)
                                                  : dir.path()) +
      "/job_page.png";
  if (artifacts != nullptr && *artifacts != '\0') {
    std::ofstream(std::string(artifacts) + "/job_page_dom.html") << dom.out;
  }
  RunResult shot = RunChromium(
      home, {"--screenshot=" + screenshot, "--window-size=1280,1400"}, url);
  ASSERT_EQ(shot.exit_code, 0) << Describe(shot);
  const std::string png = ReadFile(screenshot);
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto big_endian = [&png](size_t at) {
    uint32_t value = 0;
    for (size_t i = 0; i < 4; ++i) {
      value = (value << 8) | static_cast<uint8_t>(png[at + i]);
    }
    return value;
  };
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(big_endian(16), 1280u);
  EXPECT_EQ(big_endian(20), 1400u);
  EXPECT_GT(png.size(), 40000u) << screenshot;

  RunResult stopped = job.Stop();
  EXPECT_FALSE(stopped.timed_out) << Describe(stopped);
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << Describe(stopped);

  // Nothing left behind: the ranks, the exporter's port, the browsers
  // (whose helpers may take a moment to notice the browser left).
  for (pid_t pid : rank_pids) {
    EXPECT_FALSE(pid > 0 && Running(pid)) << "rank pid " << pid;
  }
  EXPECT_EQ(HttpGet(port, "/api/job"), "") << "the exporter still answers";
  EXPECT_EQ(KillLeftBehind(home + "/profile"), 0u)
      << "chromium processes outlived the browser";
}

}  // namespace
