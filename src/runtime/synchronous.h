// SynchronousCollectives: kolo.h's blocking collectives as thin wrappers
// over the runtime. Every call is enqueued under the one name kSyncName and
// waited for, so the k-th call of every rank meets the k-th call of the
// others, a mismatched call is caught by the same negotiation as any named
// operation, and a steady loop of identical calls hits the response cache
// like any training step. Errors say which call failed ("synchronous call
// #N"). Outputs the runtime allocates are copied into the caller's buffer.
// While every rank's runtime is idle, a call takes the runtime's direct
// path instead where it has one (runtime/direct_path.h): same meeting of
// k-th calls, same errors, no hand-off to the runtime's thread.
//
// Thread-safety: one call at a time. A second thread calling while one
// waits gets kInvalidArgument (the name is pending); use the named,
// asynchronous API for concurrent collectives.
#ifndef KOLO_RUNTIME_SYNCHRONOUS_H_
#define KOLO_RUNTIME_SYNCHRONOUS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/runtime.h"

namespace kolo {

inline constexpr const char* kSyncName = "kolo.sync";

class SynchronousCollectives {
 public:
  explicit SynchronousCollectives(Runtime* runtime) : runtime_(runtime) {}

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
  Status Run(TensorSpec spec, const void* send, void* recv, void* output_to);

  Runtime* const runtime_;
  std::atomic<int64_t> calls_{0};
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_SYNCHRONOUS_H_
