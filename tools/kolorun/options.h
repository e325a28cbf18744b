// kolorun's command line:
//
//   kolorun -np N [--backend shm|gloo|mpi] [--launcher kolorun|mpirun]
//           [--bind-to core|none] [--env K=V]... [-x NAME[=V]]...
//           [--timeout S] [--timeline-filename F]
//           [--mpi-args "..."] [--verbose] [--] program args...
//
// Across hosts (one agent per host, started over ssh or --remote-shell):
//
//   kolorun [-np N] (-H h1:2,h2:2 | --hostfile F) [--ssh-port P]
//           [--ssh-identity-file F] [--remote-shell 'CMD {host}']
//           [--start-timeout S] [--network-interface eth1|10.1.0.0/24] ...
//
// Elastic (elastic.h), workers that may die, freeze or join:
//
//   kolorun --elastic -np N [--min-np A] [--max-np B]
//           [-H ... | --hostfile F | --host-discovery-script S]
//           [--reset-limit R] [--elastic-timeout S] [--heartbeat-timeout S]
//           [--blacklist-cooldown S] program args...
//
// Per node, when the cluster starts one kolorun on every node itself:
//
//   kolorun --nnodes M --node-rank I --rendezvous HOST:PORT
//           --np-per-node K [--secret-file F] ... program args...
//
// The backend is what kolo's runtime runs on; the launcher is what starts
// the ranks. They are separate because a job may want MPI's world without
// MPI's engine: kolo-bench collectives --peer mpi times raw MPI beside kolo
// on shm, which needs ranks started by mpirun.
//
// Everything up to the program belongs to kolorun; the program and every
// argument after it go to the workers untouched, so `kolorun -np 2 prog -np 3`
// hands `-np 3` to prog.
#ifndef KOLO_TOOLS_KOLORUN_OPTIONS_H_
#define KOLO_TOOLS_KOLORUN_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hosts.h"
#include "kolo/kolo.h"
#include "kolo/status.h"
#include "kolo_internal/config.h"

namespace kolo {
namespace kolorun {

// The exit status for a command line kolorun cannot use, as getopt-style
// tools and CLI11 return it.
inline constexpr int kUsageExitCode = 2;

// Who starts the ranks.
enum class LauncherKind : int32_t {
  kKolorun = 0,  // kolorun forks each rank itself
  kMpirun,       // one mpirun starts them all (MPI can then be initialized)
};

// "kolorun", "mpirun".
const char* LauncherName(LauncherKind kind);

// Where the ranks kolorun starts may run.
enum class BindTo : int32_t {
  kCore = 0,  // each rank its own block of cores, when there are enough
  kNone,      // anywhere, as the scheduler likes
};

// The default of --start-timeout: how long kolorun waits for every host
// to answer its preflight.
inline constexpr int64_t kDefaultStartTimeoutSeconds = 30;

struct LaunchOptions {
  bool help = false;     // --help: print Usage() and do nothing else
  bool version = false;  // --version: print kolo::VersionText, nothing else
  // --agent: this kolorun serves one host of a multi-host job, told what to
  // do on its standard input (agent.h); not for users.
  bool agent = false;
  // -np N plus --servers K: the job's world size.
  int32_t num_ranks = 0;
  // --servers K: the last K ranks are parameter servers
  // (kolo/torch_parameter_server.h), told so by KOLO_ROLE and KOLO_SERVERS.
  int32_t servers = 0;
  // kolorun starts every rank on this host, where shared memory is fastest.
  BackendKind backend = BackendKind::kShm;
  // --launcher; without it mpirun for the mpi backend, kolorun otherwise.
  LauncherKind launcher = LauncherKind::kKolorun;
  // --env K=V in the order given; a later K overrides an earlier one.
  std::vector<std::pair<std::string, std::string>> env;
  int64_t timeout_seconds = kDefaultTimeout.count();
  // --bind-to (kolorun's launcher only); without it kCore, but kNone for
  // --backend gloo.
  BindTo bind_to = BindTo::kCore;
  bool verbose = false;
  std::string timeline_path;  // --timeline-filename: KOLO_TIMELINE
  // --metrics-port: serve the ranks' metrics (and the job's page) there; 0
  // lets the OS choose. nullopt: no metrics endpoint.
  std::optional<int> metrics_port;
  // --metrics-address: where every host's endpoint listens; empty: on
  // loopback for one host, on the address each host's ranks use for the
  // job (the chosen interface) across hosts.
  std::string metrics_address;
  // --job-name: the job label of every series; default the program's name.
  std::string job_name;
  std::vector<std::string>
      mpi_args;                      // --mpi-args (mpirun), split on whitespace
  std::vector<std::string> command;  // program and its arguments

  // -x NAME (the value kolorun has) or -x NAME=VALUE, merged into `env` in
  // order; kept by name as well, for messages.
  std::vector<std::string> forwarded_names;

  // Hosts: from -H or --hostfile; empty means this host alone.
  std::vector<HostSlots> hosts;
  int32_t ssh_port = 0;  // --ssh-port; 0: ssh's own default
  std::string ssh_identity_file;
  std::string ssh_config_file;  // --ssh-config-file: ssh -F
  // --remote-shell: a command template with {host}, and optionally
  // {command}; empty: ssh.
  std::string remote_shell;
  int64_t start_timeout_seconds = kDefaultStartTimeoutSeconds;
  // --network-interface, as given (names and/or CIDR subnets).
  std::string network_interface;

  // Per-node mode (--nnodes); nnodes == 0 when not in it.
  int32_t nnodes = 0;
  int32_t node_rank = 0;
  std::string rendezvous;  // host:port where node 0 hosts the store
  int32_t np_per_node = 0;
  std::string secret_file;  // --secret-file; else $KOLO_JOB_SECRET

  // Elastic mode (--elastic, elastic.h): workers may die, freeze or join.
  bool elastic = false;
  int32_t min_np = 0;  // --min-np (default -np)
  int32_t max_np = 0;  // --max-np (default -np)
  // --host-discovery-script: prints the hosts now available, polled.
  std::string host_discovery_script;
  int32_t reset_limit = -1;                 // --reset-limit; -1: no limit
  int64_t elastic_timeout_seconds = 600;    // --elastic-timeout
  int64_t heartbeat_timeout_seconds = 3;    // --heartbeat-timeout
  int64_t blacklist_cooldown_seconds = 60;  // --blacklist-cooldown
};

// The environment variable that may hold the job secret in per-node mode.
inline constexpr const char* kJobSecretVariable = "KOLO_JOB_SECRET";

// The text --help prints.
std::string Usage();

// Parses argv (argv[0] is kolorun itself). `env` is kolorun's own
// environment, which supplies the default backend (KOLO_BACKEND). Every error
// is kInvalidArgument and its message names the flag or value at fault; the
// caller prints it and exits with kUsageExitCode.
StatusOr<LaunchOptions> ParseOptions(const std::vector<std::string>& argv,
                                     const EnvLookup& env);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_OPTIONS_H_
