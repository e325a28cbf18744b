// The pure half of `kolo-bench soak` (soak.h): which faults come when, and
// what the soak counts. Nothing here touches a process or a namespace, so
// the schedule and the tally are tested alone (tests/tools/kolo-bench/
// soak_plan_test.cc).
//
// The schedule. From --seed alone: the gaps between faults are drawn from
// an exponential distribution of mean --mean-gap (faults arrive as a
// Poisson process, so two may come close together and overlap), each fault
// gets a kind, a number that later picks its target among what is running
// then, a duration (how long a worker stays stopped or a link down) and a
// seed for its garbage bytes. The targets themselves depend on what runs
// at that moment, so the same seed repeats the schedule, not every effect.
//
// The tally. Every fault is either injected or skipped (nothing to hit at
// that moment). Every job ends one of three ways: it succeeded (its
// parameters were checked equal on every rank: kolo-train's "(equal on all
// ranks)" line for the static job, the elastic report that rank 0 writes
// only after every rank agreed on the checksum), it failed (and its output
// names the rank, worker or host that caused it, or it does not), or it
// hung (still running at --job-timeout; the soak killed it). The elastic
// job's output also tells its recoveries (kolo-train's "reset N" lines, one
// per round that resumed training) and the steps each lost.
#ifndef KOLO_TOOLS_KOLO_BENCH_SOAK_PLAN_H_
#define KOLO_TOOLS_KOLO_BENCH_SOAK_PLAN_H_

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kolo::bench {

enum class FaultKind {
  kKill,           // SIGKILL of a worker
  kStopContinue,   // SIGSTOP of a worker, SIGCONT after the duration
  kLinkDownUp,     // a worker host's eth1 down, up after the duration
  kGarbageStore,   // random bytes to a kolorun's store port
  kGarbageEngine,  // random bytes to a worker's engine port
};
constexpr int kFaultKinds = 5;

// "kill -9", "stop/cont", "link down/up", "garbage store", "garbage engine".
const char* FaultName(FaultKind kind);
// The same as JSON keys: "kill", "stop_cont", "link_down_up", ...
const char* FaultKey(FaultKind kind);

struct PlannedFault {
  double at_seconds = 0;  // from the soak's start
  FaultKind kind = FaultKind::kKill;
  uint64_t pick = 0;        // picks the target among the candidates
  double duration = 0;      // stop/cont and link down/up: seconds
  uint64_t bytes_seed = 0;  // garbage: seeds the bytes sent
};

// The faults of a soak of `seconds` from `seed`, in time order, each in
// [0, seconds); durations in [1, 8] s. `mean_gap` > 0.
std::vector<PlannedFault> PlanFaults(uint64_t seed, double seconds,
                                     double mean_gap);

// The garbage one connection sends: `count` bytes from `seed`, some of
// them shaped like a frame header that announces an absurd length (all
// 0xff, or a huge little-endian count), the rest random.
std::string GarbageBytes(uint64_t seed, size_t count);

// What the elastic job's output says about its recoveries.
struct Recoveries {
  int64_t rounds = 0;      // "kolo-train: reset N: ..." lines
  int64_t steps_lost = 0;  // the sum of their "lost K"
};
Recoveries ReadRecoveries(const std::string& output);

// The first line of a failed job's `output` that names what failed: a
// kolorun line, or a worker's error line, that names a rank, a worker or
// one of `hosts`. "" when no line does.
std::string NamedCause(const std::string& output,
                       const std::vector<std::string>& hosts);

enum class JobOutcome { kSucceeded, kFailed, kHung };

// How a job ended, as the soak saw it.
struct JobEnding {
  std::string job;  // "elastic" or "static"
  int64_t generation = 0;
  double seconds = 0;
  JobOutcome outcome = JobOutcome::kSucceeded;
  int exit_code = 0;
  bool parameters_equal = false;  // succeeded and checked on every rank
  std::string cause;              // failed: NamedCause ("" if unnamed)
  Recoveries recoveries;
  int64_t faults = 0;  // faults injected into it while it ran
};

// The end of a job from its exit code, its output and whether it wrote
// its report: what JobEnding's fields say, from what the job printed.
// `hung`: the soak killed it at --job-timeout.
JobEnding ReadJobEnding(const std::string& job, int64_t generation,
                        double seconds, int exit_code, bool hung,
                        bool wrote_report, const std::string& output,
                        const std::vector<std::string>& hosts);

// What the soak left behind once it ended.
struct Leftovers {
  int64_t processes = 0;  // of the jobs, still alive
  int64_t namespaces = 0;
  int64_t shm_segments = 0;
  int64_t total() const { return processes + namespaces + shm_segments; }
};

// Everything a soak counts.
class SoakTally {
 public:
  void RecordFault(FaultKind kind, bool injected);
  void RecordJob(const JobEnding& ending);
  void SetLeftovers(const Leftovers& leftovers) { leftovers_ = leftovers; }

  int64_t injected(FaultKind kind) const;
  int64_t skipped(FaultKind kind) const;
  int64_t injected_total() const;
  int64_t hangs() const;
  int64_t unnamed_failures() const;
  const std::vector<JobEnding>& jobs() const { return jobs_; }
  const Leftovers& leftovers() const { return leftovers_; }

  // Why the soak fails: hangs, leftovers, failures with no named cause,
  // or an elastic job that succeeded without agreeing parameters. Empty
  // when it passes.
  std::vector<std::string> Problems() const;

  // The printed table: faults by kind, then jobs by kind, then leftovers.
  std::vector<std::string> TableLines() const;
  // The record: every count, and every job's ending.
  nlohmann::json ToJson() const;

 private:
  std::array<int64_t, kFaultKinds> injected_{};
  std::array<int64_t, kFaultKinds> skipped_{};
  std::vector<JobEnding> jobs_;
  Leftovers leftovers_;
};

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_SOAK_PLAN_H_
