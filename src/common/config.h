// All of kolo's environment parsing lives here. A job's configuration comes
// from whichever launcher started the process:
//
//   kolorun   KOLO_RANK, KOLO_SIZE, KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE,
//             KOLO_CROSS_RANK, KOLO_CROSS_SIZE, KOLO_STORE_ADDR,
//             KOLO_STORE_SECRET, KOLO_STORE_HOSTED=1 (kolorun hosts the store)
//   mpirun    OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//             SLURM_NNODES, SLURM_STEP_TASKS_PER_NODE
//   PMI       PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//
// checked in that order. Where a launcher gives no host count, hosts are
// assumed to hold local_size consecutive ranks each. Without kolorun, rank 0
// hosts the store at KOLO_STORE_ADDR (host:port), the way torch uses
// MASTER_ADDR and MASTER_PORT.
//
// Every variable below maps to one field of kolo::InitOptions
// (include/kolo/options.h), which documents defaults and accepted values.
// Nothing else in kolo reads the environment.
//
// Runtime settings: KOLO_CYCLE_TIME_MS (default 1, fractions allowed),
// KOLO_FUSION_THRESHOLD (bytes, K/M/G suffixes; default 128M),
// KOLO_CACHE_CAPACITY (default 1024; 0 disables the response cache),
// KOLO_TIMELINE (a file for the Chrome-trace timeline, written by rank 0),
// KOLO_STALL_WARNING_S (default 60), KOLO_STALL_SHUTDOWN_S (default 0: off),
// KOLO_DIRECT_PATH=1|0 (default 1: with the shm backend, synchronous calls
// bypass the runtime's thread while every rank is idle; runtime/direct_path.h).
// Process: KOLO_LOG_LEVEL (debug|info|warning|error), KOLO_REDUCE_ISA
// (portable|avx2|avx512).
//
// Settings for every launcher: KOLO_BACKEND (gloo|mpi|shm|tcp; default gloo,
// or mpi under mpirun when no store address is given), KOLO_TIMEOUT_S
// (default 30), KOLO_GLOO_HOSTNAME (the address the network engines, gloo
// and tcp, listen on; default 127.0.0.1 when the store is on loopback, else
// this host's name).
//
// Hosts: ranks that share a host identity share memory. The identity is the
// hostname unless KOLO_HOST_ID overrides it (so one machine can play several
// hosts in a test); where a store is available, Init() exchanges the
// identities and derives local and cross ranks from them, overriding what
// the launcher said. KOLO_HIERARCHICAL_ALLREDUCE=1|0 forces the three-stage
// allreduce on or off (default: on when the job spans hosts and some host
// holds more than one rank).
#ifndef KOLO_COMMON_CONFIG_H_
#define KOLO_COMMON_CONFIG_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "kolo/kolo.h"
#include "kolo/options.h"
#include "kolo/process_role.h"

namespace kolo {

// The names of the variables kolorun sets, shared with kolorun itself.
namespace env {
inline constexpr const char* kRank = "KOLO_RANK";
inline constexpr const char* kSize = "KOLO_SIZE";
inline constexpr const char* kLocalRank = "KOLO_LOCAL_RANK";
inline constexpr const char* kLocalSize = "KOLO_LOCAL_SIZE";
inline constexpr const char* kCrossRank = "KOLO_CROSS_RANK";
inline constexpr const char* kCrossSize = "KOLO_CROSS_SIZE";
inline constexpr const char* kStoreAddr = "KOLO_STORE_ADDR";
inline constexpr const char* kStoreSecret = "KOLO_STORE_SECRET";
inline constexpr const char* kStoreHosted = "KOLO_STORE_HOSTED";
inline constexpr const char* kBackend = "KOLO_BACKEND";
inline constexpr const char* kTimeoutSeconds = "KOLO_TIMEOUT_S";
inline constexpr const char* kGlooHostname = "KOLO_GLOO_HOSTNAME";
inline constexpr const char* kCycleTimeMs = "KOLO_CYCLE_TIME_MS";
inline constexpr const char* kFusionThreshold = "KOLO_FUSION_THRESHOLD";
inline constexpr const char* kCacheCapacity = "KOLO_CACHE_CAPACITY";
inline constexpr const char* kTimeline = "KOLO_TIMELINE";
inline constexpr const char* kStallWarningSeconds = "KOLO_STALL_WARNING_S";
inline constexpr const char* kStallShutdownSeconds = "KOLO_STALL_SHUTDOWN_S";
inline constexpr const char* kShmAreaBytes = "KOLO_SHM_AREA_BYTES";
inline constexpr const char* kHostId = "KOLO_HOST_ID";
inline constexpr const char* kHierarchicalAllreduce =
    "KOLO_HIERARCHICAL_ALLREDUCE";
inline constexpr const char* kDirectPath = "KOLO_DIRECT_PATH";
inline constexpr const char* kLogLevel = "KOLO_LOG_LEVEL";
inline constexpr const char* kReduceIsa = "KOLO_REDUCE_ISA";
// Set by `kolorun --elastic` for each worker it starts (kolo/elastic.h).
inline constexpr const char* kElasticWorker = "KOLO_ELASTIC_WORKER";
inline constexpr const char* kElasticTimeoutSeconds = "KOLO_ELASTIC_TIMEOUT_S";
inline constexpr const char* kElasticHeartbeatMs = "KOLO_ELASTIC_HEARTBEAT_MS";
// Metrics (kolo/metrics.h): kolorun's per-job folder of metric arenas, the
// job's name, and a program's own endpoint without kolorun.
inline constexpr const char* kMetricsDir = "KOLO_METRICS_DIR";
inline constexpr const char* kJobName = "KOLO_JOB_NAME";
inline constexpr const char* kMetricsPort = "KOLO_METRICS_PORT";
inline constexpr const char* kMetricsAddress = "KOLO_METRICS_ADDRESS";
// Set by `kolorun --servers K` (kolo/process_role.h): worker or server, and
// how many of the job's ranks (the last ones) serve.
inline constexpr const char* kRole = "KOLO_ROLE";
inline constexpr const char* kServers = "KOLO_SERVERS";
}  // namespace env

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;
EnvLookup ProcessEnvironment();

// InitOptions::FromEnvironment() with `env` in place of the process's
// environment. Errors name the variable, its bad value and what is
// accepted.
StatusOr<InitOptions> ReadInitOptions(const EnvLookup& env);

// The settings that apply to the process before any Init (log level,
// reduction kernels), read from the environment at their first use.
// Errors as ReadInitOptions.
StatusOr<LogLevel> ReadLogLevel(const EnvLookup& env);
StatusOr<std::string> ReadReduceIsa(const EnvLookup& env);

// What a worker of `kolorun --elastic` is told: who it is, where the
// driver's store is, how long to wait for a round that includes it, and
// how often to beat.
struct ElasticWorkerConfig {
  int64_t worker = -1;  // KOLO_ELASTIC_WORKER
  StoreConfig store;    // KOLO_STORE_ADDR, KOLO_STORE_SECRET
  // KOLO_ELASTIC_TIMEOUT_S (default 600): the driver's --elastic-timeout
  // and a margin.
  std::chrono::milliseconds round_timeout{600000};
  // KOLO_ELASTIC_HEARTBEAT_MS (default 500).
  std::chrono::milliseconds heartbeat_interval{500};
};
// kNotFound when KOLO_ELASTIC_WORKER is unset (not an elastic worker);
// other errors as ReadInitOptions.
StatusOr<ElasticWorkerConfig> ReadElasticWorkerConfig(const EnvLookup& env);

// Where this process keeps and serves its metrics (kolo/metrics.h).
struct MetricsEnvironment {
  std::string directory;     // KOLO_METRICS_DIR: kolorun reads arenas there
  std::string job = "kolo";  // KOLO_JOB_NAME
  std::string host;          // KOLO_HOST_ID, else the hostname
  int32_t rank = -1;         // KOLO_RANK (or the other launchers' variables)
  int32_t local_rank = 0;
  // KOLO_METRICS_PORT (0 to 65535; 0: the OS chooses) when set and no
  // kolorun serves the metrics (KOLO_METRICS_DIR unset).
  std::optional<int> port;
  std::string address = "127.0.0.1";  // KOLO_METRICS_ADDRESS
};
// Errors name the variable and its value. Never reads anything but `env`.
StatusOr<MetricsEnvironment> ReadMetricsEnvironment(const EnvLookup& env);

// KOLO_ROLE and KOLO_SERVERS (kolo/process_role.h); unset: a worker of a
// job without servers. Errors name the variable and its value.
StatusOr<RoleInfo> ReadRoleInfo(const EnvLookup& env);

// Integer parsing shared by flags and environment variables: the whole
// string must be a number in [min, max].
StatusOr<int64_t> ParseInt(const std::string& text, int64_t min, int64_t max,
                           const std::string& what);
// Parses "host:port"; an IPv6 host goes in brackets: "[::1]:29500".
Status ParseHostPortInto(const std::string& address, std::string* host,
                         int* port);
// "1K", "64M", "2G" (powers of 1024) or plain bytes.
StatusOr<int64_t> ParseByteSize(const std::string& text,
                                const std::string& what);

// The shortest job secret the store accepts. A secret is the key of every
// proof and tag (store/message_auth.h), so a short one can be guessed
// offline from one recorded handshake: 16 bytes is 128 bits where they are
// random, and what NewJobSecret draws.
inline constexpr size_t kMinJobSecretBytes = 16;
// Ok when `secret` is at least kMinJobSecretBytes long; otherwise
// kInvalidArgument naming `origin` (the variable, the flag and file, or the
// caller) and saying how to make a good one. Never quotes the secret.
Status CheckJobSecret(const std::string& secret, const std::string& origin);

}  // namespace kolo

#endif  // KOLO_COMMON_CONFIG_H_
