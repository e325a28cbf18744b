// Scrapes a running job's metrics the way Prometheus would, so that
// `kolo-bench train --peer kolo-metrics` measures what monitoring costs a
// job: kolorun --metrics-port 0 prints its URL into the job's log, and a
// thread here reads it from there and GETs /metrics once a period until
// the job is done.
//
// Thread-safety: construct and Stop() from one thread.
#ifndef KOLO_TOOLS_KOLO_BENCH_METRICS_SCRAPER_H_
#define KOLO_TOOLS_KOLO_BENCH_METRICS_SCRAPER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace kolo {
namespace bench {

struct ScrapeCount {
  int64_t scrapes = 0;  // answered with a body
  int64_t bytes = 0;    // of those bodies
  double slowest_seconds = 0;
};

class MetricsScraper {
 public:
  MetricsScraper(std::string log, std::chrono::milliseconds period);
  ~MetricsScraper();
  MetricsScraper(const MetricsScraper&) = delete;
  MetricsScraper& operator=(const MetricsScraper&) = delete;

  // Ends the thread; what it scraped.
  ScrapeCount Stop();

 private:
  void Run();

  const std::string log_;
  const std::chrono::milliseconds period_;
  std::atomic<bool> stop_{false};
  ScrapeCount count_;  // the thread's until Stop() joined it
  std::thread thread_;
};

// The port of "metrics at http://ADDRESS:PORT/metrics" in `text`; 0 when
// there is none.
int MetricsPortIn(const std::string& text);

}  // namespace bench
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLO_BENCH_METRICS_SCRAPER_H_
