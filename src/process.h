// Process: this process's membership in a job, the state behind kolo.h's
// and runtime.h's free functions. Like Horovod's hvd.init(), kolo::Init()
// gives the process one membership at a time; Shutdown() ends it, and a
// later Init starts a new one (a new rendezvous round of the same job).
//
// Init runs these steps, each a function of process.cc:
//   1. apply the process-wide settings (log level, reduction kernels);
//   2. connect to the job's store (rank 0 hosts it without kolorun);
//   3. join the next rendezvous round: its number comes from the store, so
//      every rank, and a process that joins later, agrees on it; the
//      round's keys live under their own PrefixStore;
//   4. discover which ranks share a host;
//   5. plan and build the engine (collectives/backend_factory.h);
//   6. build the direct path (shm on one host);
//   7. build the point-to-point link (collectives/point_to_point.h);
//   8. start the runtime, which owns the collectives from then on.
//
// Thread-safety: every method may be called from any thread; mutex_ guards
// the membership. Init and Shutdown are not meant to race with collectives
// (kolo/kolo.h says so); the runtime and synchronous collectives a caller
// gets stay valid until Shutdown.
#ifndef KOLO_PROCESS_H_
#define KOLO_PROCESS_H_

#include <memory>

#include "collectives/point_to_point.h"
#include "common/mutex.h"
#include "kolo/options.h"
#include "kolo/point_to_point.h"
#include "kolo/status.h"
#include "runtime/runtime.h"
#include "runtime/synchronous.h"

namespace kolo {

class Process {
 public:
  // The one instance; lives until exit (never destroyed: atexit handlers
  // and late callbacks may reach it).
  static Process& Get();

  Status Init(const InitOptions& options) KOLO_EXCLUDES(mutex_);
  Status Shutdown() KOLO_EXCLUDES(mutex_);

  bool initialized() const KOLO_EXCLUDES(mutex_);
  // A single-process world when not initialized.
  WorldInfo world() const KOLO_EXCLUDES(mutex_);
  BackendKind active_backend() const KOLO_EXCLUDES(mutex_);
  bool hierarchical_allreduce() const KOLO_EXCLUDES(mutex_);
  // Null when not initialized.
  Runtime* runtime() const KOLO_EXCLUDES(mutex_);
  SynchronousCollectives* sync() const KOLO_EXCLUDES(mutex_);
  // Null when not initialized or in a world of one rank.
  PointToPoint* point_to_point() const KOLO_EXCLUDES(mutex_);
  // kolo::NewGroup.
  StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(
      const std::vector<int32_t>& ranks) KOLO_EXCLUDES(mutex_);

 private:
  struct Membership;

  Process() = default;

  mutable Mutex mutex_;
  std::unique_ptr<Membership> membership_ KOLO_GUARDED_BY(mutex_);
  // Inits of this process so far: the timeline section of the next one.
  int32_t inits_ KOLO_GUARDED_BY(mutex_) = 0;
};

}  // namespace kolo

#endif  // KOLO_PROCESS_H_
