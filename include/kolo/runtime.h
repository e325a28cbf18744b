// kolo's asynchronous runtime: named collectives enqueued from any thread,
// completed by one background thread per process that agrees with the other
// ranks on what is ready, fuses small tensors, and runs them in the same
// order everywhere (the protocol is described in src/runtime/runtime.h).
//
//   kolo::StatusOr<kolo::Handle> h = kolo::EnqueueAllreduce(
//       "layer1.weight.grad", grad, grad, n, kolo::DataType::kFloat32,
//       kolo::ReduceOp::kAverage);
//   OtherWork();                        // overlapped with the allreduce
//   kolo::Status s = h->Wait();         // done, or the error naming the cause
//
// A name identifies one operation across ranks: every rank must enqueue the
// same name with matching arguments, in any order and from any thread. A
// name may be reused once its previous operation has completed (every
// training step reuses the gradient names; the response cache makes that
// cheap). The runtime reads `send` and writes `recv` until the handle
// completes; the caller keeps both alive and untouched until then.
//
// Thread-safety: every function here may be called from any thread after
// kolo::Init(). Handles may be copied and waited on from several threads.
#ifndef KOLO_RUNTIME_H_
#define KOLO_RUNTIME_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

namespace internal {
struct HandleState;
}  // namespace internal

// Called once on the runtime's thread when an operation completes, with its
// final status. Keep it short; it must not wait on other handles.
using CompletionCallback = std::function<void(const Status&)>;

// The caller's view of one enqueued operation.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<internal::HandleState> state);

  // True once the operation completed, successfully or not.
  bool Poll() const;
  // Waits until completion (ok or the operation's error), or returns
  // kTimeout after `timeout` while the operation carries on. It spins for
  // up to 50 us before it blocks while this thread's waits keep ending that
  // soon (src/common/spin_wait.h), so it may return later than a short
  // `timeout`.
  Status Wait(
      std::chrono::milliseconds timeout = std::chrono::hours(24 * 365)) const;
  const std::string& name() const;

  // Results the runtime allocates (allgather, alltoall, reducescatter):
  // the bytes received and how many elements came from each rank. Valid
  // once Wait() returned ok.
  const std::vector<char>& output() const;
  const std::vector<int64_t>& output_counts() const;

 private:
  std::shared_ptr<internal::HandleState> state_;
};

// Sum, average, min, max or product of `count` elements across ranks into
// `recv` (which may equal `send`).
StatusOr<Handle> EnqueueAllreduce(const std::string& name, const void* send,
                                  void* recv, int64_t count, DataType type,
                                  ReduceOp op,
                                  CompletionCallback callback = nullptr);

// One tensor of a grouped allreduce.
struct AllreduceTensor {
  std::string name;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
};
// The tensors of a group are always fused and completed together; every
// rank must enqueue the same group. Returns one handle per tensor.
StatusOr<std::vector<Handle>> EnqueueGroupedAllreduce(
    const std::string& group_name, const std::vector<AllreduceTensor>& tensors,
    DataType type, ReduceOp op, CompletionCallback callback = nullptr);

// Concatenates every rank's `count` elements in rank order into
// Handle::output(); counts may differ between ranks.
StatusOr<Handle> EnqueueAllgather(const std::string& name, const void* send,
                                  int64_t count, DataType type,
                                  CompletionCallback callback = nullptr);

// Overwrites `buffer` on every rank with root's `count` elements.
StatusOr<Handle> EnqueueBroadcast(const std::string& name, void* buffer,
                                  int64_t count, DataType type, int32_t root,
                                  CompletionCallback callback = nullptr);

// Sends send_counts[j] consecutive elements of `send` to rank j; what every
// rank sent to this one lands in Handle::output() in rank order.
StatusOr<Handle> EnqueueAlltoall(const std::string& name, const void* send,
                                 const std::vector<int64_t>& send_counts,
                                 DataType type,
                                 CompletionCallback callback = nullptr);

// Reduces `count` elements (a multiple of the world size) across ranks and
// leaves block `rank` (count / size elements) in Handle::output().
StatusOr<Handle> EnqueueReducescatter(const std::string& name, const void* send,
                                      int64_t count, DataType type, ReduceOp op,
                                      CompletionCallback callback = nullptr);

// Declares that this rank has run out of data. Until every rank has joined,
// the other ranks' allreduces (sum and average) proceed with this rank
// contributing zeros, and averages divide by the ranks that contributed.
// Blocks until every rank has joined; returns the rank that joined last.
StatusOr<int32_t> Join();

// Starts a Chrome-trace timeline of the runtime at `path` (rank 0 writes
// it, a new file, as KOLO_TIMELINE does from Init), or replaces the one
// being written; StopTimeline closes it. Every rank calls them. Errors name
// the path; both return once the runtime has taken the change.
Status StartTimeline(const std::string& path);
Status StopTimeline();

// What the runtime has done so far in this process.
struct RuntimeStats {
  int64_t operations = 0;     // completed operations (tensors)
  int64_t bytes = 0;          // bytes of those tensors
  int64_t collectives = 0;    // engine calls that moved tensor data
  int64_t fused_batches = 0;  // engine calls that carried >1 tensor
  int64_t cycles = 0;         // negotiation rounds
  int64_t cache_hits = 0;     // tensors announced by a cache bit
  int64_t cache_misses = 0;   // tensors announced in full
  int64_t errors = 0;         // operations that completed with an error
  // Of `operations`: synchronous calls that ran on the caller's thread
  // while every rank's runtime was idle (the shm backend's direct path).
  int64_t direct_operations = 0;
  double collective_seconds = 0;   // time inside engine calls for data
  double negotiation_seconds = 0;  // time in the readiness exchange
  // Summed over tensors: from this rank announcing a tensor until every
  // rank had announced it.
  double wait_for_others_seconds = 0;
};
RuntimeStats GetRuntimeStats();

}  // namespace kolo

#endif  // KOLO_RUNTIME_H_
