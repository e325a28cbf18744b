// InitOptions: everything kolo::Init(options) needs, grouped by what it
// configures. InitOptions::FromEnvironment() reads the same settings from
// the variables that kolorun, mpirun, Slurm or PMI set (and the KOLO_*
// variables named beside each field); kolo::Init() is
// kolo::Init(*InitOptions::FromEnvironment()). A program may read the
// environment, change some fields, and initialise with the result:
//
//   kolo::StatusOr<kolo::InitOptions> options = kolo::InitOptions::FromEnvironment();
//   if (!options.ok()) return options.status();
//   options->runtime.cycle_time = std::chrono::microseconds(500);
//   options->timeline.path = "trace.json";
//   KOLO_RETURN_IF_ERROR(kolo::Init(*options));
//
// The world, the store and the engine must describe the same job on every
// rank; the runtime group must be equal on every rank (Init checks it and
// names the field that differs).
#ifndef KOLO_OPTIONS_H_
#define KOLO_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

// Where this process sits in the job. local_* count ranks on this host,
// cross_* count hosts (cross_rank = this host's index, cross_size = hosts).
struct WorldInfo {
  int32_t rank = 0;
  int32_t size = 1;
  int32_t local_rank = 0;
  int32_t local_size = 1;
  int32_t cross_rank = 0;
  int32_t cross_size = 1;
};

// gloo: Gloo over TCP; mpi: the MPI library; shm: POSIX shared memory
// between the processes of one host (kolorun's default on one host); tcp:
// kolo's own engine over TCP (the default between hosts when shm was asked
// for, src/collectives/tcp/).
enum class BackendKind : int32_t { kGloo = 0, kMpi, kShm, kTcp };
// "gloo", "mpi", "shm" or "tcp".
const char* BackendName(BackendKind kind);
// The inverse of BackendName; an error names the accepted values, or the
// CMake option when the backend was not built.
StatusOr<BackendKind> ParseBackend(const std::string& name);

enum class LogLevel : int32_t { kDebug, kInfo, kWarning, kError };

// The ranks of the job and where they run.
struct WorldConfig {
  WorldInfo ranks;  // KOLO_RANK, KOLO_SIZE, ... or the launcher's own
  // Who described the world: "kolorun", "mpirun", "slurm", "pmi" or "none".
  std::string launcher = "none";
  // Ranks with the same host id share memory. KOLO_HOST_ID; default: the
  // hostname. Init exchanges the ids and derives local and cross ranks.
  std::string host_id;
  // Where this world's rendezvous keys live in the store. Empty: Init
  // numbers a round from the ranks' arrivals (kolo/round<k>). kolo::elastic
  // sets it to the round its driver published, so that ranks of different
  // rounds never meet, and reads the failure news of that round only.
  std::string rendezvous_prefix;
};

// The rendezvous store through which ranks find each other.
struct StoreConfig {
  // KOLO_STORE_ADDR=host:port; empty host: no store (MPI alone or 1 rank).
  std::string host;
  int32_t port = 0;
  std::string secret;        // KOLO_STORE_SECRET
  bool rank0_hosts = false;  // rank 0 serves it (unless KOLO_STORE_HOSTED)
  // No KOLO_STORE_ADDR under mpirun, srun or PMI with an engine other than
  // mpi: rank 0 hosts the store on an address of its own and hands the
  // address and a fresh secret to the others over MPI's bootstrap.
  bool shared_over_mpi = false;
};

// How long a rank waits for another unless KOLO_TIMEOUT_S says otherwise.
// The one default: every internal options struct that waits starts from it.
inline constexpr std::chrono::seconds kDefaultTimeout{30};

// The engine that moves the data.
struct EngineConfig {
  // KOLO_BACKEND=gloo|mpi|shm|tcp; default gloo, or mpi under mpirun
  // without a store address; tcp for either where kolo was built without it
  // (kolo::BuildInfo().engines). A job that asks for shm and spans hosts runs
  // on tcp between them.
  BackendKind backend = BackendKind::kGloo;
  // KOLO_TIMEOUT_S (default 30): how long any rank waits for another.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // KOLO_GLOO_HOSTNAME: the address the network engines (gloo and tcp)
  // listen on; the name is Gloo's, from before tcp. Default 127.0.0.1
  // when the store is on loopback, else this host's name.
  std::string gloo_hostname = "127.0.0.1";
  // KOLO_SHM_AREA_BYTES (default 1M, a multiple of 4K up to 1G): the most
  // one round of a shm collective moves per rank.
  int64_t shm_area_bytes = int64_t{1} << 20;
  // KOLO_HIERARCHICAL_ALLREDUCE=0|1; unset: on when the job spans hosts and
  // some host holds more than one rank.
  std::optional<bool> hierarchical_allreduce;
  // KOLO_REDUCE_ISA=portable|avx2|avx512: the reduction kernels; empty:
  // the best this CPU supports. Process-wide: the last Init sets it.
  std::string reduce_isa;
};

// The asynchronous runtime's pacing (src/runtime/runtime.h).
struct RuntimeConfig {
  // KOLO_CYCLE_TIME_MS (default 1, fractions allowed, at most 60000).
  std::chrono::microseconds cycle_time{1000};
  // KOLO_FUSION_THRESHOLD (bytes, K/M/G suffixes; default 128M).
  int64_t fusion_threshold_bytes = int64_t{128} << 20;
  // KOLO_CACHE_CAPACITY (default 1024; 0 disables the response cache).
  int32_t cache_capacity = 1024;
  // KOLO_STALL_WARNING_S (default 60).
  std::chrono::seconds stall_warning{60};
  // KOLO_STALL_SHUTDOWN_S (default 0: never).
  std::chrono::seconds stall_shutdown{0};
};

// Blocking calls that bypass the runtime's thread while every rank is idle
// (shm on one host; src/runtime/direct_path.h).
struct DirectPathConfig {
  bool enabled = true;  // KOLO_DIRECT_PATH=1|0
};

// The Chrome-trace timeline rank 0 writes.
struct TimelineConfig {
  // KOLO_TIMELINE; empty: none. Each Init in one process appends its own
  // process section to the file; nothing an earlier Init wrote is lost.
  std::string path;
};

struct LoggingConfig {
  // KOLO_LOG_LEVEL=debug|info|warning|error (default info).
  LogLevel level = LogLevel::kInfo;
};

struct InitOptions {
  WorldConfig world;
  StoreConfig store;
  EngineConfig engine;
  RuntimeConfig runtime;
  DirectPathConfig direct_path;
  TimelineConfig timeline;
  LoggingConfig logging;

  // What kolo::Init() uses. A bad value is an error naming the variable,
  // the value and what is accepted; so is a missing store address where
  // the job needs one.
  static StatusOr<InitOptions> FromEnvironment();
};

}  // namespace kolo

#endif  // KOLO_OPTIONS_H_
