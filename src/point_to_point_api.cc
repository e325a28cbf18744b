// kolo/point_to_point.h's free functions and ProcessGroup: each forwards to
// the process's point-to-point protocol (collectives/point_to_point.h) or to
// the group's own engine.
#include <cstring>
#include <string>

#include "common/reduce.h"
#include "kolo/point_to_point.h"
#include "process.h"
#include "process_group.h"

namespace kolo {
namespace {

StatusOr<PointToPoint*> Protocol(const char* call) {
  Process& process = Process::Get();
  if (!process.initialized()) {
    return FailedPrecondition(std::string(call) +
                              ": kolo::Init() has not been called (or "
                              "Shutdown() has)");
  }
  PointToPoint* protocol = process.point_to_point();
  if (!protocol) {
    return InvalidArgument(std::string(call) +
                           ": a world of one rank has no peer to reach");
  }
  return protocol;
}

}  // namespace

StatusOr<Request> Isend(const void* data, int64_t count, DataType type,
                        int32_t peer, int32_t tag) {
  KOLO_ASSIGN_OR_RETURN(PointToPoint * protocol, Protocol("kolo::Isend"));
  return protocol->Isend(data, count, type, peer, tag);
}

StatusOr<Request> Irecv(void* data, int64_t count, DataType type, int32_t peer,
                        int32_t tag) {
  KOLO_ASSIGN_OR_RETURN(PointToPoint * protocol, Protocol("kolo::Irecv"));
  return protocol->Irecv(data, count, type, peer, tag);
}

Status Send(const void* data, int64_t count, DataType type, int32_t peer,
            int32_t tag) {
  KOLO_ASSIGN_OR_RETURN(Request request, Isend(data, count, type, peer, tag));
  return request.Wait();
}

Status Recv(void* data, int64_t count, DataType type, int32_t peer,
            int32_t tag) {
  KOLO_ASSIGN_OR_RETURN(Request request, Irecv(data, count, type, peer, tag));
  return request.Wait();
}

StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(
    const std::vector<int32_t>& ranks) {
  return Process::Get().NewGroup(ranks);
}

ProcessGroup::ProcessGroup(std::shared_ptr<internal::GroupState> state)
    : state_(std::move(state)) {}

ProcessGroup::~ProcessGroup() = default;

const std::vector<int32_t>& ProcessGroup::ranks() const {
  return state_->ranks;
}
int32_t ProcessGroup::rank() const { return state_->rank; }
int32_t ProcessGroup::size() const {
  return static_cast<int32_t>(state_->ranks.size());
}
int32_t ProcessGroup::WorldRank(int32_t group_rank) const {
  if (group_rank < 0 || group_rank >= size()) return -1;
  return state_->ranks[group_rank];
}

namespace {

std::string GroupCall(const internal::GroupState& group, const char* what) {
  return "group #" + std::to_string(group.id) + " " + what;
}

// Runs `call` on the group's engine, or `alone` for a group of one.
template <typename Call, typename Alone>
Status OnEngine(internal::GroupState& group, const char* what, Call call,
                Alone alone) {
  MutexLock lock(&group.mutex);
  if (!group.open) {
    return FailedPrecondition(GroupCall(group, what) +
                              ": kolo::Shutdown() closed the group");
  }
  if (!group.backend) return alone();
  Status status = call(*group.backend);
  if (!status.ok()) return status.WithContext(GroupCall(group, what));
  return status;
}

Status CheckCount(const internal::GroupState& group, const char* what,
                  int64_t count, const void* buffer) {
  if (count < 0 || (count > 0 && buffer == nullptr)) {
    return InvalidArgument(GroupCall(group, what) + ": count " +
                           std::to_string(count) + " with a " +
                           (buffer ? "" : "null ") + "buffer");
  }
  return Status::Ok();
}

}  // namespace

Status ProcessGroup::Allreduce(const void* send, void* recv, int64_t count,
                               DataType type, ReduceOp op) {
  KOLO_RETURN_IF_ERROR(CheckCount(*state_, "allreduce", count, recv));
  if (count == 0) return Status::Ok();
  const int64_t bytes = count * DataTypeSize(type);
  const ReduceOp engine_op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  KOLO_RETURN_IF_ERROR(OnEngine(
      *state_, "allreduce",
      [&](Backend& backend) {
        return backend.Allreduce(send, recv, count, type, engine_op);
      },
      [&] {
        if (send != recv) std::memmove(recv, send, bytes);
        return Status::Ok();
      }));
  if (op == ReduceOp::kAverage && size() > 1) {
    DivideInPlace(type, recv, count, size());
  }
  return Status::Ok();
}

Status ProcessGroup::Allgather(const void* send, void* recv, int64_t count,
                               DataType type) {
  KOLO_RETURN_IF_ERROR(CheckCount(*state_, "allgather", count, recv));
  if (count == 0) return Status::Ok();
  const int64_t bytes = count * DataTypeSize(type);
  return OnEngine(
      *state_, "allgather",
      [&](Backend& backend) {
        return backend.Allgatherv(send, recv,
                                  std::vector<int64_t>(size(), count), type);
      },
      [&] {
        if (send != recv) std::memmove(recv, send, bytes);
        return Status::Ok();
      });
}

Status ProcessGroup::Broadcast(void* buffer, int64_t count, DataType type,
                               int32_t root) {
  KOLO_RETURN_IF_ERROR(CheckCount(*state_, "broadcast", count, buffer));
  if (root < 0 || root >= size()) {
    return InvalidArgument(GroupCall(*state_, "broadcast") + ": root " +
                           std::to_string(root) + " is not a group rank (0.." +
                           std::to_string(size() - 1) + ")");
  }
  if (count == 0) return Status::Ok();
  return OnEngine(
      *state_, "broadcast",
      [&](Backend& backend) {
        return backend.Broadcast(buffer, count, type, root);
      },
      [] { return Status::Ok(); });
}

Status ProcessGroup::Barrier() {
  return OnEngine(
      *state_, "barrier", [](Backend& backend) { return backend.Barrier(); },
      [] { return Status::Ok(); });
}

StatusOr<Request> ProcessGroup::Isend(const void* data, int64_t count,
                                      DataType type, int32_t peer,
                                      int32_t tag) {
  const int32_t world_peer = WorldRank(peer);
  if (world_peer < 0) {
    return InvalidArgument(GroupCall(*state_, "send") + ": rank " +
                           std::to_string(peer) + " is not a group rank");
  }
  return kolo::Isend(data, count, type, world_peer, tag);
}

StatusOr<Request> ProcessGroup::Irecv(void* data, int64_t count, DataType type,
                                      int32_t peer, int32_t tag) {
  const int32_t world_peer = WorldRank(peer);
  if (world_peer < 0) {
    return InvalidArgument(GroupCall(*state_, "receive") + ": rank " +
                           std::to_string(peer) + " is not a group rank");
  }
  return kolo::Irecv(data, count, type, world_peer, tag);
}

}  // namespace kolo
