// SynchronousCollectives: kolo.h's blocking collectives as thin wrappers
// over the runtime. Each call is enqueued under the name "sync call #N",
// N counting this object's calls, so calls match across ranks when every
// rank makes them in the same order, and a mismatched call is caught by the
// same negotiation as any named operation. Outputs the runtime allocates
// are copied into the caller's buffer.
//
// Thread-safety: calls from several threads are safe but get numbers in
// the order they arrive, which other ranks cannot reproduce; use one thread
// (or the named, asynchronous API) for concurrent collectives.
#ifndef KOLO_RUNTIME_SYNCHRONOUS_H_
#define KOLO_RUNTIME_SYNCHRONOUS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/runtime.h"

namespace kolo {

class SynchronousCollectives {
 public:
  explicit SynchronousCollectives(Runtime* runtime) : runtime_(runtime) {}

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type, ReduceOp op);
  Status Allgather(const void* send, void* recv, int64_t count, DataType type);
  Status Allgatherv(const void* send, int64_t send_count, void* recv,
                    const std::vector<int64_t>& recv_counts, DataType type);
  Status Broadcast(const void* send, void* recv, int64_t count, DataType type, int32_t root);
  Status Alltoall(const void* send, void* recv, int64_t count, DataType type);
  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                   const std::vector<int64_t>& recv_counts, DataType type);
  Status Reducescatter(const void* send, void* recv, int64_t recv_count, DataType type,
                       ReduceOp op);
  Status Barrier();

 private:
  Status Run(TensorSpec spec, const void* send, void* recv, void* output_to);

  Runtime* const runtime_;
  std::atomic<int64_t> calls_{0};
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_SYNCHRONOUS_H_
