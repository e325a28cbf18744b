// The metrics endpoint of one host: /metrics for Prometheus, / for people
// (the live job page) and /api/job for that page.
//
// kolorun starts one for the ranks it runs on its host (their arenas are the
// files in the job's metrics folder); a program without kolorun starts one
// for its own arena (KOLO_METRICS_PORT). Every answer is computed when it
// is asked for, from the arenas and /proc, so a scrape costs the ranks
// nothing. Once a second the exporter also samples each rank's samples and
// loss into a bounded history, which the job page draws as charts: a page
// opened late still shows the job from its start (the last ten minutes).
//
// The page itself (metrics/job_page.h) is one self-contained HTML file: no
// scripts, styles or fonts from elsewhere, so it works where the cluster
// reaches nothing outside.
//
// Thread-safety: every method from any thread.
#ifndef KOLO_METRICS_EXPORTER_H_
#define KOLO_METRICS_EXPORTER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "kolo/status.h"
#include "metrics/arena.h"
#include "metrics/http_server.h"

namespace kolo {
namespace metrics {

struct ExporterOptions {
  std::string address = "127.0.0.1";
  int port = 0;  // 0: the OS chooses
  std::string job = "kolo";
  std::string host;
  // Where the ranks' arenas are: the *.arena files of a folder (kolorun),
  // or this process's own arena.
  std::string arena_directory;
  const Arena* own_arena = nullptr;
  std::chrono::milliseconds sample_period{1000};
  size_t history_points = 600;
};

class MetricsExporter {
 public:
  static StatusOr<std::unique_ptr<MetricsExporter>> Start(
      ExporterOptions options);
  ~MetricsExporter();

  int port() const { return server_->port(); }
  // "http://127.0.0.1:9090"
  std::string Url() const;

  // How a rank's process ended, as kolorun saw it: for the page's state.
  void RecordExit(pid_t pid, const std::string& how, bool failed);

  // The bodies of /metrics and /api/job (also for tests).
  std::string MetricsText();
  std::string JobJson();

  void Stop();

 private:
  struct RankHistory {
    std::deque<double> samples_per_second;
    std::deque<double> loss;  // NaN: none yet
    double last_samples = -1;
    double last_step_count = 0;
    double last_step_sum = 0;
    double recent_step_seconds = -1;  // mean over the last period
  };
  struct Exit {
    std::string how;
    bool failed = false;
  };

  explicit MetricsExporter(ExporterOptions options);
  std::vector<ArenaSnapshot> Collect() const;
  void SampleIfDue();
  std::string MetricsTextLocked(const std::vector<ArenaSnapshot>& ranks);
  std::string JobJsonLocked(const std::vector<ArenaSnapshot>& ranks)
      KOLO_REQUIRES(mutex_);
  HttpResponse Handle(const std::string& path);

  const ExporterOptions options_;
  std::unique_ptr<HttpServer> server_;
  // The server's thread samples and answers; a test may ask for answers
  // from its own thread.
  Mutex mutex_;
  std::chrono::steady_clock::time_point next_sample_ KOLO_GUARDED_BY(mutex_){};
  std::deque<double> history_times_ KOLO_GUARDED_BY(mutex_);
  std::map<int32_t, RankHistory> history_ KOLO_GUARDED_BY(mutex_);
  std::map<pid_t, Exit> exits_ KOLO_GUARDED_BY(mutex_);
};

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_EXPORTER_H_
