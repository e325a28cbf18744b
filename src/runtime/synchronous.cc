#include "runtime/synchronous.h"

#include <cstring>

namespace kolo {
Status SynchronousCollectives::Run(TensorSpec spec, const void* send,
                                   void* recv, void* output_to) {
  spec.name = kSyncName;
  // Formatted only for an error: a small call costs about a microsecond.
  const int64_t number = ++calls_;
  const auto call = [number] {
    return "synchronous call #" + std::to_string(number);
  };
  if (DirectPath* direct = runtime_->direct_path()) {
    StatusOr<bool> ran = direct->TryRun(spec, send, recv, output_to);
    if (!ran.ok()) return ran.status().WithContext(call());
    if (*ran) return Status::Ok();
  }
  StatusOr<Handle> handle =
      runtime_->Enqueue(std::move(spec), send, recv, nullptr);
  if (!handle.ok()) return handle.status().WithContext(call());
  KOLO_RETURN_IF_ERROR(handle->Wait().WithContext(call()));
  if (output_to != nullptr && !handle->output().empty()) {
    std::memmove(output_to, handle->output().data(), handle->output().size());
  }
  return Status::Ok();
}

Status SynchronousCollectives::Allreduce(const void* send, void* recv,
                                         int64_t count, DataType type,
                                         ReduceOp op) {
  return Run(MakeSpec(Collective::kAllreduce, type, count, op), send, recv,
             nullptr);
}

Status SynchronousCollectives::Allgather(const void* send, void* recv,
                                         int64_t count, DataType type) {
  TensorSpec spec = MakeSpec(Collective::kAllgather, type, count);
  spec.splits.assign(runtime_->world().size, count);
  return Run(std::move(spec), send, nullptr, recv);
}

Status SynchronousCollectives::Allgatherv(
    const void* send, int64_t send_count, void* recv,
    const std::vector<int64_t>& recv_counts, DataType type) {
  TensorSpec spec = MakeSpec(Collective::kAllgather, type, send_count);
  spec.splits = recv_counts;
  return Run(std::move(spec), send, nullptr, recv);
}

Status SynchronousCollectives::Broadcast(const void* send, void* recv,
                                         int64_t count, DataType type,
                                         int32_t root) {
  if (runtime_->world().rank == root && send != recv && count > 0) {
    std::memmove(recv, send, count * DataTypeSize(type));
  }
  return Run(
      MakeSpec(Collective::kBroadcast, type, count, ReduceOp::kSum, root), recv,
      recv, nullptr);
}

Status SynchronousCollectives::Alltoall(const void* send, void* recv,
                                        int64_t count, DataType type) {
  const int32_t size = runtime_->world().size;
  TensorSpec spec = MakeSpec(Collective::kAlltoall, type, count * size);
  spec.splits.assign(size, count);
  spec.expected = spec.splits;
  return Run(std::move(spec), send, nullptr, recv);
}

Status SynchronousCollectives::Alltoallv(
    const void* send, const std::vector<int64_t>& send_counts, void* recv,
    const std::vector<int64_t>& recv_counts, DataType type) {
  int64_t total = 0;
  for (int64_t c : send_counts) total += c;
  TensorSpec spec = MakeSpec(Collective::kAlltoall, type, total);
  spec.splits = send_counts;
  spec.expected = recv_counts;
  return Run(std::move(spec), send, nullptr, recv);
}

Status SynchronousCollectives::Reducescatter(const void* send, void* recv,
                                             int64_t recv_count, DataType type,
                                             ReduceOp op) {
  return Run(MakeSpec(Collective::kReducescatter, type,
                      recv_count * runtime_->world().size, op),
             send, nullptr, recv);
}

Status SynchronousCollectives::Barrier() {
  return Run(MakeSpec(Collective::kBarrier, DataType::kUInt8, 0), nullptr,
             nullptr, nullptr);
}

}  // namespace kolo
