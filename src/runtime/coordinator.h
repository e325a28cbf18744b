// Coordinator: decides, from every rank's announcements, which operations
// are ready on all ranks and in what order every rank runs them.
//
// The protocol. Each cycle every rank announces the operations that became
// ready locally since its last cycle: by response-cache bit when the cache
// knows them, in full (TensorSpec) otherwise; plus two flags, joined and
// shutting down. The announcements of all ranks are allgathered, so every
// rank holds the same reports, and every rank runs this class on them. It
// is deterministic, so all ranks reach the same decision without a second
// message: a replicated coordinator. (Horovod sends the reports to rank 0
// and broadcasts rank 0's answer; replicating the decision saves that
// round trip, and a report is small.)
//
// The decision. An operation is ready when every rank has announced it, a
// joined rank counting as having announced any sum or average allreduce.
// Ready operations run in the order they were first announced (reports are
// read in rank order, each rank's in its announcement order, so the order
// is the same everywhere); members of a group wait for one another and run
// together. Ranks whose specs disagree, or a rank that shuts down or joins
// while others wait for it, turn the operation into an error that every
// rank reports.
//
// Thread-safety: none; owned by the runtime's thread.
#ifndef KOLO_RUNTIME_COORDINATOR_H_
#define KOLO_RUNTIME_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cycle_report.h"
#include "runtime/response_cache.h"
#include "runtime/tensor_spec.h"

namespace kolo {

using SteadyTime = std::chrono::steady_clock::time_point;

// One operation every rank runs now.
struct ReadyOperation {
  std::string name;
  // specs[r] is rank r's; a joined rank gets a copy of a reporter's spec.
  std::vector<TensorSpec> specs;
  std::vector<bool> joined;  // ranks that contribute zeros
  Status error;              // not ok: every rank fails it with this
};

struct CycleDecision {
  std::vector<ReadyOperation> ready;  // in execution order
  bool all_joined = false;
  int32_t last_joined_rank = -1;  // set when all_joined
  bool all_shutting_down = false;
  int64_t cache_hits = 0;    // operations announced by bit
  int64_t cache_misses = 0;  // operations announced in full
};

// An operation some ranks announced and others have not.
struct WaitingOperation {
  std::string name;
  std::vector<int32_t> missing_ranks;
  std::chrono::steady_clock::duration waited;
};

// "tensor 'x' has waited 3 s for rank 1"
std::string DescribeWait(const WaitingOperation& w, int64_t seconds);

class Coordinator {
 public:
  Coordinator(int32_t world_size, ResponseCache* cache);

  // Folds in this cycle's reports (reports[r] from rank r) and decides.
  CycleDecision Decide(const std::vector<CycleReport>& reports, SteadyTime now);
  // Tells the coordinator an operation ran successfully on every rank, so
  // the cache learns it (operations with joined ranks are not cached).
  void Completed(const ReadyOperation& operation);
  // Operations announced by some ranks at least `older_than` ago.
  std::vector<WaitingOperation> Waiting(
      SteadyTime now, std::chrono::steady_clock::duration older_than) const;
  int64_t pending() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    uint64_t order = 0;
    SteadyTime first_seen;
    std::vector<bool> reported;
    std::vector<TensorSpec> specs;
  };
  void Announce(int32_t rank, const TensorSpec& spec, SteadyTime now);
  // The first reporting rank's spec, which the others are compared with.
  const TensorSpec& Reference(const Entry& entry) const;
  // Fills `out` with the ready-or-error verdict for one entry; false while
  // it must wait for more ranks.
  bool Evaluate(const Entry& entry, ReadyOperation* out) const;

  struct FailedGroup {
    Status error;
    int32_t members_failed = 0;
  };

  const int32_t world_size_;
  ResponseCache* const cache_;
  uint64_t next_order_ = 0;
  std::unordered_map<std::string, Entry> entries_;
  std::map<uint64_t, std::string> order_;  // announcement order -> name
  std::vector<bool> joined_;               // this cycle's flags
  std::vector<bool> shutting_down_;
  std::vector<int32_t> join_order_;  // ranks in the order they joined
  std::map<std::string, FailedGroup> failed_groups_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_COORDINATOR_H_
