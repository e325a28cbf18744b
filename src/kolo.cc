// The process-wide instance behind kolo.h's free functions. Like Horovod's
// hvd.init(), kolo::Init() gives each process one job membership; this file
// is the only place that keeps it, guarded by one mutex.
#include "kolo/kolo.h"

#include <mutex>

#include "collectives/communicator.h"
#include "common/config.h"
#include "common/logging.h"
#include "store/tcp_store.h"

namespace kolo {
namespace {

struct Process {
  std::mutex mutex;
  bool initialized = false;         // guarded by mutex
  int generation = 0;               // guarded by mutex; Init calls so far
  JobConfig config;                 // guarded by mutex
  std::unique_ptr<TcpStoreServer> store_server;   // rank 0 without kolorun
  std::shared_ptr<TcpStoreClient> store_client;
  std::unique_ptr<Communicator> communicator;
};

Process& TheProcess() {
  static Process* process = new Process();  // lives until exit, never freed
  return *process;
}

const WorldInfo kSingleProcess{};

Status NotInitialized() {
  return FailedPrecondition("kolo::Init() has not been called (or Shutdown() has)");
}

// Runs `call` on the communicator when initialized.
template <typename Call>
Status WithCommunicator(Call&& call) {
  Process& p = TheProcess();
  Communicator* communicator = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (!p.initialized) return NotInitialized();
    communicator = p.communicator.get();
  }
  return call(*communicator);
}

}  // namespace

const char* BackendName(BackendKind kind) {
  return kind == BackendKind::kMpi ? "mpi" : "gloo";
}

StatusOr<BackendKind> ParseBackend(const std::string& name) {
  if (name == "gloo") return BackendKind::kGloo;
  if (name == "mpi") {
#ifdef KOLO_WITH_MPI
    return BackendKind::kMpi;
#else
    return InvalidArgument("backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
#endif
  }
  return InvalidArgument("unknown backend '" + name + "' (expected gloo or mpi)");
}

#ifndef KOLO_WITH_MPI
StatusOr<std::unique_ptr<Backend>> CreateMpiBackend(const BackendOptions&) {
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

  CommunicatorOptions options;
  options.world = world;
  options.backend = config.backend;
  options.timeout = config.timeout;
  options.gloo_hostname = config.gloo_hostname;
  options.store_prefix = "kolo/init" + std::to_string(p.generation);
  StatusOr<std::unique_ptr<Communicator>> communicator =
      Communicator::Create(options, client);
  if (!communicator.ok()) {
    if (client) (void)client->Close();
    return communicator.status();
  }
  ++p.generation;
  p.config = config;
  p.store_server = std::move(server);
  p.store_client = std::move(client);
  p.communicator = std::move(communicator).value();
  p.initialized = true;
  return Status::Ok();
}

Status Shutdown() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.initialized) return Status::Ok();
  p.initialized = false;
  Status status = Status::Ok();
  // A final barrier so no rank tears down its connections while a peer is
  // still reading from them; skipped once the job has already failed.
  if (p.communicator->sticky_error().ok()) status = p.communicator->Barrier();
  if (p.store_client) (void)p.store_client->Close();
  p.communicator.reset();
  p.store_client.reset();
  p.store_server.reset();
  return status;
}

bool IsInitialized() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized;
}

const WorldInfo& World() {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.initialized ? p.communicator->world() : kSingleProcess;
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
  return p.initialized ? p.communicator->backend_kind() : BackendKind::kGloo;
}

Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                 ReduceOp op) {
  return WithCommunicator(
      [&](Communicator& c) { return c.Allreduce(send, recv, count, type, op); });
}

Status Allgather(const void* send, void* recv, int64_t count, DataType type) {
  return WithCommunicator(
      [&](Communicator& c) { return c.Allgather(send, recv, count, type); });
}

Status Allgatherv(const void* send, int64_t send_count, void* recv,
                  const std::vector<int64_t>& recv_counts, DataType type) {
  return WithCommunicator([&](Communicator& c) {
    return c.Allgatherv(send, send_count, recv, recv_counts, type);
  });
}

Status Broadcast(const void* send, void* recv, int64_t count, DataType type,
                 int32_t root) {
  return WithCommunicator(
      [&](Communicator& c) { return c.Broadcast(send, recv, count, type, root); });
}

Status Alltoall(const void* send, void* recv, int64_t count, DataType type) {
  return WithCommunicator(
      [&](Communicator& c) { return c.Alltoall(send, recv, count, type); });
}

Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                 void* recv, const std::vector<int64_t>& recv_counts,
                 DataType type) {
  return WithCommunicator([&](Communicator& c) {
    return c.Alltoallv(send, send_counts, recv, recv_counts, type);
  });
}

Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                     DataType type, ReduceOp op) {
  return WithCommunicator([&](Communicator& c) {
    return c.Reducescatter(send, recv, recv_count, type, op);
  });
}

Status Barrier() {
  return WithCommunicator([&](Communicator& c) { return c.Barrier(); });
}

}  // namespace kolo
