// kolo.h's and runtime.h's free functions: each forwards to the process's
// membership (process.h), which holds every piece of state.
#include <utility>

#include "kolo/kolo.h"
#include "kolo/runtime.h"
#include "process.h"

namespace kolo {
namespace {

Status NotInitialized() {
  return FailedPrecondition(
      "kolo::Init() has not been called (or Shutdown() has)");
}

}  // namespace

Status Init(const InitOptions& options) { return Process::Get().Init(options); }

Status Init() {
  // An initialized process ignores the environment, as Init(options) does.
  if (Process::Get().initialized()) return Status::Ok();
  KOLO_ASSIGN_OR_RETURN(InitOptions options, InitOptions::FromEnvironment());
  return Process::Get().Init(options);
}

Status Shutdown() { return Process::Get().Shutdown(); }

bool HierarchicalAllreduce() { return Process::Get().hierarchical_allreduce(); }

bool IsInitialized() { return Process::Get().initialized(); }

WorldInfo World() { return Process::Get().world(); }

int32_t Rank() { return World().rank; }
int32_t Size() { return World().size; }
int32_t LocalRank() { return World().local_rank; }
int32_t LocalSize() { return World().local_size; }
int32_t CrossRank() { return World().cross_rank; }
int32_t CrossSize() { return World().cross_size; }

BackendKind ActiveBackend() { return Process::Get().active_backend(); }

// ---------------------------------------------------------------- kolo.h

namespace {

// Calls `collective` of the process's synchronous collectives with `args`,
// when initialized.
template <typename... Params, typename... Args>
Status Synchronous(Status (SynchronousCollectives::*collective)(Params...),
                   Args&&... args) {
  SynchronousCollectives* sync = Process::Get().sync();
  if (sync == nullptr) return NotInitialized();
  return (sync->*collective)(std::forward<Args>(args)...);
}

}  // namespace

Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                 ReduceOp op) {
  return Synchronous(&SynchronousCollectives::Allreduce, send, recv, count,
                     type, op);
}

Status Allgather(const void* send, void* recv, int64_t count, DataType type) {
  return Synchronous(&SynchronousCollectives::Allgather, send, recv, count,
                     type);
}

Status Allgatherv(const void* send, int64_t send_count, void* recv,
                  const std::vector<int64_t>& recv_counts, DataType type) {
  return Synchronous(&SynchronousCollectives::Allgatherv, send, send_count,
                     recv, recv_counts, type);
}

Status Broadcast(const void* send, void* recv, int64_t count, DataType type,
                 int32_t root) {
  return Synchronous(&SynchronousCollectives::Broadcast, send, recv, count,
                     type, root);
}

Status Alltoall(const void* send, void* recv, int64_t count, DataType type) {
  return Synchronous(&SynchronousCollectives::Alltoall, send, recv, count,
                     type);
}

Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                 void* recv, const std::vector<int64_t>& recv_counts,
                 DataType type) {
  return Synchronous(&SynchronousCollectives::Alltoallv, send, send_counts,
                     recv, recv_counts, type);
}

Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                     DataType type, ReduceOp op) {
  return Synchronous(&SynchronousCollectives::Reducescatter, send, recv,
                     recv_count, type, op);
}

Status Barrier() { return Synchronous(&SynchronousCollectives::Barrier); }

// ---------------------------------------------------------------- runtime.h

namespace {

StatusOr<Handle> EnqueueOne(TensorSpec spec, const std::string& name,
                            const void* send, void* recv,
                            CompletionCallback callback) {
  Runtime* runtime = Process::Get().runtime();
  if (runtime == nullptr) return NotInitialized();
  spec.name = name;
  return runtime->Enqueue(std::move(spec), send, recv, std::move(callback));
}

}  // namespace

StatusOr<Handle> EnqueueAllreduce(const std::string& name, const void* send,
                                  void* recv, int64_t count, DataType type,
                                  ReduceOp op, CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kAllreduce, type, count, op), name,
                    send, recv, std::move(callback));
}

StatusOr<std::vector<Handle>> EnqueueGroupedAllreduce(
    const std::string& group_name, const std::vector<AllreduceTensor>& tensors,
    DataType type, ReduceOp op, CompletionCallback callback) {
  Runtime* runtime = Process::Get().runtime();
  if (runtime == nullptr) return NotInitialized();
  if (tensors.empty())
    return InvalidArgument("group '" + group_name + "' has no tensors");
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
  return runtime->EnqueueGroup(std::move(specs), std::move(sends),
                               std::move(recvs), std::move(callback));
}

StatusOr<Handle> EnqueueAllgather(const std::string& name, const void* send,
                                  int64_t count, DataType type,
                                  CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kAllgather, type, count), name, send,
                    nullptr, std::move(callback));
}

StatusOr<Handle> EnqueueBroadcast(const std::string& name, void* buffer,
                                  int64_t count, DataType type, int32_t root,
                                  CompletionCallback callback) {
  return EnqueueOne(
      MakeSpec(Collective::kBroadcast, type, count, ReduceOp::kSum, root), name,
      buffer, buffer, std::move(callback));
}

StatusOr<Handle> EnqueueAlltoall(const std::string& name, const void* send,
                                 const std::vector<int64_t>& send_counts,
                                 DataType type, CompletionCallback callback) {
  int64_t total = 0;
  for (int64_t c : send_counts) total += c;
  TensorSpec spec = MakeSpec(Collective::kAlltoall, type, total);
  spec.splits = send_counts;
  return EnqueueOne(std::move(spec), name, send, nullptr, std::move(callback));
}

StatusOr<Handle> EnqueueReducescatter(const std::string& name, const void* send,
                                      int64_t count, DataType type, ReduceOp op,
                                      CompletionCallback callback) {
  return EnqueueOne(MakeSpec(Collective::kReducescatter, type, count, op), name,
                    send, nullptr, std::move(callback));
}

StatusOr<int32_t> Join() {
  Runtime* runtime = Process::Get().runtime();
  if (runtime == nullptr) return NotInitialized();
  return runtime->Join();
}

Status StartTimeline(const std::string& path) {
  if (path.empty()) return InvalidArgument("StartTimeline: the path is empty");
  Runtime* runtime = Process::Get().runtime();
  if (runtime == nullptr) return NotInitialized();
  return runtime->SetTimeline(path);
}

Status StopTimeline() {
  Runtime* runtime = Process::Get().runtime();
  if (runtime == nullptr) return NotInitialized();
  return runtime->SetTimeline("");
}

RuntimeStats GetRuntimeStats() {
  Runtime* runtime = Process::Get().runtime();
  return runtime == nullptr ? RuntimeStats{} : runtime->stats();
}

}  // namespace kolo
