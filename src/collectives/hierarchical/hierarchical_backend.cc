// Hierarchical allreduce: the engine kolo uses when a job spans hosts and
// some host holds several ranks.
//
// Inside a host, shared memory is an order of magnitude faster than the
// network, so an allreduce runs in three stages:
//
//   1. reduce inside each host over shm: every rank of the host ends with
//      the host's sum (the shm allreduce reads its peers' buffers straight
//      from their segments, so reaching every rank costs no more than
//      reaching one);
//   2. allreduce across hosts, one leader per host (the host's lowest
//      rank), over the network engine (tcp, Gloo or MPI): the only stage that
//      touches the network, and it carries one buffer per host instead of
//      one per rank;
//   3. broadcast inside each host over shm, from the leader.
//
// Min, max and prod compose the same way as sum, and averaging happens
// above the backend, so every ReduceOp works. The other collectives move
// data between arbitrary rank pairs and gain nothing from the split: they
// run flat over the network engine across the whole world.
//
// A host with one rank skips stages 1 and 3; a rank that is not its host's
// leader skips stage 2 and waits in stage 3, whose shm wait watches the
// leader's pid and the job timeout, so a failed leader cannot hang it.
#include <cstring>

#include "collectives/backend.h"

namespace kolo {
namespace {

class HierarchicalBackend : public Backend {
 public:
  HierarchicalBackend(std::unique_ptr<Backend> flat,
                      std::unique_ptr<Backend> local,
                      std::unique_ptr<Backend> cross)
      : flat_(std::move(flat)),
        local_(std::move(local)),
        cross_(std::move(cross)) {}

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op) override {
    if (local_) {
      KOLO_RETURN_IF_ERROR(
          Stage("reduce inside the host",
                local_->Allreduce(send, recv, count, type, op)));
    } else if (send != recv) {
      std::memcpy(recv, send, count * DataTypeSize(type));
    }
    if (cross_) {
      KOLO_RETURN_IF_ERROR(
          Stage("allreduce across hosts",
                cross_->Allreduce(recv, recv, count, type, op)));
    }
    if (local_) {
      KOLO_RETURN_IF_ERROR(
          Stage("broadcast inside the host",
                local_->Broadcast(recv, count, type, /*root=*/0)));
    }
    return Status::Ok();
  }

  Status Allgatherv(const void* send, void* recv,
                    const std::vector<int64_t>& counts,
                    DataType type) override {
    return flat_->Allgatherv(send, recv, counts, type);
  }
  Status Broadcast(void* buffer, int64_t count, DataType type,
                   int32_t root) override {
    return flat_->Broadcast(buffer, count, type, root);
  }
  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                   void* recv, const std::vector<int64_t>& recv_counts,
                   DataType type) override {
    return flat_->Alltoallv(send, send_counts, recv, recv_counts, type);
  }
  Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                       DataType type, ReduceOp op) override {
    return flat_->Reducescatter(send, recv, recv_count, type, op);
  }
  Status Barrier() override { return flat_->Barrier(); }

  // The network stage dominates, so the network engine's cutoff applies.
  int64_t FusionCutoffBytes() const override {
    return flat_->FusionCutoffBytes();
  }

 private:
  static Status Stage(const char* stage, Status status) {
    return status.ok() ? status
                       : status.WithContext("hierarchical allreduce, " +
                                            std::string(stage));
  }

  const std::unique_ptr<Backend> flat_;
  const std::unique_ptr<Backend> local_;  // null on a host with one rank
  const std::unique_ptr<Backend>
      cross_;  // null unless this rank leads its host
};

StatusOr<std::unique_ptr<Backend>> CreateNetworkBackend(
    const BackendOptions& options, std::shared_ptr<Store> store,
    BackendKind network) {
  switch (network) {
    case BackendKind::kMpi: return CreateMpiBackend(options);
    case BackendKind::kTcp: return CreateTcpBackend(options, std::move(store));
    default: return CreateGlooBackend(options, std::move(store));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateHierarchicalBackend(
    const BackendOptions& options, std::shared_ptr<Store> store,
    const HostTopology& topology, BackendKind network) {
  if (network == BackendKind::kShm) {
    return InvalidArgument(
        "hierarchical allreduce needs a network engine (tcp, gloo or mpi), "
        "not shm");
  }
  if (!store) return InvalidArgument("hierarchical allreduce needs the store");
  const WorldInfo& world = topology.world;

  BackendOptions flat_options = options;
  flat_options.world = world;
  flat_options.store_prefix = options.store_prefix + "/flat";
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<Backend> flat,
                        CreateNetworkBackend(flat_options, store, network));

  // The leaders' world: rank = host index, in host order.
  BackendOptions cross_options = options;
  cross_options.world = WorldInfo{world.cross_rank, world.cross_size, 0, 1,
                                  world.cross_rank, world.cross_size};
  cross_options.store_prefix = options.store_prefix + "/cross";
  const bool leader = topology.IsLeader(world.rank);
  std::unique_ptr<Backend> cross;
  if (network == BackendKind::kMpi) {
    // Collective over every rank, leader or not.
    KOLO_ASSIGN_OR_RETURN(cross, CreateMpiSubBackend(cross_options, leader));
  } else if (leader) {
    KOLO_ASSIGN_OR_RETURN(cross,
                          CreateNetworkBackend(cross_options, store, network));
  }

  std::unique_ptr<Backend> local;
  if (world.local_size > 1) {
    BackendOptions local_options = options;
    local_options.world = WorldInfo{world.local_rank,
                                    world.local_size,
                                    world.local_rank,
                                    world.local_size,
                                    0,
                                    1};
    local_options.store_prefix =
        options.store_prefix + "/host" + std::to_string(world.cross_rank);
    KOLO_ASSIGN_OR_RETURN(local, CreateShmBackend(local_options, store));
  }
  return std::unique_ptr<Backend>(new HierarchicalBackend(
      std::move(flat), std::move(local), std::move(cross)));
}

}  // namespace kolo
