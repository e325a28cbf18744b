// Point-to-point transfers between two ranks, and process groups: subsets of
// the world with collectives of their own. Pipeline stages pass activations
// with them and parameter servers serve shards with them
// (kolo/torch_pipeline.h, kolo/torch_parameter_server.h).
//
//   using kolo::DataType;
//   // Rank 0 sends n floats to rank 1 with tag 7.
//   if (kolo::Rank() == 0) {
//     KOLO_RETURN_IF_ERROR(kolo::Send(grad, n, DataType::kFloat32, 1, 7));
//   } else if (kolo::Rank() == 1) {
//     KOLO_RETURN_IF_ERROR(kolo::Recv(grad, n, DataType::kFloat32, 0, 7));
//   }
//   // Around a ring, both directions at once: post both, then wait.
//   const int32_t right = (kolo::Rank() + 1) % kolo::Size();
//   const int32_t left = (kolo::Rank() + kolo::Size() - 1) % kolo::Size();
//   std::vector<float> from_left(n);
//   KOLO_ASSIGN_OR_RETURN(kolo::Request out,
//                         kolo::Isend(grad, n, DataType::kFloat32, right, 0));
//   KOLO_ASSIGN_OR_RETURN(
//       kolo::Request in,
//       kolo::Irecv(from_left.data(), n, DataType::kFloat32, left, 0));
//   KOLO_RETURN_IF_ERROR(out.Wait());
//   KOLO_RETURN_IF_ERROR(in.Wait());
//   // A group of the even ranks, with its own collectives.
//   std::vector<int32_t> evens;
//   for (int32_t r = 0; r < kolo::Size(); r += 2) evens.push_back(r);
//   KOLO_ASSIGN_OR_RETURN(std::shared_ptr<kolo::ProcessGroup> group,
//                         kolo::NewGroup(evens));
//   if (group) {  // null on the odd ranks
//     KOLO_RETURN_IF_ERROR(group->Allreduce(grad, grad, n, DataType::kFloat32,
//                                           kolo::ReduceOp::kAverage));
//   }
//
// Matching. A receive from rank p with tag t takes the oldest message rank
// p sent this rank with tag t that no earlier receive took; messages with
// other tags pass it by, and messages of one tag between two ranks never
// overtake each other (MPI's rule). The receive's type and count must equal
// the send's: when they differ, both the send and the receive fail with
// kMismatch naming the ranks, the tag, and both sides' type and count, and
// the pair carries on.
//
// Completion. A send completes when the receiver has taken the message into
// a matching receive; until then the sender keeps its buffer alive and
// unchanged. So Send is synchronous (MPI_Ssend): the other rank has the data
// when it returns. A message that arrives before its receive is posted is
// held in memory on the receiving side until one is.
//
// Failures. Every wait is bounded by the job's timeout (KOLO_TIMEOUT_S,
// default 30 s) or the one passed to Wait; kTimeout names the peer and what
// it did not do. A peer that dies fails every transfer with it with
// kPeerFailure naming its rank, and every later one; transfers with other
// ranks carry on.
//
// Engines. The transfers go over the job's engine: a shared-memory inbox per
// rank (shm), one TCP connection per pair (tcp, and the network side of a
// hierarchical job), Gloo's pairs (gloo) or MPI point-to-point on a
// communicator of their own (mpi). A background reader per process takes
// every incoming message, so two ranks that both send before they receive
// never wait on each other.
//
// Thread-safety: every function may be called from any thread after Init.
// Requests may be waited on from any thread, one at a time per request.
#ifndef KOLO_POINT_TO_POINT_H_
#define KOLO_POINT_TO_POINT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

namespace internal {
struct TransferState;
struct GroupState;
}  // namespace internal

// One posted send or receive.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<internal::TransferState> state);

  // True once the transfer completed, successfully or not.
  bool Test() const;
  // Waits until the transfer completes and returns its result; after the
  // job's timeout (or `timeout`) returns kTimeout naming the peer, and the
  // transfer fails for good.
  Status Wait() const;
  Status Wait(std::chrono::milliseconds timeout) const;

 private:
  std::shared_ptr<internal::TransferState> state_;
};

// Tags are >= 0 and below kMaxTag.
inline constexpr int32_t kMaxTag = 1 << 30;

// `count` elements of `type` from `data` to rank `peer` (not this rank).
StatusOr<Request> Isend(const void* data, int64_t count, DataType type,
                        int32_t peer, int32_t tag);
StatusOr<Request> Irecv(void* data, int64_t count, DataType type, int32_t peer,
                        int32_t tag);
Status Send(const void* data, int64_t count, DataType type, int32_t peer,
            int32_t tag);
Status Recv(void* data, int64_t count, DataType type, int32_t peer,
            int32_t tag);

// A subset of the world's ranks with collectives of their own, run on the
// job's engine (a sub-communicator for MPI). Group rank g is world rank
// ranks()[g]. Collectives have kolo.h's meaning within the group and are
// called by every member in the same order; they run on the caller's
// thread, beside the runtime's. Point-to-point calls take group ranks.
//
// Thread-safety: one collective at a time per group.
class ProcessGroup {
 public:
  ~ProcessGroup();

  const std::vector<int32_t>& ranks() const;
  int32_t rank() const;  // this process's group rank
  int32_t size() const;
  int32_t WorldRank(int32_t group_rank) const;

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op);
  Status Allgather(const void* send, void* recv, int64_t count, DataType type);
  Status Broadcast(void* buffer, int64_t count, DataType type, int32_t root);
  Status Barrier();

  StatusOr<Request> Isend(const void* data, int64_t count, DataType type,
                          int32_t peer, int32_t tag);
  StatusOr<Request> Irecv(void* data, int64_t count, DataType type,
                          int32_t peer, int32_t tag);

  explicit ProcessGroup(std::shared_ptr<internal::GroupState> state);

 private:
  std::shared_ptr<internal::GroupState> state_;
};

// Collective over the whole world: every rank calls it with the same
// sorted, duplicate-free list, in the same order as its other NewGroup
// calls. Members get their group; other ranks get null. A group lives until
// it is destroyed or kolo::Shutdown(), whichever comes first; after Shutdown
// its calls return kFailedPrecondition.
StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(
    const std::vector<int32_t>& ranks);

}  // namespace kolo

#endif  // KOLO_POINT_TO_POINT_H_
