#include "process.h"

#include <algorithm>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "collectives/backend_factory.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "collectives/topology.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/reduce.h"
#include "kolo/build_info.h"
#include "metrics/exporter.h"
#include "metrics/process_arena.h"
#include "net/interfaces.h"
#include "process_group.h"
#include "store/message_auth.h"
#include "store/store.h"
#include "store/tcp_store.h"

namespace kolo {

// Everything one Init built, torn down by Shutdown in reverse order.
struct Process::Membership {
  InitOptions options;
  WorldInfo world;  // with local and cross ranks from the host table
  BackendKind active_backend = BackendKind::kGloo;
  bool hierarchical_allreduce = false;
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 without kolorun
  std::shared_ptr<TcpStoreClient> store_client;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<SynchronousCollectives> sync;
  // This rank's own metrics endpoint (KOLO_METRICS_PORT without kolorun).
  std::unique_ptr<metrics::MetricsExporter> metrics_exporter;
  std::unique_ptr<PointToPoint> point_to_point;
  // What NewGroup needs to build a group's engine.
  EnginePlan plan;
  BackendOptions backend_options;
  std::optional<HostTopology> topology;
  std::shared_ptr<Store> round_store;
  int64_t groups_created = 0;
  std::vector<std::weak_ptr<internal::GroupState>> groups;
};

namespace {

// Step 1. These settings are the process's, not the job's: the last Init
// sets them.
Status ApplyProcessSettings(const InitOptions& options) {
  SetMinLogLevel(options.logging.level);
  SetLogPrefix("rank " + std::to_string(options.world.ranks.rank));
  return SetActiveReduceIsa(options.engine.reduce_isa)
      .WithContext("engine.reduce_isa (KOLO_REDUCE_ISA)");
}

// The store a job talks through, and the server when this rank hosts it.
struct StoreConnection {
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<TcpStoreClient> client;  // null: no store (MPI alone, 1 rank)
};

// The address rank 0 hosts the store on when it tells the others over MPI:
// loopback when every rank is on this host, else its first address that is
// up and not loopback.
StatusOr<std::string> AddressForSharedStore(const WorldInfo& world) {
  if (world.local_size == world.size) return std::string("127.0.0.1");
  KOLO_ASSIGN_OR_RETURN(std::vector<InterfaceAddress> all,
                        ListInterfaceAddresses());
  for (const InterfaceAddress& candidate :
       CandidateAddresses(all, InterfaceSpec(), /*allow_loopback=*/false)) {
    if (candidate.address.find(':') == std::string::npos)
      return candidate.address;
  }
  return FailedPrecondition(
      "rank 0 has no address other than loopback to host the store on; set "
      "KOLO_STORE_ADDR");
}

// Step 2a, under mpirun, srun or PMI without KOLO_STORE_ADDR: rank 0
// starts the store on an address and port it picks, with a fresh secret,
// and every rank learns them over MPI. Fills in options->store (which rank 0
// then no longer needs to host: `server` is it), and
// options->engine.gloo_hostname where the user left it to kolo: the address
// on this rank's route to the store.
Status ShareStoreOverMpi(InitOptions* options,
                         std::unique_ptr<TcpStoreServer>* server) {
  StoreConfig& store = options->store;
  const WorldInfo& world = options->world.ranks;
  std::string payload;
  if (world.rank == 0) {
    KOLO_ASSIGN_OR_RETURN(std::string address, AddressForSharedStore(world));
    KOLO_ASSIGN_OR_RETURN(std::string secret, NewJobSecret());
    StatusOr<std::unique_ptr<TcpStoreServer>> started =
        TcpStoreServer::Start(address, 0, secret);
    if (!started.ok()) {
      return started.status().WithContext(
          "rank 0 could not host the store on " + address);
    }
    *server = std::move(started).value();
    payload = address + " " + std::to_string((*server)->port()) + " " + secret;
  }
  StatusOr<std::string> shared = BroadcastFromRankZeroOverMpi(payload);
  if (!shared.ok()) return shared.status().WithContext("finding the store");
  std::istringstream fields(*shared);
  fields >> store.host >> store.port >> store.secret;
  store.rank0_hosts = false;
  if (options->engine.gloo_hostname.empty()) {
    if (store.host == "127.0.0.1") {
      options->engine.gloo_hostname = store.host;
    } else {
      KOLO_ASSIGN_OR_RETURN(InterfaceAddress route, RouteTo(store.host));
      options->engine.gloo_hostname = route.address;
    }
  }
  return Status::Ok();
}

// Step 2.
StatusOr<StoreConnection> ConnectStore(const InitOptions& options) {
  StoreConnection connection;
  const StoreConfig& store = options.store;
  const WorldInfo& world = options.world.ranks;
  if (store.host.empty() || world.size == 1) return connection;
  if (store.rank0_hosts && world.rank == 0) {
    StatusOr<std::unique_ptr<TcpStoreServer>> started =
        TcpStoreServer::Start(store.host, store.port, store.secret);
    if (!started.ok()) {
      return started.status().WithContext(
          "rank 0 could not host the store at " + store.host + ":" +
          std::to_string(store.port) + " (KOLO_STORE_ADDR)");
    }
    connection.server = std::move(started).value();
  }
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<TcpStoreClient> client,
      TcpStoreClient::Connect(store.host, store.port, store.secret, world.rank,
                              options.engine.timeout));
  connection.client = std::move(client);
  return connection;
}

// Step 3. Every rank of a round adds one arrival, so arrivals k*size+1 ..
// (k+1)*size belong to round k: the number comes from the job, not from
// this process's history, and a process that starts later still meets the
// others in their current round.
StatusOr<int64_t> JoinRound(Store& store, int32_t size) {
  KOLO_ASSIGN_OR_RETURN(int64_t arrival, store.Add("kolo/round_arrivals", 1));
  return (arrival - 1) / size;
}

// The round this process joins (steps 3 and 4): its store (the job's
// under the round's prefix), the store failure news is read from (the
// job's, or the round's own where a driver publishes rounds, as
// kolo::elastic does, because there a rank number names another process in
// every round), and the hosts of the round's ranks.
struct Round {
  std::shared_ptr<Store> store;
  std::string prefix;
  std::shared_ptr<Store> news_store;
  std::optional<HostTopology> topology;
};

StatusOr<Round> JoinRoundAndFindHosts(
    const InitOptions& options, const std::shared_ptr<TcpStoreClient>& client) {
  Round round;
  if (options.world.rendezvous_prefix.empty()) {
    StatusOr<int64_t> number = JoinRound(*client, options.world.ranks.size);
    if (!number.ok()) {
      return number.status().WithContext("joining a rendezvous round");
    }
    round.prefix = "kolo/round" + std::to_string(*number);
  } else {
    round.prefix = options.world.rendezvous_prefix;
  }
  round.store = std::make_shared<PrefixStore>(round.prefix, client);
  round.news_store = options.world.rendezvous_prefix.empty()
                         ? std::shared_ptr<Store>(client)
                         : round.store;
  KOLO_ASSIGN_OR_RETURN(
      round.topology,
      DiscoverTopology(*round.store, "host", options.world.ranks,
                       options.world.host_id, options.engine.timeout));
  return round;
}

// Steps 5 and 6: the engine, and the direct path when the job is on shm on
// one host.
struct Engines {
  EnginePlan plan;
  BackendOptions backend_options;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<DirectPath> direct;
};

StatusOr<Engines> BuildEngines(const InitOptions& options,
                               const WorldInfo& world,
                               const std::optional<HostTopology>& topology,
                               std::shared_ptr<Store> round_store,
                               std::shared_ptr<Store> job_store,
                               const std::string& round_prefix) {
  Engines engines;
  const HostTopology* hosts = topology ? &*topology : nullptr;
  engines.plan = PlanEngine(options.engine, hosts);
  BackendOptions backend_options;
  backend_options.world = world;
  backend_options.timeout = options.engine.timeout;
  backend_options.gloo_hostname = options.engine.gloo_hostname;
  backend_options.job_secret = options.store.secret;
  backend_options.shm_area_bytes = options.engine.shm_area_bytes;
  backend_options.store_prefix = engines.plan.hierarchical
                                     ? "hierarchical"
                                     : BackendName(engines.plan.backend);
  engines.backend_options = backend_options;
  KOLO_ASSIGN_OR_RETURN(
      engines.backend,
      CreateBackend(engines.plan, backend_options, round_store, hosts));
  if (options.direct_path.enabled &&
      engines.plan.backend == BackendKind::kShm && !engines.plan.spans_hosts &&
      world.size > 1) {
    DirectPath::Options direct_options;
    direct_options.world = world;
    direct_options.timeout = options.engine.timeout;
    direct_options.stall_warning = options.runtime.stall_warning;
    direct_options.stall_shutdown = options.runtime.stall_shutdown;
    direct_options.shm_area_bytes = options.engine.shm_area_bytes;
    // The path names dead peers from the job's failure news, so it gets
    // the job's store and keeps its keys under the round's prefix.
    direct_options.store_prefix = round_prefix + "/direct";
    KOLO_ASSIGN_OR_RETURN(engines.direct,
                          DirectPath::Create(direct_options, job_store));
  }
  return engines;
}

// Step 7. Transfers go over shm on one host and over the network engine
// between hosts (tcp or gloo, also under a hierarchical plan), or over MPI.
StatusOr<std::unique_ptr<PointToPoint>> StartPointToPoint(
    const InitOptions& options, const WorldInfo& world, const EnginePlan& plan,
    const std::shared_ptr<Store>& round_store,
    const std::shared_ptr<Store>& news_store) {
  PeerLinkOptions link_options;
  link_options.rank = world.rank;
  link_options.size = world.size;
  link_options.timeout = options.engine.timeout;
  link_options.hostname = options.engine.gloo_hostname;
  link_options.job_secret = options.store.secret;
  link_options.shm_ring_bytes = options.engine.shm_area_bytes;
  std::shared_ptr<Store> link_store;
  if (round_store) {
    link_store = std::make_shared<PrefixStore>("p2p", round_store);
  } else if (plan.backend != BackendKind::kMpi) {
    return FailedPrecondition("point-to-point over " +
                              std::string(BackendName(plan.backend)) +
                              " needs the job's store (KOLO_STORE_ADDR)");
  }
  StatusOr<std::unique_ptr<PeerLink>> link =
      CreatePeerLinkFor(plan.backend, link_options, link_store);
  if (!link.ok()) {
    return link.status().WithContext("building the point-to-point link");
  }
  PointToPoint::Options p2p_options;
  p2p_options.rank = world.rank;
  p2p_options.size = world.size;
  p2p_options.timeout = options.engine.timeout;
  return PointToPoint::Start(p2p_options, *std::move(link), news_store);
}

// The engines this build has, for kolo_info: "shm,tcp,gloo,mpi".
std::string BuiltEngines() {
  std::string engines;
  for (const std::string& engine : BuildInfo().engines) {
    engines += (engines.empty() ? "" : ",") + engine;
  }
  return engines;
}

// Step 8. The metrics learn this rank's number, and where no kolorun serves
// them and KOLO_METRICS_PORT asks for it, the rank serves its own (port P +
// its local rank, so that the ranks of a host do not collide).
StatusOr<std::unique_ptr<metrics::MetricsExporter>> StartMetrics(
    const WorldInfo& world) {
  metrics::SetProcessRank(world.rank);
  metrics::SetProcessPhase(metrics::RankPhase::kRunning);
  static const metrics::Gauge info = metrics::KoloGauge(
      "kolo_info", "kolo's version and the engines this build has; always 1.",
      {{"version", BuildInfo().version}, {"engines", BuiltEngines()}});
  info.Set(1);
  KOLO_ASSIGN_OR_RETURN(MetricsEnvironment env,
                        ReadMetricsEnvironment(ProcessEnvironment()));
  if (!env.port) return std::unique_ptr<metrics::MetricsExporter>();
  metrics::ExporterOptions options;
  options.address = env.address;
  options.port = *env.port == 0 ? 0 : *env.port + world.local_rank;
  options.job = env.job;
  options.host = env.host;
  options.own_arena = &metrics::ProcessArena();
  StatusOr<std::unique_ptr<metrics::MetricsExporter>> exporter =
      metrics::MetricsExporter::Start(options);
  if (!exporter.ok()) {
    return exporter.status().WithContext(std::string(env::kMetricsPort) + "=" +
                                         std::to_string(*env.port));
  }
  KOLO_LOG(INFO) << "metrics at " << (*exporter)->Url() << "/metrics";
  return exporter;
}

// A program that returns from main without Shutdown() still leaves the job
// in step with its peers (and before MPI ends, whose own exit handler was
// registered earlier and so runs later).
void ShutdownAtExit() {
  static const bool registered = [] {
    return std::atexit([] { (void)Process::Get().Shutdown(); }) == 0;
  }();
  (void)registered;
}

}  // namespace

Process& Process::Get() {
  static Process* process = new Process();  // never freed: see the header
  return *process;
}

Status Process::Init(const InitOptions& given) {
  MutexLock lock(&mutex_);
  if (membership_) return Status::Ok();
  KOLO_RETURN_IF_ERROR(ApplyProcessSettings(given));
  InitOptions options = given;
  std::unique_ptr<TcpStoreServer> shared_server;
  if (options.store.shared_over_mpi && options.world.ranks.size > 1) {
    KOLO_RETURN_IF_ERROR(ShareStoreOverMpi(&options, &shared_server));
  }
  auto membership = std::make_unique<Membership>();
  membership->options = options;
  membership->world = options.world.ranks;

  KOLO_ASSIGN_OR_RETURN(StoreConnection connection, ConnectStore(options));
  if (shared_server) connection.server = std::move(shared_server);
  std::shared_ptr<TcpStoreClient> client = connection.client;
  // Leaves the store politely on every failure below, so that the store
  // does not report this rank as dead.
  auto fail = [&](const Status& status) {
    if (client) (void)client->Close();
    return status;
  };

  // Steps 3 and 4. Where there is no store (MPI alone) the launcher's
  // description stands, and failure news has no store to come from.
  Round round;
  if (client) {
    StatusOr<Round> joined = JoinRoundAndFindHosts(options, client);
    if (!joined.ok()) return fail(joined.status());
    round = *std::move(joined);
    membership->world = round.topology->world;
  }
  std::shared_ptr<Store> round_store = round.store;
  std::shared_ptr<Store> news_store = round.news_store;
  const std::string& round_prefix = round.prefix;
  const std::optional<HostTopology>& topology = round.topology;

  StatusOr<Engines> engines =
      BuildEngines(options, membership->world, topology, round_store,
                   news_store, round_prefix);
  if (!engines.ok()) return fail(engines.status());
  membership->hierarchical_allreduce = engines->plan.hierarchical;
  membership->plan = engines->plan;
  membership->backend_options = engines->backend_options;
  membership->topology = topology;
  membership->round_store = round_store;
  if (membership->world.size > 1) {
    StatusOr<std::unique_ptr<PointToPoint>> point_to_point = StartPointToPoint(
        options, membership->world, engines->plan, round_store, news_store);
    if (!point_to_point.ok()) return fail(point_to_point.status());
    membership->point_to_point = *std::move(point_to_point);
  }
  // A hierarchical job reports the engine it asked for (shm inside hosts).
  membership->active_backend = engines->plan.hierarchical
                                   ? options.engine.backend
                                   : engines->plan.backend;

  // Step 7.
  RuntimeOptions runtime_options;
  static_cast<RuntimeConfig&>(runtime_options) = options.runtime;
  runtime_options.world = membership->world;
  runtime_options.timeline_path = options.timeline.path;
  runtime_options.timeline_section = inits_;
  runtime_options.timeout = options.engine.timeout;
  runtime_options.engine_name = engines->plan.hierarchical
                                    ? "hierarchical"
                                    : BackendName(engines->plan.backend);
  StatusOr<std::unique_ptr<Runtime>> runtime =
      Runtime::Start(runtime_options, std::move(engines->backend), news_store,
                     std::move(engines->direct));
  if (!runtime.ok()) return fail(runtime.status());
  StatusOr<std::unique_ptr<metrics::MetricsExporter>> exporter =
      StartMetrics(membership->world);
  if (!exporter.ok()) {
    (void)(*runtime)->Shutdown();
    return fail(exporter.status());
  }
  membership->metrics_exporter = *std::move(exporter);

  ++inits_;
  membership->store_server = std::move(connection.server);
  membership->store_client = std::move(client);
  membership->runtime = std::move(runtime).value();
  membership->sync =
      std::make_unique<SynchronousCollectives>(membership->runtime.get());
  membership_ = std::move(membership);
  ShutdownAtExit();
  return Status::Ok();
}

Status Process::Shutdown() {
  std::unique_ptr<Membership> membership;
  {
    MutexLock lock(&mutex_);
    if (!membership_) return Status::Ok();
    // The membership leaves the table first, so that calls from now on see
    // an uninitialized process; its pieces are torn down outside the lock,
    // because the runtime's last ticks may complete operations whose
    // callbacks call back into kolo.
    membership = std::move(membership_);
  }
  membership->metrics_exporter.reset();
  for (const std::weak_ptr<internal::GroupState>& weak : membership->groups) {
    if (std::shared_ptr<internal::GroupState> group = weak.lock()) {
      group->Close();
    }
  }
  membership->point_to_point.reset();
  membership->sync.reset();
  Status status = membership->runtime->Shutdown();
  metrics::SetProcessPhase(metrics::RankPhase::kFinished);
  membership->runtime.reset();
  if (membership->store_client) (void)membership->store_client->Close();
  membership->store_client.reset();
  membership->store_server.reset();
  return status;
}

bool Process::initialized() const {
  MutexLock lock(&mutex_);
  return membership_ != nullptr;
}

WorldInfo Process::world() const {
  MutexLock lock(&mutex_);
  return membership_ ? membership_->world : WorldInfo{};
}

BackendKind Process::active_backend() const {
  MutexLock lock(&mutex_);
  return membership_ ? membership_->active_backend : BackendKind::kGloo;
}

bool Process::hierarchical_allreduce() const {
  MutexLock lock(&mutex_);
  return membership_ && membership_->hierarchical_allreduce;
}

Runtime* Process::runtime() const {
  MutexLock lock(&mutex_);
  return membership_ ? membership_->runtime.get() : nullptr;
}

PointToPoint* Process::point_to_point() const {
  MutexLock lock(&mutex_);
  return membership_ ? membership_->point_to_point.get() : nullptr;
}

namespace {

// The members' own world: their ranks, hosts and local places.
WorldInfo GroupWorld(const std::vector<int32_t>& ranks, int32_t group_rank,
                     const std::optional<HostTopology>& topology) {
  WorldInfo world;
  world.rank = group_rank;
  world.size = static_cast<int32_t>(ranks.size());
  world.local_rank = group_rank;
  world.local_size = world.size;
  if (!topology) return world;
  const int32_t my_host = topology->host_of_rank[ranks[group_rank]];
  std::vector<int32_t> hosts;
  world.local_rank = 0;
  world.local_size = 0;
  for (int32_t g = 0; g < world.size; ++g) {
    const int32_t host = topology->host_of_rank[ranks[g]];
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) {
      hosts.push_back(host);
    }
    if (host == my_host) {
      if (g < group_rank) ++world.local_rank;
      ++world.local_size;
    }
  }
  world.cross_size = static_cast<int32_t>(hosts.size());
  world.cross_rank = static_cast<int32_t>(
      std::find(hosts.begin(), hosts.end(), my_host) - hosts.begin());
  return world;
}

Status CheckGroupRanks(const std::vector<int32_t>& ranks, int32_t size) {
  if (ranks.empty()) return InvalidArgument("NewGroup: the rank list is empty");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) {
      return InvalidArgument("NewGroup: rank " + std::to_string(ranks[i]) +
                             " is not in the world of " + std::to_string(size) +
                             " ranks");
    }
    if (i > 0 && ranks[i] <= ranks[i - 1]) {
      return InvalidArgument(
          "NewGroup: the ranks must be sorted and distinct (rank " +
          std::to_string(ranks[i]) + " follows rank " +
          std::to_string(ranks[i - 1]) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<ProcessGroup>> Process::NewGroup(
    const std::vector<int32_t>& ranks) {
  // What the engine needs is copied out: building it is collective and may
  // wait for the other members, while the process's lock serves every
  // other call.
  EnginePlan plan;
  BackendOptions options;
  std::optional<HostTopology> topology;
  std::shared_ptr<Store> store;
  int64_t id = 0;
  WorldInfo world;
  {
    MutexLock lock(&mutex_);
    if (!membership_) {
      return FailedPrecondition(
          "NewGroup: kolo::Init() has not been called (or Shutdown() has)");
    }
    world = membership_->world;
    plan = membership_->plan;
    options = membership_->backend_options;
    topology = membership_->topology;
    store = membership_->round_store;
    id = membership_->groups_created++;
  }
  KOLO_RETURN_IF_ERROR(CheckGroupRanks(ranks, world.size));
  const auto me = std::find(ranks.begin(), ranks.end(), world.rank);
  const bool member = me != ranks.end();
  auto state = std::make_shared<internal::GroupState>();
  state->ranks = ranks;
  state->id = id;
  state->rank = member ? static_cast<int32_t>(me - ranks.begin()) : -1;
  // A group's collectives run flat: its members are few, and the
  // hierarchical plan's host leaders are the world's.
  plan.hierarchical = false;
  const std::string prefix = "group" + std::to_string(id);
  std::unique_ptr<Backend> backend;
  if (plan.backend == BackendKind::kMpi) {
    options.world =
        member ? GroupWorld(ranks, state->rank, topology) : WorldInfo{};
    options.store_prefix = prefix;
    StatusOr<std::unique_ptr<Backend>> made =
        CreateMpiSubBackend(options, member);
    if (!made.ok())
      return made.status().WithContext("NewGroup #" + std::to_string(id));
    backend = *std::move(made);
  } else if (member && ranks.size() > 1) {
    options.world = GroupWorld(ranks, state->rank, topology);
    options.store_prefix = prefix;
    StatusOr<std::unique_ptr<Backend>> made =
        CreateBackend(plan, options, store, nullptr);
    if (!made.ok()) {
      return made.status().WithContext(
          "NewGroup #" + std::to_string(id) + " of ranks " +
          std::to_string(ranks.front()) + ".." + std::to_string(ranks.back()));
    }
    backend = *std::move(made);
  }
  if (!member) return std::shared_ptr<ProcessGroup>();
  {
    MutexLock lock(&state->mutex);
    state->backend = std::move(backend);
  }
  MutexLock lock(&mutex_);
  if (!membership_)
    return FailedPrecondition("NewGroup: kolo::Shutdown() ran meanwhile");
  membership_->groups.push_back(state);
  return std::make_shared<ProcessGroup>(state);
}

SynchronousCollectives* Process::sync() const {
  MutexLock lock(&mutex_);
  return membership_ ? membership_->sync.get() : nullptr;
}

}  // namespace kolo
