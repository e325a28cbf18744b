// ShmGroup: the shared memory through which the ranks of one host reach
// each other, and the barrier that orders their use of it.
//
// Segments. Every rank owns one POSIX shared-memory segment,
// /kolo-<rank 0's pid>-<random>-<rank>, that every other rank maps: a header
// page (the rank's sync counter, its pid, a few published scalars) and
// `areas` areas of `area_bytes` each. Their names are drawn, published and
// unlinked as transport/shm_segments.h describes, so nothing is left in
// /dev/shm however the job ends, SIGKILL included.
//
// Sync. Sync() is a barrier: the rank raises its counter to the next value
// and waits until every peer's counter has reached it. What a rank writes
// before sync j its peers may read after their sync j and until their sync
// j+1; callers that alternate two areas by the parity of j can therefore
// rewrite an area right after sync j+1 without a second barrier.
//
// Waiting. A waiter spins for up to 50 us (a peer that is already on its
// way arrives within microseconds), then sleeps on the peer's counter with
// FUTEX_WAIT in slices of 10 ms. It spins only while the previous wait
// ended within those 50 us: when peers keep arriving late (they are
// computing), a waiter goes straight to sleep. With more ranks than cores
// the spin yields the core (sched_yield) at every turn, since the peer it
// waits for may be queued on it. A rank that raises its counter calls
// FUTEX_WAKE only when a peer sleeps on it. Between slices the waiter checks
// that the peer's process still exists (kPeerFailure naming the rank and
// pid) and that the timeout has not passed (kTimeout naming the rank). The
// spin is bounded so that on a machine with as many busy threads as cores a
// waiting rank gives its core back to the compute threads.
//
// Thread-safety: one thread at a time per rank (the backend's contract).
#ifndef KOLO_TRANSPORT_SHM_GROUP_H_
#define KOLO_TRANSPORT_SHM_GROUP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/spin_wait.h"
#include "kolo/options.h"
#include "kolo/status.h"
#include "store/store.h"
#include "transport/shm_segments.h"

namespace kolo {

class ShmGroup {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t size = 1;
    int32_t areas = 4;
    int64_t area_bytes = 1 << 20;  // a positive multiple of 4096
    std::chrono::milliseconds timeout = kDefaultTimeout;
  };

  // Collective over the ranks of `options`: every rank calls it with the
  // same options and a store shared by all, under `key_prefix`.
  static StatusOr<std::unique_ptr<ShmGroup>> Create(
      const Options& options, Store& store, const std::string& key_prefix);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // Area `index` of `rank`'s segment.
  char* Area(int32_t rank, int32_t index) const;
  // A 64-bit value `rank` publishes before a sync; `slot` < kScalarSlots.
  std::atomic<int64_t>& Scalar(int32_t rank, int32_t slot) const;
  static constexpr int32_t kScalarSlots = 4;

  // The barrier described above; `what` names the operation in errors.
  Status Sync(const char* what);

  // For waits on a condition over many ranks' scalars, which no single
  // counter expresses: one job-wide futex word (in rank 0's header). A
  // rank publishes, then rings. A waiter registers, looks once more
  // (`ready`), and unless that look succeeds sleeps until a ring or for at
  // most `slice`. A ring with no waiter registered is a fence and a load.
  void RingDoorbell();
  void AwaitDoorbell(std::chrono::milliseconds slice,
                     const std::function<bool()>& ready);
  // kPeerFailure naming `rank` and its pid when its process is gone (or
  // lives in another pid namespace, where nothing can be said: ok).
  Status CheckAlive(int32_t rank, const std::string& what) const;
  // How waits on this group spin before they sleep.
  SpinStyle spin_style() const { return spin_style_; }
  // The number of the last sync this rank passed (0 before the first).
  uint32_t syncs() const { return syncs_; }

  int32_t rank() const { return options_.rank; }
  int32_t size() const { return options_.size; }
  int64_t area_bytes() const { return options_.area_bytes; }

 private:
  struct Header;

  ShmGroup(const Options& options, std::unique_ptr<ShmSegments> segments);
  Status Join(Store& store);
  Header* HeaderOf(int32_t rank) const;
  Status WaitFor(int32_t rank, uint32_t target,
                 std::chrono::steady_clock::time_point start, const char* what);

  const Options options_;
  const std::unique_ptr<ShmSegments> segments_;
  std::vector<bool> same_pid_namespace_;  // liveness checks are meaningful
  uint32_t syncs_ = 0;
  AdaptiveSpin spin_;
  const SpinStyle spin_style_;  // yields where ranks outnumber cores
};

}  // namespace kolo

#endif  // KOLO_TRANSPORT_SHM_GROUP_H_
