// Communicator: kolo's collectives over one backend, with the guarantees
// kolo.h promises: the argument check before data moves (descriptor.h),
// empty buffers, averaging, single-rank worlds, sticky errors, and peer
// failures that name the dead rank.
//
// Naming the dead rank. Engines report a lost peer as a socket error or a
// timeout, by address at best. The store server knows better: each rank
// holds one connection to it, and a connection that closes without a
// goodbye is recorded under kFailedRanksKey. On a peer failure the
// communicator reads that key (waiting briefly, as the news may trail the
// engine's error by a few milliseconds) and puts the ranks in the error.
//
// Thread-safety: one collective at a time; the object is not shared between
// threads without external locking.
#ifndef KOLO_COLLECTIVES_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_COMMUNICATOR_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "collectives/descriptor.h"
#include "kolo/kolo.h"
#include "store/store.h"

namespace kolo {

struct CommunicatorOptions {
  WorldInfo world;
  BackendKind backend = BackendKind::kGloo;
  std::chrono::milliseconds timeout{30000};
  std::string gloo_hostname = "127.0.0.1";
  // Distinguishes communicators created one after another over one store.
  std::string store_prefix = "kolo/comm0";
};

class Communicator {
 public:
  // `store` may be null for the MPI backend and for one-rank worlds.
  static StatusOr<std::unique_ptr<Communicator>> Create(
      const CommunicatorOptions& options, std::shared_ptr<Store> store);

  const WorldInfo& world() const { return world_; }
  BackendKind backend_kind() const { return backend_kind_; }
  // The error that made this communicator unusable, or ok.
  const Status& sticky_error() const { return sticky_error_; }

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op);
  Status Allgather(const void* send, void* recv, int64_t count, DataType type);
  Status Allgatherv(const void* send, int64_t send_count, void* recv,
                    const std::vector<int64_t>& recv_counts, DataType type);
  Status Broadcast(const void* send, void* recv, int64_t count, DataType type,
                   int32_t root);
  Status Alltoall(const void* send, void* recv, int64_t count, DataType type);
  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                   void* recv, const std::vector<int64_t>& recv_counts,
                   DataType type);
  Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                       DataType type, ReduceOp op);
  Status Barrier();

 private:
  Communicator(const CommunicatorOptions& options, std::shared_ptr<Store> store,
               std::unique_ptr<Backend> backend);

  // The one path every collective takes: agree on the call, then move data.
  // `exchange_counts` (may be empty) runs the second check of the
  // v-collectives; `move_data` is skipped when the call moves no elements.
  Status Execute(CallDescriptor call, bool moves_data,
                 const std::function<Status()>& exchange_counts,
                 const std::function<Status()>& move_data);
  // Gathers one fixed-size record per rank without any check of its own.
  Status GatherRecords(const void* mine, int64_t bytes, void* all);
  // Records a lost peer as the sticky error, naming it when the store can.
  Status Fail(const Status& status, const CallDescriptor& call);
  CallDescriptor Describe(Collective collective, int64_t count,
                          int32_t data_type = -1, int32_t reduce_op = -1,
                          int32_t root = -1);

  const WorldInfo world_;
  const BackendKind backend_kind_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Backend> backend_;
  uint64_t sequence_ = 0;
  Status sticky_error_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_COMMUNICATOR_H_
