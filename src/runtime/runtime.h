// Runtime: kolo's asynchronous collectives, the way Horovod's core runs
// them, in one object that owns all of their state.
//
// Threads. This is the one place that says which thread owns what. Any
// user thread may enqueue operations, join, read statistics or shut down;
// those calls touch only the queue, the names in use, the flags, the
// sticky error and the published statistics, all KOLO_GUARDED_BY(mutex_)
// (common/mutex.h), and a handle's wait reaches the runtime only through
// the Doorbell, under its own mutex. One background thread
// ("kolo-runtime") owns everything else, unlocked: the pending and
// announced operations, the Coordinator, the ResponseCache, the
// CycleReportCodec (runtime/cycle_report.h), the StallInspector
// (runtime/stall_inspector.h), the Executor, the engine, the timeline and
// the loop's own statistics, which it copies into the published ones.
// Completion runs on that thread. Enqueue, Join and Shutdown also end an
// open direct-path lease (below), whose state is the DirectPath's, not the
// runtime's.
//
// One tick of the background thread:
//   1. drain    take new operations from the queue;
//   2. announce tell every rank what became ready here (a cache bit or a
//               full spec) and learn what became ready everywhere, with one
//               allgather of fixed-size bit vectors, plus one of the full
//               specs when some rank has any (see coordinator.h; the wire
//               format is CycleReportCodec's);
//   3. decide   the coordinator lists the operations ready on all ranks,
//               in one order;
//   4. fuse     PlanFusion packs them into batches;
//   5. execute  the executor runs each batch and fills the outputs;
//   6. complete handles, callbacks, statistics, the cache, Join() waiters;
//               then the StallInspector looks for operations some ranks
//               announced long ago and others never did. When one has
//               waited KOLO_STALL_SHUTDOWN_S, the rank says so in its next
//               report and every rank fails after that same exchange: a
//               rank that left alone would leave the others blocked in the
//               exchange until the engine's timeout.
// Ticks are collective: every rank runs the same number, in lockstep. A
// rank with work ticks every cycle time (KOLO_CYCLE_TIME_MS), so that what
// is enqueued meanwhile is fused into one batch; it ticks at once when a
// caller starts waiting on an unfinished handle, since a waiting caller
// adds nothing more to the batch (so Enqueue wakes the thread only for an
// operation that finds the queue empty). An idle rank sleeps until an
// operation arrives (and then ticks at once), but at least every kIdleTick
// so that ranks waiting for it keep progressing and can report a stall.
// Before it sleeps it spins briefly (common/spin_wait.h) while operations
// keep arriving back to back, as a caller waiting on a handle does before it
// blocks: the wake-ups would otherwise be most of a small collective's cost.
//
// Leases. With a direct path (runtime/direct_path.h: shm, one host), a tick
// that leaves nothing announced on any rank, when every rank reports it
// can lease (no timeline, not joining, not shutting down), ends with every
// rank leasing its idle time to the path: the thread stops ticking, and
// synchronous calls meet in shared memory on their callers' threads until
// some rank gives its runtime work. The thread only waits meanwhile,
// beating so that waiting peers can tell it is alive; then ticks resume in
// lockstep, since every rank leased after the same tick.
//
// Errors. A failed engine call ends the runtime: every pending and future
// operation fails with that error, which names the dead rank when the
// store knows it. A negotiation error (mismatch) fails only that operation.
#ifndef KOLO_RUNTIME_RUNTIME_H_
#define KOLO_RUNTIME_RUNTIME_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/backend.h"
#include "common/mutex.h"
#include "common/spin_wait.h"
#include "common/thread_annotations.h"
#include "kolo/kolo.h"
#include "kolo/options.h"
#include "kolo/runtime.h"
#include "runtime/coordinator.h"
#include "runtime/cycle_report.h"
#include "runtime/direct_path.h"
#include "runtime/executor.h"
#include "runtime/fusion.h"
#include "runtime/response_cache.h"
#include "runtime/runtime_metrics.h"
#include "runtime/stall_inspector.h"
#include "runtime/timeline.h"
#include "store/store.h"

namespace kolo {

// The pacing of kolo::InitOptions' runtime group (cycle time, fusion
// threshold, cache capacity, stall times), plus what the runtime needs to
// know of the job.
struct RuntimeOptions : RuntimeConfig {
  WorldInfo world;
  std::string timeline_path;     // empty: no timeline (rank 0 writes it)
  int32_t timeline_section = 0;  // see Timeline::Open
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // How the metrics name the engine: "shm", "gloo", "mpi", "tcp",
  // "hierarchical".
  std::string engine_name = "none";
};

class Runtime {
 public:
  // Starts the background thread. `backend` may be null only in a one-rank
  // world; `store` (may be null) is asked which rank died when the engine
  // loses a peer; `direct` (may be null) is the path synchronous calls take
  // while every rank is idle. The options must be equal on every rank
  // (checked).
  static StatusOr<std::unique_ptr<Runtime>> Start(
      const RuntimeOptions& options, std::unique_ptr<Backend> backend,
      std::shared_ptr<Store> store,
      std::unique_ptr<DirectPath> direct = nullptr);
  // Shuts down if Shutdown() was not called.
  ~Runtime();

  // Enqueues one operation. `send`/`recv` stay the caller's; see
  // kolo/runtime.h for what each collective reads and writes.
  StatusOr<Handle> Enqueue(TensorSpec spec, const void* send, void* recv,
                           CompletionCallback callback) KOLO_EXCLUDES(mutex_);
  StatusOr<std::vector<Handle>> EnqueueGroup(std::vector<TensorSpec> specs,
                                             std::vector<const void*> sends,
                                             std::vector<void*> recvs,
                                             CompletionCallback callback)
      KOLO_EXCLUDES(mutex_);
  StatusOr<int32_t> Join() KOLO_EXCLUDES(mutex_);
  // Leaves together with the other ranks (bounded by the timeout), fails
  // whatever is still pending, and stops the thread. Idempotent.
  Status Shutdown() KOLO_EXCLUDES(mutex_);
  // A caller started waiting on an unfinished operation: end the pacing
  // wait now.
  void WaiterArrived() KOLO_EXCLUDES(mutex_);
  // Starts a timeline at `path` (rank 0 writes it, a new file) or, with an
  // empty path, closes the one being written. Every rank calls it: while a
  // timeline runs no rank leases the direct path, whose calls it cannot
  // see. Returns once the runtime's thread has taken the change (at its
  // next tick).
  Status SetTimeline(const std::string& path) KOLO_EXCLUDES(mutex_);

  RuntimeStats stats() const KOLO_EXCLUDES(mutex_);
  const WorldInfo& world() const { return options_.world; }
  // Null where there is none; lives as long as the runtime.
  DirectPath* direct_path() const { return direct_.get(); }
  // The error that ended the runtime, or ok.
  Status sticky_error() const KOLO_EXCLUDES(mutex_);

 private:
  Runtime(const RuntimeOptions& options, std::unique_ptr<Backend> backend,
          std::shared_ptr<Store> store, std::unique_ptr<Timeline> timeline,
          std::unique_ptr<DirectPath> direct);

  void Loop() KOLO_EXCLUDES(mutex_);
  // One tick: the protocol's steps, in order (see above); false when the
  // runtime should stop.
  bool Tick() KOLO_EXCLUDES(mutex_);
  // 1. Moves queued operations to pending_ and unannounced_; this rank's
  // flags for the report.
  CycleReport Drain(SteadyTime start) KOLO_EXCLUDES(mutex_);
  // 2. Adds what became ready here to `mine`, by cache bit or in full;
  // true when there was any.
  bool Announce(SteadyTime start, CycleReport* mine);
  // 2. Allgathers this rank's report and decodes everyone's
  // (runtime/cycle_report.h).
  StatusOr<std::vector<CycleReport>> Exchange(const CycleReport& mine);
  // 3. The coordinator's decision, counted in the statistics.
  CycleDecision Decide(const std::vector<CycleReport>& reports,
                       SteadyTime start, SteadyTime decided_at,
                       bool announced_any);
  // Whether every rank leases its idle time after this tick (lease_due_).
  void DecideLease(const std::vector<CycleReport>& reports);
  // 4.-6. Fuses the ready operations into batches, runs and completes them;
  // false when the engine failed.
  bool Execute(const CycleDecision& decision, SteadyTime decided_at)
      KOLO_EXCLUDES(mutex_);
  bool ExecuteBatch(const std::vector<ReadyOperation>& ready,
                    const Batch& batch, SteadyTime decided_at)
      KOLO_EXCLUDES(mutex_);
  // 6. Wakes Join() once every rank joined.
  void FinishJoin(const CycleDecision& decision) KOLO_EXCLUDES(mutex_);
  // Publishes the statistics; false when an error ended the runtime, every
  // rank shuts down, or this rank waited too long for the others to.
  bool KeepRunning(const CycleDecision& decision, bool shutting_down)
      KOLO_EXCLUDES(mutex_);
  // Fails everything with `error` (ok: a clean shutdown); false, to return.
  bool Stop(const Status& error) KOLO_EXCLUDES(mutex_);
  // Waits until there is a reason to tick.
  void WaitForWork(bool busy, std::chrono::steady_clock::time_point last_tick)
      KOLO_EXCLUDES(mutex_);
  // Leases the idle time to the direct path until the lease closes; false
  // when the path failed and the runtime must stop.
  bool LeaseIdleTime() KOLO_EXCLUDES(mutex_);
  void Complete(LocalOperation* local, const Status& status, int64_t bytes)
      KOLO_EXCLUDES(mutex_);
  void FailEverything(const Status& error) KOLO_EXCLUDES(mutex_);
  Status NamePeerFailure(const Status& status);
  // Logs the stall inspector's warnings, when it is due.
  void InspectStalls(SteadyTime now);
  // The error every rank fails with once some rank called for a stall
  // shutdown: this rank's own verdict, or the longest wait it sees.
  Status StallShutdown(SteadyTime now) const;

  const RuntimeOptions options_;
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Timeline> timeline_;  // the background thread's
  bool timeline_active_;                // the background thread's
  const std::unique_ptr<DirectPath> direct_;
  const SpinStyle spin_style_;  // for the idle wait and the handles' waits

  mutable Mutex mutex_;
  CondVar wake_;  // new work, join, shutdown or a waiter
  bool waiter_arrived_ KOLO_GUARDED_BY(mutex_) = false;  // see WaiterArrived
  // queue_ is not empty; written under mutex_, read without it by the
  // idle spin.
  std::atomic<bool> work_queued_{false};
  // What a handle's on_wait reaches: this runtime until it shuts down.
  struct Doorbell {
    explicit Doorbell(Runtime* r) : runtime(r) {}
    Mutex mutex;
    Runtime* runtime KOLO_GUARDED_BY(mutex);
  };
  const std::shared_ptr<Doorbell> doorbell_;
  CondVar joined_all_;  // Join() waiters
  std::deque<std::unique_ptr<LocalOperation>> queue_ KOLO_GUARDED_BY(mutex_);
  std::map<std::string, bool> names_in_use_ KOLO_GUARDED_BY(mutex_);
  bool join_requested_ KOLO_GUARDED_BY(mutex_) = false;
  std::optional<int32_t> last_joined_ KOLO_GUARDED_BY(mutex_);
  bool shutdown_requested_ KOLO_GUARDED_BY(mutex_) = false;
  bool stopped_ KOLO_GUARDED_BY(mutex_) = false;
  // A SetTimeline the background thread has yet to take: the timeline
  // (null to stop, or on ranks other than 0) and whether one runs after.
  bool timeline_change_ KOLO_GUARDED_BY(mutex_) = false;
  std::unique_ptr<Timeline> incoming_timeline_ KOLO_GUARDED_BY(mutex_);
  bool incoming_timeline_active_ KOLO_GUARDED_BY(mutex_) = false;
  CondVar timeline_taken_;  // SetTimeline's waiter
  Status sticky_error_ KOLO_GUARDED_BY(mutex_);
  RuntimeStats stats_ KOLO_GUARDED_BY(mutex_);

  // Owned by the background thread (see "Threads" above).
  std::map<std::string, std::unique_ptr<LocalOperation>> pending_;
  std::vector<LocalOperation*> unannounced_;  // in enqueue order
  ResponseCache cache_;
  Coordinator coordinator_;
  const CycleReportCodec report_codec_;
  StallInspector stall_inspector_;
  const RuntimeMetrics metrics_;
  Executor executor_;
  RuntimeStats loop_stats_;  // copied into stats_ after each tick
  SteadyTime shutdown_since_;
  AdaptiveSpin idle_spin_;
  bool lease_due_ = false;  // the last tick left every rank idle

  std::thread thread_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_RUNTIME_H_
