#include "metrics_service.h"

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

StatusOr<std::unique_ptr<MetricsService>> MetricsService::Start(
    const LaunchOptions& options, const std::string& host) {
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
  std::unique_ptr<MetricsService> service(
      new MetricsService(path.data(), JobName(options)));
  metrics::ExporterOptions exporter_options;
  exporter_options.address = options.metrics_address;
  exporter_options.port = *options.metrics_port;
  exporter_options.job = service->job_;
  exporter_options.host = host;
  exporter_options.arena_directory = service->directory_;
  StatusOr<std::unique_ptr<metrics::MetricsExporter>> exporter =
      metrics::MetricsExporter::Start(exporter_options);
  if (!exporter.ok()) {
    return exporter.status().WithContext("--metrics-port " +
                                         std::to_string(*options.metrics_port));
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
