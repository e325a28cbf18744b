// kolo's public C++ API for raw buffers (no LibTorch).
//
//   KOLO_RETURN_IF_ERROR(kolo::Init());  // world from kolorun, mpirun, Slurm or PMI
//   std::vector<float> grad(n, 1.0f);
//   KOLO_RETURN_IF_ERROR(kolo::Allreduce(grad.data(), grad.data(), n,
//                                        kolo::DataType::kFloat32,
//                                        kolo::ReduceOp::kAverage));
//   KOLO_RETURN_IF_ERROR(kolo::Shutdown());
//
// Every collective must be called by every rank of the world in the same
// order with matching arguments; when the arguments differ, every rank gets
// a kMismatch Status naming the ranks and what differed instead of a hang,
// and the job carries on.
// When a peer dies, the survivors get kPeerFailure naming it within the
// configured timeout (KOLO_TIMEOUT_S, default 30 s). Errors are sticky: after
// a peer failure every later collective returns the same Status.
//
// In place: pass the same pointer as send and recv (allreduce, alltoall,
// broadcast), recv + rank * count as send (allgather), or send + rank *
// recv_count as recv (reducescatter), as MPI and NCCL define it.
//
// These calls are thin wrappers over the asynchronous runtime
// (kolo/runtime.h): each is enqueued under the name "kolo.sync" and waited
// for, so the k-th call of each rank meets the k-th call of the others;
// errors name the call ("synchronous call #k").
//
// Thread-safety: Init/Shutdown from one thread, not concurrently with other
// calls; synchronous collectives from one thread (their numbering must match
// across ranks). For collectives from many threads use the named,
// asynchronous API of kolo/runtime.h.
#ifndef KOLO_KOLO_H_
#define KOLO_KOLO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

// Joins the job `options` describe (kolo/options.h): connects to the
// rendezvous store, builds the engine and starts the runtime. Returns ok
// without doing anything when already initialized.
Status Init(const InitOptions& options);
// Init(InitOptions::FromEnvironment()): the world from kolorun's KOLO_*,
// mpirun's OMPI_COMM_WORLD_*, Slurm's SLURM_* or PMI_* variables.
Status Init();
// Leaves the job cleanly. Safe to call twice; collectives afterwards fail.
// Init may be called again afterwards, with other options, any number of
// times: each Init is a new rendezvous round of the same job, and a
// Shutdown releases every thread, socket and shared-memory segment.
Status Shutdown();
bool IsInitialized();

// The world of an initialized process; a single-process world otherwise.
// A copy: it stays valid across Shutdown and a later Init.
WorldInfo World();
int32_t Rank();
int32_t Size();
int32_t LocalRank();
int32_t LocalSize();
int32_t CrossRank();
int32_t CrossSize();
BackendKind ActiveBackend();
// True when allreduce runs in three stages: shm inside each host, the
// network engine between one leader per host, shm again to share the
// result. That is the default when the job spans hosts and some host holds
// more than one rank; KOLO_HIERARCHICAL_ALLREDUCE=0|1 decides otherwise.
// Host identity: the hostname, or KOLO_HOST_ID where set.
bool HierarchicalAllreduce();

Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                 ReduceOp op);
// Every rank contributes `count` elements; recv holds size() * count.
Status Allgather(const void* send, void* recv, int64_t count, DataType type);
// Rank r contributes recv_counts[r] elements (send_count must equal it);
// recv holds their concatenation in rank order.
Status Allgatherv(const void* send, int64_t send_count, void* recv,
                  const std::vector<int64_t>& recv_counts, DataType type);
Status Broadcast(const void* send, void* recv, int64_t count, DataType type,
                 int32_t root);
// Rank r sends elements [j*count, (j+1)*count) of send to rank j and
// receives rank j's block into recv at j*count.
Status Alltoall(const void* send, void* recv, int64_t count, DataType type);
// send_counts[j] elements go to rank j; recv_counts[j] arrive from rank j.
// Rank i's send_counts[j] must equal rank j's recv_counts[i].
Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                 void* recv, const std::vector<int64_t>& recv_counts,
                 DataType type);
// send holds size() * recv_count elements; rank r receives the reduction of
// block r.
Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                     DataType type, ReduceOp op);
Status Barrier();

}  // namespace kolo

#endif  // KOLO_KOLO_H_
