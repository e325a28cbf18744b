// kolorun: starts a kolo job of N ranks on this host. See options.h for the
// command line, job.h for what each rank is told and launcher.h for how the
// job is supervised and stopped.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent.h"
#include "cluster.h"
#include "elastic.h"
#include "hosts.h"
#include "job.h"
#include "kolo/build_info.h"
#include "kolo_internal/store.h"
#include "launcher.h"
#include "metrics_service.h"
#include "node.h"
#include "options.h"
#include "output.h"
#include "process.h"

namespace kolo {
namespace kolorun {
namespace {

constexpr const char* kStoreHost = "127.0.0.1";

// A descriptor kolorun opens must never land on 0, 1 or 2 when its parent
// closed them, or a pipe meant for a worker would double as kolorun's stdout.
void EnsureStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0 && null_fd != fd) {
      dup2(null_fd, fd);
      close(null_fd);
    }
  }
}

// Whether every host of the list is this machine, under one name: then
// kolorun needs no agents.
bool AllHostsAreThisOne(const std::vector<HostSlots>& hosts) {
  for (const HostSlots& host : hosts) {
    if (!IsLocalHost(host.name) || host.name != hosts.front().name)
      return false;
  }
  return true;
}

// Readies kolorun to watch its children: a closed stdout must not kill it
// while they still run, and its signals arrive on a descriptor (before any
// thread starts; see SignalWatcher). Nullopt, said why, on failure.
std::optional<SignalWatcher> WatchSignals() {
  signal(SIGPIPE, SIG_IGN);
  StatusOr<SignalWatcher> signals = SignalWatcher::Create();
  if (!signals.ok()) {
    Say(signals.status().message());
    return std::nullopt;
  }
  return *std::move(signals);
}

// The program's path, or nullopt, said why.
std::optional<std::string> FindProgram(const std::string& program) {
  StatusOr<std::string> path = FindExecutable(program);
  if (!path.ok()) {
    Say(path.status().message());
    return std::nullopt;
  }
  return *path;
}

// An agent, a node of the per-node form, or the driver of many hosts.
int RunBeyondThisHost(const LaunchOptions& options) {
  std::optional<SignalWatcher> signals = WatchSignals();
  if (!signals) return 1;
  try {
    if (options.agent) return RunAgent(&*signals);
    if (options.nnodes > 0) return RunNode(options, &*signals);
    return RunCluster(options, &*signals);
  } catch (const std::exception& e) {
    // Nothing here throws by design; if something does, say what.
    Say(std::string("internal error: ") + e.what());
    return 1;
  }
}

void WarnIfOversubscribed(int32_t num_ranks,
                          const std::vector<int>& usable_cores) {
  int cores = static_cast<int>(usable_cores.size());
  if (cores == 0) {
    const unsigned int counted = std::thread::hardware_concurrency();
    cores = counted > 0 ? static_cast<int>(counted) : 1;
  }
  if (num_ranks > cores) {
    Say("-np " + std::to_string(num_ranks) + " oversubscribes " +
        std::to_string(cores) + (cores == 1 ? " core" : " cores"));
  }
}

// The job on this host: its store, its ranks (or mpirun), their
// supervision.
int RunOnThisHost(const LaunchOptions& options) {
  std::optional<std::string> program = FindProgram(options.command[0]);
  if (!program) return 127;
  std::string mpirun;
  if (options.launcher == LauncherKind::kMpirun) {
    StatusOr<std::string> found = FindExecutable("mpirun");
    if (!found.ok()) {
      Say(options.backend == BackendKind::kMpi
              ? "mpirun not found on PATH; --backend mpi starts the "
                "job through it"
              : "mpirun not found on PATH; --launcher mpirun starts "
                "the job through it");
      return 127;
    }
    mpirun = *found;
  }
  const std::vector<int> usable_cores = UsableCores();
  WarnIfOversubscribed(options.num_ranks, usable_cores);

  std::optional<SignalWatcher> signals = WatchSignals();
  if (!signals) return 1;
  StatusOr<std::string> secret = NewJobSecret();
  if (!secret.ok()) {
    Say(secret.status().message());
    return 1;
  }
  StatusOr<HostedStore> hosted = StartJobStore(kStoreHost, *secret);
  if (!hosted.ok()) {
    Say(hosted.status().ToString());
    return 1;
  }
  const StoreInfo& store = hosted->info;

  LauncherOptions launcher_options;
  launcher_options.verbose = options.verbose;
  if (options.verbose) {
    Say("store listening on " + store.address + ", backend " +
        BackendName(options.backend) + ", launcher " +
        LauncherName(options.launcher));
  }
  std::vector<std::string> base_env = CurrentEnvironment();
  std::unique_ptr<MetricsService> metrics;
  if (options.metrics_port) {
    StatusOr<MetricsEnvironment> here =
        ReadMetricsEnvironment(ProcessEnvironment());
    StatusOr<std::unique_ptr<MetricsService>> started = StartHostMetrics(
        *options.metrics_port, MetricsAddress(options, ""), JobName(options),
        here.ok() ? here->host : std::string("localhost"), &base_env,
        &launcher_options);
    if (!started.ok()) {
      Say(started.status().message());
      return 1;
    }
    metrics = *std::move(started);
  }
  std::vector<ProcessSpec> specs;
  if (options.launcher == LauncherKind::kMpirun) {
    specs.push_back(
        BuildMpiJob(options, mpirun, geteuid() == 0, store, base_env));
  } else {
    specs = BuildRankJob(options, *program, store, base_env, usable_cores);
    // Rank 0 draws its progress in place when kolorun's stdout is a terminal.
    if (!specs.empty()) DrawInPlaceThrough(STDOUT_FILENO, &specs.front());
  }

  Launcher launcher(launcher_options, &*signals);
  int exit_code = launcher.Run(specs);
  hosted->server->Stop();
  if (options.verbose) Say("exiting with code " + std::to_string(exit_code));
  return exit_code;
}

int Main(int argc, char** argv) {
  EnsureStandardDescriptors();
  std::vector<std::string> args(argv, argv + argc);
  StatusOr<LaunchOptions> parsed = ParseOptions(args, ProcessEnvironment());
  if (!parsed.ok()) {
    Say(parsed.status().message());
    return kUsageExitCode;
  }
  const LaunchOptions& options = *parsed;
  if (options.help) {
    WriteAll(STDOUT_FILENO, Usage());
    return 0;
  }
  if (options.version) {
    WriteAll(STDOUT_FILENO, kolo::VersionText("kolorun") + "\n");
    return 0;
  }
  if (options.elastic) {
    std::optional<std::string> program = FindProgram(options.command[0]);
    if (!program) return 127;
    std::optional<SignalWatcher> signals = WatchSignals();
    if (!signals) return 1;
    return RunElastic(options, *program, &*signals);
  }
  // -H localhost:4 is a one-host job like any other.
  if (options.agent || options.nnodes > 0 ||
      (!options.hosts.empty() && !AllHostsAreThisOne(options.hosts))) {
    return RunBeyondThisHost(options);
  }
  return RunOnThisHost(options);
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo

int main(int argc, char** argv) { return kolo::kolorun::Main(argc, argv); }
