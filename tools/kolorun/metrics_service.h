// kolorun's metrics endpoint (--metrics-port): one per host, for the ranks
// kolorun starts there.
//
// It makes a private folder in /dev/shm for the job, tells every rank to
// keep its metric arena there (KOLO_METRICS_DIR, with the job's name in
// KOLO_JOB_NAME), and serves what the arenas hold, with the live job page,
// until kolorun is done. The folder goes with the service, so a job leaves
// no shared memory behind however its ranks ended.
//
// Thread-safety: RecordExit() from any thread; the rest from one.
#ifndef KOLO_TOOLS_KOLORUN_METRICS_SERVICE_H_
#define KOLO_TOOLS_KOLORUN_METRICS_SERVICE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo_internal/metrics.h"
#include "options.h"

namespace kolo {
namespace kolorun {

class MetricsService {
 public:
  // Starts listening; kInternal naming the address when it cannot.
  static StatusOr<std::unique_ptr<MetricsService>> Start(
      const LaunchOptions& options, const std::string& host);
  ~MetricsService();

  // Adds what the ranks need to find the service to `env` (NAME=VALUE).
  void AddEnvironment(std::vector<std::string>* env) const;
  // What kolorun prints: where the metrics and the page are.
  std::string Announcement() const;
  void RecordExit(pid_t pid, const std::string& how, bool failed);

 private:
  MetricsService(std::string directory, std::string job);

  const std::string directory_;
  const std::string job_;
  std::unique_ptr<metrics::MetricsExporter> exporter_;
};

// The job label: --job-name, else the program's file name.
std::string JobName(const LaunchOptions& options);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_METRICS_SERVICE_H_
