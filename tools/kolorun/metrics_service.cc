#include "metrics_service.h"

#include "output.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kolo {
namespace kolorun {
namespace {

// Removes the folder's files (arenas, and any a rank was still building)
// and the folder.
void RemoveFolder(const std::string& directory) {
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      unlink((directory + "/" + name).c_str());
    }
    closedir(dir);
  }
  rmdir(directory.c_str());
}

}  // namespace

std::string JobName(const LaunchOptions& options) {
  if (!options.job_name.empty()) return options.job_name;
  if (options.command.empty()) return "kolo";
  const std::string& program = options.command.front();
  size_t slash = program.rfind('/');
  return slash == std::string::npos ? program : program.substr(slash + 1);
}

MetricsService::MetricsService(std::string directory, std::string job)
    : directory_(std::move(directory)), job_(std::move(job)) {}

MetricsService::~MetricsService() {
  exporter_.reset();
  RemoveFolder(directory_);
}

std::string MetricsAddress(const LaunchOptions& options,
                           const std::string& job_address) {
  if (!options.metrics_address.empty()) return options.metrics_address;
  return job_address.empty() ? "127.0.0.1" : job_address;
}

StatusOr<std::unique_ptr<MetricsService>> StartHostMetrics(
    int port, const std::string& address, const std::string& job,
    const std::string& host, std::vector<std::string>* env,
    LauncherOptions* launcher) {
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<MetricsService> service,
                        MetricsService::Start(port, address, job, host));
  service->AddEnvironment(env);
  WriteAll(STDERR_FILENO, "kolorun: " + service->Announcement() + "\n");
  MetricsService* raw = service.get();
  launcher->on_exit = [raw](pid_t pid, const std::string& how, bool failed) {
    raw->RecordExit(pid, how, failed);
  };
  return service;
}

StatusOr<std::unique_ptr<MetricsService>> MetricsService::Start(
    int port, const std::string& address, const std::string& job,
    const std::string& host) {
  // /dev/shm where it exists: the arenas are read far more often than a
  // disk would like, and vanish with the machine.
  std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string pattern = base + "/kolo-metrics-XXXXXX";
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  if (mkdtemp(path.data()) == nullptr) {
    return Internal("cannot create a metrics folder in " + base + ": " +
                    std::strerror(errno));
  }
  std::unique_ptr<MetricsService> service(new MetricsService(path.data(), job));
  metrics::ExporterOptions exporter_options;
  exporter_options.address = address;
  exporter_options.port = port;
  exporter_options.job = service->job_;
  exporter_options.host = host;
  exporter_options.arena_directory = service->directory_;
  StatusOr<std::unique_ptr<metrics::MetricsExporter>> exporter =
      metrics::MetricsExporter::Start(exporter_options);
  if (!exporter.ok()) {
    return exporter.status().WithContext("--metrics-port " +
                                         std::to_string(port));
  }
  service->exporter_ = *std::move(exporter);
  return service;
}

void MetricsService::AddEnvironment(std::vector<std::string>* env) const {
  env->push_back("KOLO_METRICS_DIR=" + directory_);
  env->push_back("KOLO_JOB_NAME=" + job_);
}

std::string MetricsService::Announcement() const {
  std::string url = exporter_->Url();
  return "metrics at " + url + "/metrics, the job's page at " + url + "/";
}

void MetricsService::RecordExit(pid_t pid, const std::string& how,
                                bool failed) {
  exporter_->RecordExit(pid, how, failed);
}

}  // namespace kolorun
}  // namespace kolo
