// `kolorun --metrics-port`: one endpoint serves every rank of the host while
// the job runs, the page and the JSON beside it, the job's metrics folder
// is gone when kolorun is, a port already taken is an error naming it, and
// a program without kolorun serves its own with KOLO_METRICS_PORT. Real
// processes, loopback, ports chosen by the OS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "net/socket.h"
#include "testing/child_process.h"
#include "testing/http_get.h"

namespace {

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = KOLORUN_WORKER_PATH;

using kolo::testing::ChildProcess;
using kolo::testing::Describe;
using kolo::testing::RunResult;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The body of GET http://127.0.0.1:port/path ("" when it fails), and the
// head in `head`.
std::string HttpGet(int port, const std::string& path,
                    std::string* head = nullptr) {
  kolo::testing::HttpReply reply =
      kolo::testing::HttpRequest(port, "GET", path);
  if (head != nullptr) *head = reply.head;
  return reply.body;
}

// The port in kolorun's "metrics at http://127.0.0.1:PORT/metrics" line of
// `stderr_file`, waiting for it up to 15 s; 0 when it never came.
int WaitForMetricsPort(const std::string& stderr_file) {
  const std::regex url("metrics at http://127\\.0\\.0\\.1:([0-9]+)/metrics");
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline) {
    std::smatch match;
    std::string err = ReadFile(stderr_file);
    if (std::regex_search(err, match, url)) return std::stoi(match[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

std::string Temp(const std::string& name) {
  return ::testing::TempDir() + "kolorun_metrics_" + std::to_string(getpid()) +
         "_" + name;
}

// The value of the one series matching `pattern` in a scrape; -1 if none.
double SeriesValue(const std::string& scrape, const std::string& pattern) {
  std::smatch match;
  if (!std::regex_search(scrape, match,
                         std::regex(pattern + " ([0-9.e+]+)\n"))) {
    return -1;
  }
  return std::stod(match[1]);
}

TEST(KolorunMetricsTest, OneEndpointServesEveryRankUntilTheJobEnds) {
  const std::string err_file = Temp("err");
  ChildProcess job({"/bin/sh", "-c",
                    std::string("exec ") + kKolorun +
                        " -np 2 --metrics-port 0 --job-name mnist " + kWorker +
                        " allreduce 4000 2>" + err_file});
  const int port = WaitForMetricsPort(err_file);
  ASSERT_GT(port, 0) << ReadFile(err_file);

  // Both ranks' series appear while they run, counting up.
  std::string scrape;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(20);
  double rank0 = -1;
  double rank1 = -1;
  while (Clock::now() < deadline && (rank0 <= 0 || rank1 <= 0)) {
    scrape = HttpGet(port, "/metrics");
    rank0 = SeriesValue(scrape,
                        "test_worker_allreduces_total\\{job=\"mnist\",rank="
                        "\"0\",host=\"[^\"]+\"\\}");
    rank1 = SeriesValue(scrape,
                        "test_worker_allreduces_total\\{job=\"mnist\",rank="
                        "\"1\",host=\"[^\"]+\"\\}");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(rank0, 0) << scrape;
  ASSERT_GT(rank1, 0) << scrape;
  EXPECT_GT(SeriesValue(scrape,
                        "kolo_operations_total\\{job=\"mnist\",rank=\"1\","
                        "host=\"[^\"]+\",op=\"allreduce\"\\}"),
            0);
  EXPECT_THAT(scrape, HasSubstr("# TYPE kolo_engine_call_seconds histogram"));
  EXPECT_GT(SeriesValue(scrape,
                        "kolo_process_threads\\{job=\"mnist\",rank=\"0\","
                        "host=\"[^\"]+\"\\}"),
            0);
  std::string later = HttpGet(port, "/metrics");
  EXPECT_GE(SeriesValue(later,
                        "test_worker_allreduces_total\\{job=\"mnist\",rank="
                        "\"0\",host=\"[^\"]+\"\\}"),
            rank0);
  std::string head;
  EXPECT_THAT(HttpGet(port, "/", &head), HasSubstr("<html"));
  EXPECT_THAT(head, HasSubstr("text/html"));
  EXPECT_THAT(HttpGet(port, "/api/job"), HasSubstr("\"job\":\"mnist\""));

  RunResult result = job.Wait(std::chrono::seconds(60));
  ASSERT_EQ(result.exit_code, 0) << Describe(result) << ReadFile(err_file);
  std::smatch dir;
  ASSERT_TRUE(
      std::regex_search(result.out, dir, std::regex("metrics dir (/[^\n]+)\n")))
      << result.out;
  struct stat info;
  EXPECT_NE(stat(dir[1].str().c_str(), &info), 0)
      << dir[1] << " outlived kolorun";
  // The endpoint went with it.
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
  std::remove(err_file.c_str());
}

TEST(KolorunMetricsTest, APortAlreadyTakenIsAnErrorNamingIt) {
  kolo::StatusOr<kolo::Socket> taken = kolo::Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok());
  const std::string port = std::to_string(taken->LocalPort());
  RunResult result = kolo::testing::RunProgram(
      {kKolorun, "-np", "1", "--metrics-port", port, kWorker, "rank"}, {},
      std::chrono::seconds(30));
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_THAT(result.err, HasSubstr("--metrics-port " + port));
  EXPECT_THAT(result.err, HasSubstr("127.0.0.1:" + port));
  EXPECT_EQ(result.out, "");
}

TEST(KolorunMetricsTest, WithoutKolorunAProgramServesItsOwn) {
  // A port free a moment ago; the program adds its local rank (0).
  int port = 0;
  {
    kolo::StatusOr<kolo::Socket> probe = kolo::Socket::Listen("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = probe->LocalPort();
  }
  ChildProcess program({kWorker, "allreduce", "3000"},
                       {{"KOLO_METRICS_PORT", std::to_string(port)},
                        {"KOLO_JOB_NAME", "alone"}});
  std::string scrape;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(15);
  double count = -1;
  while (Clock::now() < deadline && count <= 0) {
    scrape = HttpGet(port, "/metrics");
    count = SeriesValue(scrape,
                        "test_worker_allreduces_total\\{job=\"alone\",rank="
                        "\"0\",host=\"[^\"]+\"\\}");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(count, 0) << scrape;
  RunResult result = program.Wait(std::chrono::seconds(30));
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_THAT(result.out, HasSubstr("metrics dir unset"));
}

}  // namespace
