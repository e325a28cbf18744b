#include "common/config.h"

#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include <vector>

#include "common/reduce_isa.h"

namespace kolo {
namespace {

// Reads a required-or-optional integer variable; `present` tells whether
// the variable was set at all.
StatusOr<int64_t> ReadInt(const EnvLookup& env, const char* name,
                          int64_t fallback, int64_t min, int64_t max) {
  std::optional<std::string> text = env(name);
  if (!text) return fallback;
  return ParseInt(*text, min, max, std::string("environment variable ") + name);
}

// Expands Slurm's compressed task counts, "2(x3),1" -> {2, 2, 2, 1}.
StatusOr<std::vector<int64_t>> ExpandSlurmTaskList(const std::string& text) {
  std::vector<int64_t> counts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    int64_t repeat = 1;
    size_t paren = item.find("(x");
    if (paren != std::string::npos && item.back() == ')') {
      KOLO_ASSIGN_OR_RETURN(
          repeat, ParseInt(item.substr(paren + 2, item.size() - paren - 3), 1,
                           1 << 20, "SLURM_STEP_TASKS_PER_NODE repeat"));
      item = item.substr(0, paren);
    }
    KOLO_ASSIGN_OR_RETURN(
        int64_t count, ParseInt(item, 1, 1 << 20, "SLURM_STEP_TASKS_PER_NODE"));
    for (int64_t i = 0; i < repeat; ++i) counts.push_back(count);
    start = comma + 1;
  }
  return counts;
}

// Hosts hold local_size consecutive ranks each: the placement mpirun and
// PMI launchers use by default.
void DeriveCrossFromBlocks(WorldInfo* world) {
  if (world->local_size > 0 && world->size % world->local_size == 0) {
    world->cross_size = world->size / world->local_size;
    world->cross_rank = world->rank / world->local_size;
  } else {
    world->cross_size = 1;
    world->cross_rank = 0;
  }
}

constexpr int64_t kMaxRanks = 1 << 20;

// kolorun's own variables: every field of the world, explicitly.
Status ReadKolorunWorld(const EnvLookup& env, WorldInfo* w) {
  KOLO_ASSIGN_OR_RETURN(int64_t size,
                        ReadInt(env, env::kSize, 1, 1, kMaxRanks));
  KOLO_ASSIGN_OR_RETURN(int64_t rank, ReadInt(env, env::kRank, 0, 0, size - 1));
  KOLO_ASSIGN_OR_RETURN(int64_t local_size,
                        ReadInt(env, env::kLocalSize, size, 1, size));
  KOLO_ASSIGN_OR_RETURN(int64_t local_rank,
                        ReadInt(env, env::kLocalRank, rank, 0, local_size - 1));
  KOLO_ASSIGN_OR_RETURN(int64_t cross_size,
                        ReadInt(env, env::kCrossSize, 1, 1, size));
  KOLO_ASSIGN_OR_RETURN(int64_t cross_rank,
                        ReadInt(env, env::kCrossRank, 0, 0, cross_size - 1));
  *w = WorldInfo{
      static_cast<int32_t>(rank),       static_cast<int32_t>(size),
      static_cast<int32_t>(local_rank), static_cast<int32_t>(local_size),
      static_cast<int32_t>(cross_rank), static_cast<int32_t>(cross_size)};
  return Status::Ok();
}

// The variables of a launcher whose hosts are blocks of local_size ranks
// (Open MPI's mpirun; PMI: MPICH, Intel MPI).
struct BlockLauncher {
  const char* size;
  const char* rank;
  const char* local_size;
  const char* local_rank;
  // Without local_rank: rank % local_size (PMI), else 0 (Open MPI).
  bool local_rank_from_rank;
};
constexpr BlockLauncher kOpenMpi = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", false};
constexpr BlockLauncher kPmi = {"PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS",
                                "MPI_LOCALRANKID", true};

Status ReadBlockWorld(const EnvLookup& env, const BlockLauncher& names,
                      WorldInfo* w) {
  KOLO_ASSIGN_OR_RETURN(int64_t size,
                        ReadInt(env, names.size, 1, 1, kMaxRanks));
  KOLO_ASSIGN_OR_RETURN(int64_t rank, ReadInt(env, names.rank, 0, 0, size - 1));
  KOLO_ASSIGN_OR_RETURN(int64_t local_size,
                        ReadInt(env, names.local_size, size, 1, size));
  const int64_t local_rank_default =
      names.local_rank_from_rank ? rank % local_size : 0;
  KOLO_ASSIGN_OR_RETURN(
      int64_t local_rank,
      ReadInt(env, names.local_rank, local_rank_default, 0, local_size - 1));
  *w = WorldInfo{static_cast<int32_t>(rank),
                 static_cast<int32_t>(size),
                 static_cast<int32_t>(local_rank),
                 static_cast<int32_t>(local_size),
                 0,
                 1};
  DeriveCrossFromBlocks(w);
  return Status::Ok();
}

// srun: the node number and count are Slurm's; a node's task count comes
// from SLURM_STEP_TASKS_PER_NODE where the nodes differ.
Status ReadSlurmWorld(const EnvLookup& env, WorldInfo* w) {
  KOLO_ASSIGN_OR_RETURN(int64_t size,
                        ReadInt(env, "SLURM_NTASKS", 1, 1, kMaxRanks));
  KOLO_ASSIGN_OR_RETURN(int64_t rank,
                        ReadInt(env, "SLURM_PROCID", 0, 0, size - 1));
  KOLO_ASSIGN_OR_RETURN(int64_t nodes,
                        ReadInt(env, "SLURM_NNODES", 1, 1, size));
  KOLO_ASSIGN_OR_RETURN(int64_t node,
                        ReadInt(env, "SLURM_NODEID", 0, 0, nodes - 1));
  KOLO_ASSIGN_OR_RETURN(int64_t local_rank,
                        ReadInt(env, "SLURM_LOCALID", 0, 0, size - 1));
  int64_t local_size = size / nodes;
  if (std::optional<std::string> list = env("SLURM_STEP_TASKS_PER_NODE")) {
    KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> per_node,
                          ExpandSlurmTaskList(*list));
    if (static_cast<int64_t>(per_node.size()) <= node) {
      return InvalidArgument(
          "SLURM_STEP_TASKS_PER_NODE='" + *list +
          "' lists fewer nodes than SLURM_NODEID=" + std::to_string(node));
    }
    local_size = per_node[node];
  }
  if (local_rank >= local_size) {
    return InvalidArgument("SLURM_LOCALID=" + std::to_string(local_rank) +
                           " is not below the node's task count " +
                           std::to_string(local_size));
  }
  *w = WorldInfo{
      static_cast<int32_t>(rank),       static_cast<int32_t>(size),
      static_cast<int32_t>(local_rank), static_cast<int32_t>(local_size),
      static_cast<int32_t>(node),       static_cast<int32_t>(nodes)};
  return Status::Ok();
}

// The first launcher whose variables are set describes the world.
Status ReadWorld(const EnvLookup& env, WorldConfig* config) {
  struct Launcher {
    const char* name;
    const char* marker;  // set by that launcher alone
    Status (*read)(const EnvLookup&, WorldInfo*);
  };
  static const Launcher kLaunchers[] = {
      {"kolorun", env::kRank, ReadKolorunWorld},
      {"mpirun", kOpenMpi.rank,
       [](const EnvLookup& env, WorldInfo* w) {
         return ReadBlockWorld(env, kOpenMpi, w);
       }},
      {"slurm", "SLURM_PROCID", ReadSlurmWorld},
      {"pmi", kPmi.rank,
       [](const EnvLookup& env, WorldInfo* w) {
         return ReadBlockWorld(env, kPmi, w);
       }},
  };
  for (const Launcher& launcher : kLaunchers) {
    if (!env(launcher.marker)) continue;
    config->launcher = launcher.name;
    return launcher.read(env, &config->ranks);
  }
  config->launcher = "none";
  config->ranks = WorldInfo{};
  return Status::Ok();
}

Status ReadRuntimeSettings(const EnvLookup& env, InitOptions* options) {
  RuntimeConfig* config = &options->runtime;
  if (std::optional<std::string> text = env(env::kCycleTimeMs)) {
    char* end = nullptr;
    const double ms = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || !(ms > 0) || ms > 60000) {
      return InvalidArgument(
          std::string("environment variable ") + env::kCycleTimeMs +
          " must be a number of milliseconds in (0, 60000], got '" + *text +
          "'");
    }
    config->cycle_time =
        std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
  }
  if (std::optional<std::string> text = env(env::kFusionThreshold)) {
    KOLO_ASSIGN_OR_RETURN(
        config->fusion_threshold_bytes,
        ParseByteSize(*text, std::string("environment variable ") +
                                 env::kFusionThreshold));
  }
  KOLO_ASSIGN_OR_RETURN(int64_t capacity,
                        ReadInt(env, env::kCacheCapacity, 1024, 0, 1 << 20));
  config->cache_capacity = static_cast<int32_t>(capacity);
  options->timeline.path = env(env::kTimeline).value_or("");
  KOLO_ASSIGN_OR_RETURN(int64_t warning, ReadInt(env, env::kStallWarningSeconds,
                                                 60, 1, 7 * 24 * 3600));
  config->stall_warning = std::chrono::seconds(warning);
  KOLO_ASSIGN_OR_RETURN(
      int64_t shutdown,
      ReadInt(env, env::kStallShutdownSeconds, 0, 0, 7 * 24 * 3600));
  config->stall_shutdown = std::chrono::seconds(shutdown);
  if (std::optional<std::string> text = env(env::kShmAreaBytes)) {
    const std::string what =
        std::string("environment variable ") + env::kShmAreaBytes;
    int64_t& area = options->engine.shm_area_bytes;
    KOLO_ASSIGN_OR_RETURN(area, ParseByteSize(*text, what));
    if (area < 4096 || area % 4096 != 0 || area > (int64_t{1} << 30)) {
      return InvalidArgument(
          what + " must be a multiple of 4K between 4K and 1G, got '" + *text +
          "'");
    }
  }
  return Status::Ok();
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Status CheckJobSecret(const std::string& secret, const std::string& origin) {
  if (secret.size() >= kMinJobSecretBytes) return Status::Ok();
  const std::string what = secret.empty()
                               ? origin + " is empty"
                               : origin + " holds a job secret of only " +
                                     std::to_string(secret.size()) + " bytes";
  return InvalidArgument(
      what + "; a job secret needs at least " +
      std::to_string(kMinJobSecretBytes) +
      " bytes, or anyone who can reach the store could guess it. Make one "
      "with: head -c 32 /dev/urandom | base64 > secret");
}

StatusOr<int64_t> ParseInt(const std::string& text, int64_t min, int64_t max,
                           const std::string& what) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
    return InvalidArgument(what + " must be an integer, got '" + text + "'");
  }
  if (value < min || value > max) {
    return InvalidArgument(what + " must be in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "], got " + text);
  }
  return static_cast<int64_t>(value);
}

StatusOr<int64_t> ParseByteSize(const std::string& text,
                                const std::string& what) {
  if (text.empty()) return InvalidArgument(what + " is empty");
  int64_t multiplier = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k': multiplier = int64_t{1} << 10; break;
    case 'M':
    case 'm': multiplier = int64_t{1} << 20; break;
    case 'G':
    case 'g': multiplier = int64_t{1} << 30; break;
    default: break;
  }
  if (multiplier != 1) digits.pop_back();
  StatusOr<int64_t> value =
      ParseInt(digits, 0, (int64_t{1} << 62) / multiplier, what);
  if (!value.ok()) {
    return InvalidArgument(
        what + " must be a byte count like 8, 64K, 256M or 1G, got '" + text +
        "'");
  }
  return *value * multiplier;
}

namespace {

// KOLO_BACKEND (or mpi under mpirun without a store address), and
// KOLO_TIMEOUT_S.
Status ReadEngine(const EnvLookup& env, const WorldConfig& world,
                  bool has_store_addr, EngineConfig* engine) {
  if (std::optional<std::string> backend = env(env::kBackend)) {
    StatusOr<BackendKind> kind = ParseBackend(*backend);
    if (!kind.ok()) {
      return InvalidArgument(std::string("environment variable ") +
                             env::kBackend + ": " + kind.status().message());
    }
    engine->backend = *kind;
  } else if (world.launcher == "mpirun" && !has_store_addr) {
    engine->backend = BackendKind::kMpi;
  }
#ifndef KOLO_WITH_GLOO
  // Gloo's stand-in where it was not built (the GPU machines have no Gloo):
  // kolo's own tcp engine, which also spans hosts.
  if (engine->backend == BackendKind::kGloo)
    engine->backend = BackendKind::kTcp;
#endif
#ifndef KOLO_WITH_MPI
  if (engine->backend == BackendKind::kMpi) engine->backend = BackendKind::kTcp;
#endif
  KOLO_ASSIGN_OR_RETURN(int64_t timeout_s,
                        ReadInt(env, env::kTimeoutSeconds,
                                kDefaultTimeout.count(), 1, 7 * 24 * 3600));
  engine->timeout = std::chrono::seconds(timeout_s);
  return Status::Ok();
}

// KOLO_STORE_ADDR and its secret; whether rank 0 hosts the store, and
// whether it hands the address out over MPI because no launcher set it.
Status ReadStore(const EnvLookup& env, const WorldConfig& world,
                 BackendKind backend, StoreConfig* store) {
  const std::optional<std::string> store_addr = env(env::kStoreAddr);
  if (store_addr) {
    int port = 0;
    Status parsed = ParseHostPortInto(*store_addr, &store->host, &port);
    store->port = port;
    if (!parsed.ok()) {
      return InvalidArgument(std::string("environment variable ") +
                             env::kStoreAddr + ": " + parsed.message());
    }
  }
  store->secret = env(env::kStoreSecret).value_or("");
  store->rank0_hosts = store_addr && !env(env::kStoreHosted);
  // A job of one rank never opens the store (process.cc's ConnectStore);
  // any other job with an address proves the secret to it.
  if (store_addr && world.ranks.size > 1) {
    KOLO_RETURN_IF_ERROR(CheckJobSecret(
        store->secret,
        std::string("environment variable ") + env::kStoreSecret));
  }
  const bool needs_store = world.ranks.size > 1 && backend != BackendKind::kMpi;
  const bool mpi_launched = world.launcher == "mpirun" ||
                            world.launcher == "slurm" ||
                            world.launcher == "pmi";
  if (needs_store && !store_addr && mpi_launched) {
    // Rank 0 tells the others where it hosts the store (mpi_bootstrap.h).
    store->shared_over_mpi = true;
    store->rank0_hosts = true;
  } else if (needs_store && !store_addr) {
    return InvalidArgument(
        std::string(env::kStoreAddr) + " is not set: a " +
        std::to_string(world.ranks.size) + "-rank " + BackendName(backend) +
        " job started by " + world.launcher +
        " needs the rendezvous address host:port of rank 0 (kolorun sets it "
        "for you; under mpirun, srun or PMI rank 0 hands it out over MPI)");
  }
  return Status::Ok();
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// A 0|1 switch; unset when the variable is.
StatusOr<std::optional<bool>> ReadSwitch(const EnvLookup& env,
                                         const char* name) {
  std::optional<std::string> text = env(name);
  if (!text) return std::optional<bool>();
  if (*text != "0" && *text != "1") {
    return InvalidArgument(std::string("environment variable ") + name +
                           " must be 0 or 1, got '" + *text + "'");
  }
  return std::optional<bool>(*text == "1");
}

// KOLO_GLOO_HOSTNAME, or what the store's address implies: loopback for a
// job on loopback, this host's name otherwise.
std::string PickEngineHostname(const EnvLookup& env, const StoreConfig& store) {
  if (std::optional<std::string> hostname = env(env::kGlooHostname)) {
    return *hostname;
  }
  // Init picks it once it knows where the store is.
  if (store.shared_over_mpi) return "";
  if (store.host.empty() || store.host == "127.0.0.1" ||
      store.host == "localhost" || store.host == "::1") {
    return "127.0.0.1";
  }
  return HostName();
}

}  // namespace

StatusOr<InitOptions> ReadInitOptions(const EnvLookup& env) {
  InitOptions options;
  KOLO_RETURN_IF_ERROR(ReadWorld(env, &options.world));
  EngineConfig& engine = options.engine;
  KOLO_RETURN_IF_ERROR(ReadEngine(env, options.world,
                                  env(env::kStoreAddr).has_value(), &engine));
  KOLO_RETURN_IF_ERROR(
      ReadStore(env, options.world, engine.backend, &options.store));
  KOLO_RETURN_IF_ERROR(ReadRuntimeSettings(env, &options));

  if (std::optional<std::string> host_id = env(env::kHostId)) {
    if (host_id->empty()) {
      return InvalidArgument(std::string("environment variable ") +
                             env::kHostId +
                             " is set but empty; unset it to use the hostname");
    }
    options.world.host_id = *host_id;
  } else {
    options.world.host_id = HostName();
  }
  KOLO_ASSIGN_OR_RETURN(engine.hierarchical_allreduce,
                        ReadSwitch(env, env::kHierarchicalAllreduce));
  KOLO_ASSIGN_OR_RETURN(std::optional<bool> direct_path,
                        ReadSwitch(env, env::kDirectPath));
  options.direct_path.enabled = direct_path.value_or(true);
  engine.gloo_hostname = PickEngineHostname(env, options.store);
  KOLO_ASSIGN_OR_RETURN(options.logging.level, ReadLogLevel(env));
  KOLO_ASSIGN_OR_RETURN(engine.reduce_isa, ReadReduceIsa(env));
  return options;
}

Status ParseHostPortInto(const std::string& address, std::string* host,
                         int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument("expected host:port, got '" + address + "'");
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  StatusOr<int64_t> p = ParseInt(address.substr(colon + 1), 1, 65535,
                                 "port in '" + address + "'");
  if (!p.ok()) return p.status();
  *host = h;
  *port = static_cast<int>(*p);
  return Status::Ok();
}

StatusOr<ElasticWorkerConfig> ReadElasticWorkerConfig(const EnvLookup& env) {
  ElasticWorkerConfig config;
  if (!env(env::kElasticWorker)) {
    return NotFound(std::string("this process was not started by kolorun "
                                "--elastic (") +
                    env::kElasticWorker + " is not set)");
  }
  KOLO_ASSIGN_OR_RETURN(config.worker,
                        ReadInt(env, env::kElasticWorker, -1, 0,
                                std::numeric_limits<int32_t>::max()));
  const std::optional<std::string> store_addr = env(env::kStoreAddr);
  if (!store_addr) {
    return InvalidArgument(std::string("environment variable ") +
                           env::kStoreAddr +
                           " is not set; an elastic worker meets the others "
                           "through the store of kolorun --elastic");
  }
  int port = 0;
  Status parsed = ParseHostPortInto(*store_addr, &config.store.host, &port);
  if (!parsed.ok()) {
    return InvalidArgument(std::string("environment variable ") +
                           env::kStoreAddr + ": " + parsed.message());
  }
  config.store.port = port;
  config.store.secret = env(env::kStoreSecret).value_or("");
  KOLO_RETURN_IF_ERROR(
      CheckJobSecret(config.store.secret,
                     std::string("environment variable ") + env::kStoreSecret));
  KOLO_ASSIGN_OR_RETURN(
      int64_t timeout_s,
      ReadInt(env, env::kElasticTimeoutSeconds, 600, 1, 7 * 24 * 3600));
  config.round_timeout = std::chrono::seconds(timeout_s);
  KOLO_ASSIGN_OR_RETURN(int64_t beat_ms,
                        ReadInt(env, env::kElasticHeartbeatMs, 500, 10, 60000));
  config.heartbeat_interval = std::chrono::milliseconds(beat_ms);
  return config;
}

StatusOr<RoleInfo> ReadRoleInfo(const EnvLookup& env) {
  RoleInfo info;
  KOLO_ASSIGN_OR_RETURN(int64_t servers,
                        ReadInt(env, env::kServers, 0, 0, int64_t{1} << 20));
  info.server_count = static_cast<int32_t>(servers);
  const std::string role = env(env::kRole).value_or("worker");
  if (role == "server") {
    info.role = ProcessRole::kServer;
  } else if (role != "worker") {
    return InvalidArgument(std::string("environment variable ") + env::kRole +
                           " must be worker or server, got '" + role + "'");
  }
  if (info.role == ProcessRole::kServer && info.server_count == 0) {
    return InvalidArgument(std::string("environment variable ") + env::kRole +
                           "=server but " + env::kServers +
                           " is unset or 0: a server needs the job's count "
                           "of servers (kolorun --servers K sets both)");
  }
  return info;
}

StatusOr<RoleInfo> Role() { return ReadRoleInfo(ProcessEnvironment()); }

StatusOr<LogLevel> ReadLogLevel(const EnvLookup& env) {
  std::optional<std::string> text = env(env::kLogLevel);
  if (!text) return LogLevel::kInfo;
  if (*text == "debug") return LogLevel::kDebug;
  if (*text == "info") return LogLevel::kInfo;
  if (*text == "warning") return LogLevel::kWarning;
  if (*text == "error") return LogLevel::kError;
  return InvalidArgument(
      std::string("environment variable ") + env::kLogLevel + "='" + *text +
      "' is not a log level (expected debug, info, warning or error)");
}

StatusOr<std::string> ReadReduceIsa(const EnvLookup& env) {
  std::optional<std::string> text = env(env::kReduceIsa);
  if (!text) return std::string();
  std::string supported;
  for (ReduceIsa isa : SupportedReduceIsas()) {
    if (*text == ReduceIsaName(isa)) return *text;
    supported +=
        std::string(supported.empty() ? "" : ", ") + ReduceIsaName(isa);
  }
  const bool known =
      *text == "portable" || *text == "avx2" || *text == "avx512";
  return InvalidArgument(std::string("environment variable ") +
                         env::kReduceIsa + "='" + *text +
                         (known ? "' is not supported by this CPU"
                                : "' is not an instruction set") +
                         " (this CPU supports " + supported + ")");
}

StatusOr<MetricsEnvironment> ReadMetricsEnvironment(const EnvLookup& env) {
  MetricsEnvironment metrics;
  if (std::optional<std::string> dir = env(env::kMetricsDir)) {
    metrics.directory = *dir;
  }
  if (std::optional<std::string> job = env(env::kJobName)) {
    if (!job->empty()) metrics.job = *job;
  }
  if (std::optional<std::string> host = env(env::kHostId);
      host && !host->empty()) {
    metrics.host = *host;
  } else {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    metrics.host = name;
  }
  // The rank as the launcher gave it; Init() corrects it where a store
  // renumbers the ranks, and elastic rounds change it.
  for (const char* name :
       {env::kRank, "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    if (std::optional<std::string> text = env(name)) {
      StatusOr<int64_t> rank = ParseInt(
          *text, 0, 1 << 30, std::string("environment variable ") + name);
      if (rank.ok()) metrics.rank = static_cast<int32_t>(*rank);
      break;
    }
  }
  for (const char* name : {env::kLocalRank, "OMPI_COMM_WORLD_LOCAL_RANK",
                           "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    if (std::optional<std::string> text = env(name)) {
      StatusOr<int64_t> local = ParseInt(
          *text, 0, 1 << 20, std::string("environment variable ") + name);
      if (local.ok()) metrics.local_rank = static_cast<int32_t>(*local);
      break;
    }
  }
  if (metrics.directory.empty()) {
    if (std::optional<std::string> text = env(env::kMetricsPort)) {
      KOLO_ASSIGN_OR_RETURN(
          int64_t port,
          ParseInt(*text, 0, 65535,
                   std::string("environment variable ") + env::kMetricsPort));
      metrics.port = static_cast<int>(port);
    }
  }
  if (std::optional<std::string> address = env(env::kMetricsAddress)) {
    if (address->empty()) {
      return InvalidArgument(std::string("environment variable ") +
                             env::kMetricsAddress + " is set but empty");
    }
    metrics.address = *address;
  }
  return metrics;
}

StatusOr<InitOptions> InitOptions::FromEnvironment() {
  return ReadInitOptions(ProcessEnvironment());
}

}  // namespace kolo
