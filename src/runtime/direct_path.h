// DirectPath: synchronous collectives that bypass the runtime's thread
// while every rank's runtime is idle, for ranks that share one host.
//
// Why. Through the runtime, a synchronous call passes from the caller's
// thread to the runtime's thread and back on every rank. Where ranks
// outnumber cores those hand-offs are most of a small collective's cost:
// a 4 KiB allreduce with 4 ranks on 2 cores took 42 us through the
// runtime, 30 us in MPI and 6 us on the bare shm engine.
//
// The lease. After a tick that leaves no operation announced anywhere,
// with every rank able to take part, every rank's runtime opens a lease
// (Open) and stops ticking. While the lease is open, the k-th synchronous
// call of each rank meets the others' k-th call in slot k: it posts its
// spec there and waits for the other ranks' posts. Every rank sees the
// same posts and so decides the same:
//   - every rank posted a call and the specs agree: each rank runs the
//     call on this path's own shm engine, on the caller's thread, and the
//     lease goes on at slot k+1;
//   - a small allreduce (under 64 KiB, where the engine would publish its
//     data, sync once and reduce from every rank's segment) travels in the
//     post itself: each rank copies its data beside its spec, and once the
//     slot is agreed reduces straight from the posts. The slot's wait is
//     then the call's only sync, where the engine would add one of its own;
//   - some rank posted an end, or the specs disagree: the lease is over,
//     and the call goes through the runtime (which reports a disagreement
//     with its usual error).
// A rank ends the lease (Close) before it gives its runtime anything to do:
// an operation, Join, Shutdown. That posts an end in its next slot, which
// sends the ranks waiting there, and those that come later, back to the
// runtime. A rank that is busy computing learns of the end from its
// runtime's thread, which looks at the slot every period while it waits
// for the lease to close (AwaitClose).
//
// Ownership. The lease's state belongs to this object, under its mutex;
// the runtime's state stays with the runtime's thread, which only opens
// the lease and waits for it to close. The engine is this object's own (a
// second set of shm segments), used by one synchronous call at a time.
//
// Failures. A caller waiting in a slot checks that the ranks it waits for
// are alive, and that their runtimes are: a runtime's thread beats at
// every AwaitClose period, so a frozen process stops beating and fails the
// wait with kTimeout after the timeout, as the runtime's exchange would.
// A wait past the stall times warns and gives up as the runtime's stall
// inspector does. Any failure closes the lease for good; the runtime then
// fails everything with it.
//
// Thread-safety: Open and AwaitClose from the runtime's thread; Close and
// stats from any thread; TryRun from one synchronous caller at a time (a
// second one while a call is in flight gets kInvalidArgument).
#ifndef KOLO_RUNTIME_DIRECT_PATH_H_
#define KOLO_RUNTIME_DIRECT_PATH_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/backend.h"
#include "common/mutex.h"
#include "common/spin_wait.h"
#include "kolo/options.h"
#include "kolo/runtime.h"
#include "runtime/executor.h"
#include "runtime/runtime_metrics.h"
#include "runtime/tensor_spec.h"
#include "store/store.h"
#include "transport/shm_group.h"

namespace kolo {

class DirectPath {
 public:
  struct Options {
    WorldInfo world;
    std::chrono::milliseconds timeout = kDefaultTimeout;
    std::chrono::seconds stall_warning{60};
    std::chrono::seconds stall_shutdown{0};  // 0: never
    int64_t shm_area_bytes = 1 << 20;        // the engine's, as the runtime's
    std::string store_prefix = "direct";
  };

  // Collective over the ranks of `options.world`, which must all share
  // this host. `store` also names a dead rank in errors.
  static StatusOr<std::unique_ptr<DirectPath>> Create(
      const Options& options, std::shared_ptr<Store> store);

  // The runtime's thread: opens the next lease (every rank in the same
  // tick), then waits up to `period` at a time for it to close. AwaitClose
  // is true once it has closed: by Close, by a call's verdict, because
  // another rank ended it, or by a failure (failure() then says which).
  void Open();
  bool AwaitClose(std::chrono::milliseconds period);
  Status failure() const;

  // Any thread, before it gives the runtime work: ends the lease. A call
  // in progress on another thread ends it as soon as it is over.
  void Close();

  // The synchronous caller, one call at a time: runs the call here and
  // returns true, or returns false when the call must go through the
  // runtime. `output_to` receives an allgather's, alltoall's or
  // reducescatter's result, as from the runtime's handle.
  StatusOr<bool> TryRun(const TensorSpec& spec, const void* send, void* recv,
                        void* output_to);

  // The calls this path ran (operations, bytes, collectives, their time,
  // and direct_operations).
  RuntimeStats stats() const;

 private:
  enum class Verdict { kWaiting, kRun, kEnd, kGaveUp };
  struct Look {
    Verdict verdict = Verdict::kWaiting;
    int32_t missing = 0;   // ranks yet to post, while kWaiting
    int32_t gave_up = -1;  // the rank that gave up, for kGaveUp
    // kRun: every rank posted this rank's spec, byte for byte (otherwise
    // Examine filled in the specs, which differ but agree).
    bool identical = false;
  };

  DirectPath(const Options& options, std::unique_ptr<ShmGroup> posts,
             std::unique_ptr<Backend> engine, std::shared_ptr<Store> store);

  // Writes this rank's post for `slot` of the current lease, with
  // `data_bytes` of `data` when the call travels in the posts.
  void Post(uint32_t kind, uint32_t slot, const std::string& spec,
            const void* data = nullptr, int64_t data_bytes = 0)
      KOLO_REQUIRES(mutex_);
  // Posts an end in this rank's next slot and closes the lease.
  void EndLease() KOLO_REQUIRES(mutex_);
  // "rank 3", the context of this rank's errors.
  std::string RankContext() const;
  // What the posts of `slot` say so far. With `specs` (the caller's own
  // call in flight), also whether the call runs, and the specs of a kRun
  // that is not `identical`.
  Look Examine(uint32_t epoch, uint32_t slot,
               std::vector<TensorSpec>* specs) const;
  // The ranks yet to post in `slot`, for a wait's checks and its messages.
  std::vector<int32_t> MissingRanks(uint32_t epoch, uint32_t slot) const;
  // Waits until every rank has posted in `slot` or one has ended the lease.
  StatusOr<Look> AwaitSlot(uint32_t epoch, uint32_t slot,
                           const std::string& name,
                           std::vector<TensorSpec>* specs);
  // Runs the agreed call on the engine.
  Status Run(std::vector<TensorSpec> specs, const void* send, void* recv,
             void* output_to);
  // Whether `spec`'s data travels in the posts (the same on every rank
  // whose spec agrees). The agreed call is then run by ReduceFromPosts.
  bool TravelsInPosts(const TensorSpec& spec) const;
  void ReduceFromPosts(const TensorSpec& spec, uint32_t slot, void* recv);
  // Ends the lease with `error` for good; returns the error.
  Status FailLease(const Status& error) KOLO_REQUIRES(mutex_);

  const Options options_;
  const std::unique_ptr<ShmGroup> posts_;
  const std::unique_ptr<Backend> engine_;
  const std::shared_ptr<Store> store_;
  RuntimeStats run_stats_;  // the caller's, while it runs a call
  // The direct path runs only over shared memory.
  const RuntimeMetrics metrics_{"shm"};
  Executor executor_;  // on engine_, into run_stats_
  AdaptiveSpin spin_;  // the caller's
  // The caller's: the last spec every rank posted alike and that was valid,
  // and the spec of its call in flight, as posted (a buffer kept between
  // calls, so that a call allocates nothing).
  mutable std::string checked_spec_;
  std::string posted_spec_;

  mutable Mutex mutex_;
  CondVar closed_;  // open_ became false
  bool open_ KOLO_GUARDED_BY(mutex_) = false;
  uint32_t epoch_ KOLO_GUARDED_BY(mutex_) = 0;  // leases opened so far
  uint32_t slot_ KOLO_GUARDED_BY(mutex_) = 0;   // next slot in the lease
  // A call posted in slot_ and not over yet.
  bool in_flight_ KOLO_GUARDED_BY(mutex_) = false;
  bool close_owed_ KOLO_GUARDED_BY(mutex_) =
      false;                                // Close() came during that call
  Status failure_ KOLO_GUARDED_BY(mutex_);  // once set, no lease opens
  RuntimeStats stats_ KOLO_GUARDED_BY(mutex_);
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_DIRECT_PATH_H_
