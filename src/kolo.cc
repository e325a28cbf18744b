// The process-wide instance behind kolo.h's and runtime.h's free
// functions. Like Horovod's hvd.init(), kolo::Init() gives each process one
// job membership; this file is the only place that keeps it, guarded by one
// mutex. The synchronous collectives of kolo.h are thin wrappers over the
// runtime (runtime/synchronous.h).
#include "kolo/kolo.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "collectives/backend.h"
#include "collectives/topology.h"
#include "common/config.h"
#include "common/logging.h"
#include "kolo/runtime.h"
#include "runtime/runtime.h"
#include "runtime/synchronous.h"
#include "store/tcp_store.h"

namespace kolo {
namespace {

struct Process {
  std::mutex mutex;
  bool initialized = false;  // guarded by mutex
  int generation = 0;        // guarded by mutex; Init calls so far
  JobConfig config;          // guarded by mutex
  bool hierarchical_allreduce = false;  // guarded by mutex
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 without kolorun
  std::shared_ptr<TcpStoreClient> store_client;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<SynchronousCollectives> sync;
};

Process& TheProcess() {
  static Process* process = new Process();  // lives until exit, never freed
  return *process;
}

const WorldInfo kSingleProcess{};

Status NotInitialized() {
  return FailedPrecondition("kolo::Init() has not been called (or Shutdown() has)");
}

// The runtime of an initialized process, or null.
Runtime* TheRuntime() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized ? p.runtime.get() : nullptr;
}

}  // namespace

const char* BackendName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kShm: return "shm";
    default: return "gloo";
  }
}

StatusOr<BackendKind> ParseBackend(const std::string& name) {
  if (name == "gloo") return BackendKind::kGloo;
  if (name == "shm") return BackendKind::kShm;
  if (name == "mpi") {
#ifdef KOLO_WITH_MPI
    return BackendKind::kMpi;
#else
    return InvalidArgument("backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
#endif
  }
  return InvalidArgument("unknown backend '" + name + "' (expected gloo, mpi or shm)");
}

#ifndef KOLO_WITH_MPI
StatusOr<std::unique_ptr<Backend>> CreateMpiBackend(const BackendOptions&) {
  return InvalidArgument("backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
}
StatusOr<std::unique_ptr<Backend>> CreateMpiSubBackend(const BackendOptions&, bool) {
  return InvalidArgument("backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
}
#endif
#ifndef KOLO_WITH_GLOO
StatusOr<std::unique_ptr<Backend>> CreateGlooBackend(const BackendOptions&,
                                                     std::shared_ptr<Store>) {
  return InvalidArgument("backend 'gloo' was not built (configure with -DKOLO_WITH_GLOO=ON)");
}
#endif

Status Init() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.initialized) return Status::Ok();
  KOLO_ASSIGN_OR_RETURN(JobConfig config, ReadJobConfig(ProcessEnvironment()));
  const WorldInfo& world = config.world;
  SetLogPrefix("rank " + std::to_string(world.rank));

  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<TcpStoreClient> client;
  if (!config.store_host.empty() && world.size > 1) {
    if (config.rank0_hosts_store && world.rank == 0) {
      StatusOr<std::unique_ptr<TcpStoreServer>> started = TcpStoreServer::Start(
          config.store_host, config.store_port, config.store_secret);
      if (!started.ok()) {
        return started.status().WithContext(
            "rank 0 could not host the store at " + config.store_host + ":" +
            std::to_string(config.store_port) + " (KOLO_STORE_ADDR)");
      }
      server = std::move(started).value();
    }
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<TcpStoreClient> connected,
        TcpStoreClient::Connect(config.store_host, config.store_port,
                                config.store_secret, world.rank, config.timeout));
    client = std::move(connected);
  }

  // Each Init's keys live apart in the store, so a re-initialized job
  // never reads the previous round's.
  const std::string store_prefix = "kolo/init" + std::to_string(p.generation);
  // The job agrees on which ranks share a host; where there is no store
  // (MPI alone) the launcher's description stands.
  std::optional<HostTopology> topology;
  if (client) {
    StatusOr<HostTopology> found = DiscoverTopology(*client, store_prefix + "/host", world,
                                                    config.host_id, config.timeout);
    if (!found.ok()) {
      (void)client->Close();
      return found.status();
    }
    topology = *std::move(found);
    config.world = topology->world;
  }
  const bool spans_hosts = topology && topology->HostCount() > 1;
  const bool hierarchical =
      spans_hosts && config.hierarchical_allreduce.value_or(topology->LargestHost() > 1);
  // Between hosts, a job asked to run on shm runs on Gloo.
  const BackendKind network =
      config.backend == BackendKind::kShm ? BackendKind::kGloo : config.backend;
  if (spans_hosts && !hierarchical) config.backend = network;

  BackendOptions backend_options;
  backend_options.world = world;
  backend_options.timeout = config.timeout;
  backend_options.gloo_hostname = config.gloo_hostname;
  backend_options.store_prefix = store_prefix + "/gloo";
  StatusOr<std::unique_ptr<Backend>> backend = std::unique_ptr<Backend>();
  backend_options.shm_area_bytes = config.shm_area_bytes;
  if (hierarchical) {
    backend_options.store_prefix = store_prefix + "/hierarchical";
    backend = CreateHierarchicalBackend(backend_options, client, *topology, network);
  } else if (network == BackendKind::kMpi) {
    backend = CreateMpiBackend(backend_options);
  } else if (config.backend == BackendKind::kShm && world.size > 1) {
    backend_options.store_prefix = store_prefix + "/shm";
    backend = CreateShmBackend(backend_options, client);
  } else if (world.size > 1) {
    backend = CreateGlooBackend(backend_options, client);
  }
  RuntimeOptions runtime_options;
  runtime_options.world = world;
  runtime_options.cycle_time = config.cycle_time;
  runtime_options.fusion_threshold_bytes = config.fusion_threshold_bytes;
  runtime_options.cache_capacity = config.cache_capacity;
  runtime_options.timeline_path = config.timeline_path;
  runtime_options.stall_warning = config.stall_warning;
  runtime_options.stall_shutdown = config.stall_shutdown;
  runtime_options.timeout = config.timeout;
  // Ranks on shm lease their idle runtime to synchronous calls.
  StatusOr<std::unique_ptr<DirectPath>> direct = std::unique_ptr<DirectPath>();
  if (backend.ok() && config.direct_path && config.backend == BackendKind::kShm &&
      !spans_hosts && world.size > 1) {
    DirectPath::Options direct_options;
    direct_options.world = world;
    direct_options.timeout = config.timeout;
    direct_options.stall_warning = config.stall_warning;
    direct_options.stall_shutdown = config.stall_shutdown;
    direct_options.shm_area_bytes = config.shm_area_bytes;
    direct_options.store_prefix = store_prefix + "/direct";
    direct = DirectPath::Create(direct_options, client);
  }
  StatusOr<std::unique_ptr<Runtime>> runtime =
      !backend.ok()  ? StatusOr<std::unique_ptr<Runtime>>(backend.status())
      : !direct.ok() ? StatusOr<std::unique_ptr<Runtime>>(direct.status())
                     : Runtime::Start(runtime_options, std::move(backend).value(), client,
                                      std::move(direct).value());
  if (!runtime.ok()) {
    if (client) (void)client->Close();
    return runtime.status();
  }
  ++p.generation;
  p.config = config;
  p.hierarchical_allreduce = hierarchical;
  p.store_server = std::move(server);
  p.store_client = std::move(client);
  p.runtime = std::move(runtime).value();
  p.sync = std::make_unique<SynchronousCollectives>(p.runtime.get());
  p.initialized = true;
  // A program that returns from main without Shutdown() still leaves the job
  // in step with its peers (and before MPI ends, whose own exit handler was
  // registered earlier and so runs later).
  static const bool shutdown_at_exit = [] { return std::atexit([] { (void)Shutdown(); }) == 0; }();
  (void)shutdown_at_exit;
  return Status::Ok();
}

Status Shutdown() {
  Process& p = TheProcess();
  std::unique_ptr<Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (!p.initialized) return Status::Ok();
    p.initialized = false;
    runtime = std::move(p.runtime);
    p.sync.reset();
  }
  // Outside the lock: the runtime's last ticks may complete operations
  // whose callbacks call back into kolo.
  Status status = runtime->Shutdown();
  runtime.reset();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.store_client) (void)p.store_client->Close();
  p.store_client.reset();
  p.store_server.reset();
  return status;
}

bool HierarchicalAllreduce() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized && p.hierarchical_allreduce;
}

bool IsInitialized() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized;
}

const WorldInfo& World() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized ? p.config.world : kSingleProcess;
}

int32_t Rank() { return World().rank; }
int32_t Size() { return World().size; }
int32_t LocalRank() { return World().local_rank; }
int32_t LocalSize() { return World().local_size; }
int32_t CrossRank() { return World().cross_rank; }
int32_t CrossSize() { return World().cross_size; }

BackendKind ActiveBackend() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized ? p.config.backend : BackendKind::kGloo;
}

// ---------------------------------------------------------------- kolo.h

namespace {

// Runs `call` on the process's synchronous collectives when initialized.
template <typename Call>
Status WithSync(Call&& call) {
  Process& p = TheProcess();
  SynchronousCollectives* sync = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (!p.initialized) return NotInitialized();
    sync = p.sync.get();
  }
  return call(*sync);
}

}  // namespace

Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                 ReduceOp op) {
  return WithSync([&](SynchronousCollectives& c) { return c.Allreduce(send, recv, count, type, op); });
}

Status Allgather(const void* send, void* recv, int64_t count, DataType type) {
  return WithSync([&](SynchronousCollectives& c) { return c.Allgather(send, recv, count, type); });
}

Status Allgatherv(const void* send, int64_t send_count, void* recv,
                  const std::vector<int64_t>& recv_counts, DataType type) {
  return WithSync([&](SynchronousCollectives& c) {
    return c.Allgatherv(send, send_count, recv, recv_counts, type);
  });
}

Status Broadcast(const void* send, void* recv, int64_t count, DataType type,
                 int32_t root) {
  return WithSync(
      [&](SynchronousCollectives& c) { return c.Broadcast(send, recv, count, type, root); });
}

Status Alltoall(const void* send, void* recv, int64_t count, DataType type) {
  return WithSync([&](SynchronousCollectives& c) { return c.Alltoall(send, recv, count, type); });
}

Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                 void* recv, const std::vector<int64_t>& recv_counts,
                 DataType type) {
  return WithSync([&](SynchronousCollectives& c) {
    return c.Alltoallv(send, send_counts, recv, recv_counts, type);
  });
}

Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                     DataType type, ReduceOp op) {
  return WithSync([&](SynchronousCollectives& c) {
    return c.Reducescatter(send, recv, recv_count, type, op);
  });
}

Status Barrier() {
  return WithSync([&](SynchronousCollectives& c) { return c.Barrier(); });
}

// ---------------------------------------------------------------- runtime.h

namespace {

StatusOr<Handle> EnqueueOne(TensorSpec spec, const std::string& name, const void* send,
                            void* recv, CompletionCallback callback) {
  Runtime* runtime = TheRuntime();
  if (runtime == nullptr) return NotInitialized();
  spec.name = name;
  return runtime->Enqueue(std::move(spec), send, recv, std::move(callback));
}

}  // namespace

StatusOr<Handle> EnqueueAllreduce(const std::string& name, const void* send, void* recv,
                                  int64_t count, DataType type, ReduceOp op,
                                  CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kAllreduce, type, count, op), name, send, recv,
                    std::move(callback));
}

StatusOr<std::vector<Handle>> EnqueueGroupedAllreduce(
    const std::string& group_name, const std::vector<AllreduceTensor>& tensors, DataType type,
    ReduceOp op, CompletionCallback callback) {
  Runtime* runtime = TheRuntime();
  if (runtime == nullptr) return NotInitialized();
  if (tensors.empty()) return InvalidArgument("group '" + group_name + "' has no tensors");
  std::vector<TensorSpec> specs;
  std::vector<const void*> sends;
  std::vector<void*> recvs;
  for (const AllreduceTensor& t : tensors) {
    TensorSpec spec = MakeSpec(Collective::kAllreduce, type, t.count, op);
    spec.name = t.name;
    spec.group = group_name;
    spec.group_size = static_cast<int32_t>(tensors.size());
    specs.push_back(std::move(spec));
    sends.push_back(t.send);
    recvs.push_back(t.recv);
  }
  return runtime->EnqueueGroup(std::move(specs), std::move(sends), std::move(recvs),
                               std::move(callback));
}

StatusOr<Handle> EnqueueAllgather(const std::string& name, const void* send, int64_t count,
                                  DataType type, CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kAllgather, type, count), name, send, nullptr,
                    std::move(callback));
}

StatusOr<Handle> EnqueueBroadcast(const std::string& name, void* buffer, int64_t count,
                                  DataType type, int32_t root, CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kBroadcast, type, count, ReduceOp::kSum, root), name,
                    buffer, buffer, std::move(callback));
}

StatusOr<Handle> EnqueueAlltoall(const std::string& name, const void* send,
                                 const std::vector<int64_t>& send_counts, DataType type,
                                 CompletionCallback callback) {
  int64_t total = 0;
  for (int64_t c : send_counts) total += c;
  TensorSpec spec = MakeSpec(Collective::kAlltoall, type, total);
  spec.splits = send_counts;
  return EnqueueOne(std::move(spec), name, send, nullptr, std::move(callback));
}

StatusOr<Handle> EnqueueReducescatter(const std::string& name, const void* send,
                                      int64_t count, DataType type, ReduceOp op,
                                      CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kReducescatter, type, count, op), name, send, nullptr,
                    std::move(callback));
}

StatusOr<int32_t> Join() {
  Runtime* runtime = TheRuntime();
  if (runtime == nullptr) return NotInitialized();
  return runtime->Join();
}

RuntimeStats GetRuntimeStats() {
  Runtime* runtime = TheRuntime();
  return runtime == nullptr ? RuntimeStats{} : runtime->stats();
}

}  // namespace kolo
