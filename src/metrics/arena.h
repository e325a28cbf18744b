// The metric arena: where one process keeps its metrics, laid out so that
// another process can read them while they change.
//
// kolorun serves the metrics of every rank on its host from one port, but
// the values live in the ranks, which update them on their hot paths. So
// each rank keeps its metrics in a memory-mapped file that kolorun names
// (KOLO_METRICS_DIR/rank-<pid>), and kolorun reads those files when it is
// scraped: no message per update, no thread in the rank, and the final
// values of a rank that has exited can still be read. A process without
// kolorun keeps the same arena in its own memory.
//
// Layout, fixed at creation:
//   ArenaHeader | Descriptor[descriptor_capacity] | slot[slot_capacity]
// A descriptor names one series (type, name, help, its own labels already
// rendered, histogram bounds) and the slots that hold its values: a counter
// or gauge has one (a double's bits), a histogram has one count per bucket
// (the last is +Inf) and then its sum (a double's bits). The writer fills a
// descriptor and zeroes its slots before it raises `published` (release);
// a reader loads `published` (acquire) and reads only descriptors below it,
// which never change again. Slots are 64-bit atomics, lock-free and
// address-free, so they work across processes. A histogram's count is the
// sum of its buckets, so a reader never sees a count that disagrees with
// its +Inf bucket.
//
// Thread-safety: Register() from any thread (a mutex, taken once per
// series); slot updates from any thread without a lock.
#ifndef KOLO_METRICS_ARENA_H_
#define KOLO_METRICS_ARENA_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/bit_cast.h"
#include "common/mutex.h"
#include "kolo/status.h"

namespace kolo {
namespace metrics {

enum class MetricType : uint32_t { kCounter = 1, kGauge = 2, kHistogram = 3 };
const char* MetricTypeName(MetricType type);

constexpr int kMaxBuckets = 24;
constexpr uint32_t kDescriptorCapacity = 256;
constexpr uint32_t kSlotCapacity = 4096;

// What a rank is doing, as its arena says (kolorun adds how it ended).
enum class RankPhase : int32_t { kStarting = 0, kRunning = 1, kFinished = 2 };

struct Descriptor {
  uint32_t type;
  uint32_t first_slot;
  uint32_t bucket_count;  // histograms: bounds, not counting +Inf
  char name[96];
  char help[256];
  char labels[256];  // `op="allreduce",engine="shm"`, escaped
  double bounds[kMaxBuckets];
};

struct ArenaHeader {
  char magic[8];
  uint32_t layout_version;
  uint32_t descriptor_capacity;
  uint32_t slot_capacity;
  std::atomic<uint32_t> published;
  std::atomic<int32_t> rank;
  std::atomic<int32_t> phase;
  int32_t pid;
  int64_t start_unix_ms;
  char job[64];
  char host[128];
};

// The series a reader found, copied out of an arena.
struct SeriesSnapshot {
  MetricType type = MetricType::kCounter;
  std::string name;
  std::string help;
  std::string labels;
  std::vector<double> bounds;           // histograms
  std::vector<uint64_t> bucket_counts;  // histograms: bounds.size() + 1
  double value = 0;                     // counter, gauge, or histogram sum
};

struct ArenaSnapshot {
  int32_t rank = -1;
  RankPhase phase = RankPhase::kStarting;
  pid_t pid = 0;
  int64_t start_unix_ms = 0;
  std::string job;
  std::string host;
  std::vector<SeriesSnapshot> series;
};

// Counters, gauges and histogram sums are doubles kept as their bits.
inline uint64_t DoubleToBits(double value) { return BitCast<uint64_t>(value); }
inline double BitsToDouble(uint64_t bits) { return BitCast<double>(bits); }

// Checks a metric or label name against Prometheus' rules and kolo's: the
// error names the metric and what is wrong.
Status ValidateMetricName(const std::string& name);
Status ValidateLabelName(const std::string& metric, const std::string& label);
// A label value escaped for the text format (\\, \" and \n).
std::string EscapeLabelValue(const std::string& value);
// HELP text escaped for the text format (\\ and \n).
std::string EscapeHelp(const std::string& help);

class Arena {
 public:
  // An arena in this process's memory.
  static std::unique_ptr<Arena> CreateInMemory(const std::string& job,
                                               const std::string& host,
                                               int32_t rank);
  // An arena in a new file `path` (kInternal naming it when that fails).
  static StatusOr<std::unique_ptr<Arena>> CreateFile(const std::string& path,
                                                     const std::string& job,
                                                     const std::string& host,
                                                     int32_t rank);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // The series `name`{labels}: its first slot, registering it on first use.
  // `labels` is already rendered (see EscapeLabelValue). Asking again for a
  // series returns the same slots; asking with another type or other
  // bounds is an error naming the metric, as is a full arena.
  StatusOr<std::atomic<uint64_t>*> Register(MetricType type,
                                            const std::string& name,
                                            const std::string& help,
                                            const std::string& labels,
                                            const std::vector<double>& bounds);
  // The bounds a registered histogram's descriptor holds (they outlive
  // every handle: the arena lives until the process ends).
  const double* BoundsOf(const std::atomic<uint64_t>* first_slot) const;

  void SetRank(int32_t rank);
  void SetPhase(RankPhase phase);
  const std::string& path() const { return path_; }

  // Reads an arena this process owns.
  ArenaSnapshot Snapshot() const;

 private:
  Arena(void* base, size_t size, std::string path);
  void Initialize(const std::string& job, const std::string& host,
                  int32_t rank);

  void* const base_;
  const size_t size_;
  const std::string path_;  // empty: in memory
  Mutex mutex_;
  uint32_t next_slot_ KOLO_GUARDED_BY(mutex_) = 0;
};

// The bytes an arena occupies (the file's size).
size_t ArenaBytes();

// Reads an arena from `size` bytes at `base` (another process's file,
// mapped read-only); kInvalidArgument naming `what` when the bytes are
// not a complete arena.
StatusOr<ArenaSnapshot> ReadArena(const void* base, size_t size,
                                  const std::string& what);
// Maps the file at `path` and reads it.
StatusOr<ArenaSnapshot> ReadArenaFile(const std::string& path);

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_ARENA_H_
