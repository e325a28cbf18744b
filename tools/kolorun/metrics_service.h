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
#include "launcher.h"
#include "options.h"

namespace kolo {
namespace kolorun {

class MetricsService {
 public:
  // Listens on address:port for the ranks of `host`; kInternal naming
  // the port when it cannot.
  static StatusOr<std::unique_ptr<MetricsService>> Start(
      int port, const std::string& address, const std::string& job,
      const std::string& host);
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

// Where a host's endpoint listens: --metrics-address where given, else
// `job_address` (the address the host's ranks use for the job, on a
// multi-host job), else loopback.
std::string MetricsAddress(const LaunchOptions& options,
                           const std::string& job_address);

// Starts the service where --metrics-port asks for one (else returns null
// with ok), adds its settings to `env`, says where it listens on stderr,
// and has `launcher` report the ranks' exits to it.
StatusOr<std::unique_ptr<MetricsService>> StartHostMetrics(
    int port, const std::string& address, const std::string& job,
    const std::string& host, std::vector<std::string>* env,
    LauncherOptions* launcher);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_METRICS_SERVICE_H_
