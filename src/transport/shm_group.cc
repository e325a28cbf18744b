#include "transport/shm_group.h"

#include <sched.h>
#include <unistd.h>

#include <new>
#include <string>

#include "transport/futex.h"
#include "transport/process_liveness.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kSleepSlice = std::chrono::milliseconds(10);
constexpr size_t kHeaderBytes = 4096;

// Whether a counter has reached `target`, modulo 2^32.
bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

}  // namespace

struct alignas(64) ShmGroup::Header {
  SharedFutex counter;  // the last sync this rank reached
  int32_t pid;
  uint64_t pid_namespace;
  std::atomic<int64_t> scalars[kScalarSlots];
  // A line of its own: every ring reads it, and it changes only when
  // someone sleeps, while the line above changes with every sync.
  alignas(64) SharedFutex doorbell;  // rank 0's is the job's
};

ShmGroup::ShmGroup(const Options& options,
                   std::unique_ptr<ShmSegments> segments)
    : options_(options),
      segments_(std::move(segments)),
      same_pid_namespace_(static_cast<size_t>(options.size), false),
      // With more ranks than cores the peer may need this very core to arrive.
      spin_style_(RanksOutnumberCores(options.size) ? SpinStyle::kYieldEveryWait
                                                    : SpinStyle::kPause) {
  static_assert(sizeof(Header) <= kHeaderBytes, "the header fits its page");
}

ShmGroup::~ShmGroup() = default;

StatusOr<std::unique_ptr<ShmGroup>> ShmGroup::Create(
    const Options& options, Store& store, const std::string& key_prefix) {
  if (options.area_bytes < 4096 || options.area_bytes % 4096 != 0) {
    return InvalidArgument(
        "shm: an area must be a positive multiple of 4096 bytes, got " +
        std::to_string(options.area_bytes));
  }
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size ||
      options.areas < 1) {
    return InvalidArgument("shm: rank " + std::to_string(options.rank) +
                           " of " + std::to_string(options.size) + " with " +
                           std::to_string(options.areas) + " areas");
  }
  ShmSegments::Options segment_options;
  segment_options.rank = options.rank;
  segment_options.size = options.size;
  segment_options.bytes =
      kHeaderBytes + static_cast<size_t>(options.areas) *
                         static_cast<size_t>(options.area_bytes);
  segment_options.timeout = options.timeout;
  segment_options.key_prefix = key_prefix;
  segment_options.name_tag = "-";
  segment_options.what = "shm";
  segment_options.populate = true;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<ShmSegments> segments,
                        ShmSegments::Create(segment_options, store));
  std::unique_ptr<ShmGroup> group(new ShmGroup(options, std::move(segments)));
  KOLO_RETURN_IF_ERROR(group->Join(store));
  return group;
}

Status ShmGroup::Join(Store& store) {
  Header* header = new (segments_->own()) Header();
  header->pid = static_cast<int32_t>(getpid());
  header->pid_namespace = PidNamespace();
  for (auto& scalar : header->scalars) scalar.store(0);
  Status mapped = segments_->MapPeers(store);
  if (!segments_->peers_mapped()) return mapped;
  for (int32_t r = 0; r < options_.size; ++r) {
    same_pid_namespace_[r] =
        r != options_.rank && header->pid_namespace != 0 &&
        HeaderOf(r)->pid_namespace == header->pid_namespace;
  }
  return mapped;
}

ShmGroup::Header* ShmGroup::HeaderOf(int32_t rank) const {
  return static_cast<Header*>(segments_->of(rank));
}

char* ShmGroup::Area(int32_t rank, int32_t index) const {
  return static_cast<char*>(segments_->of(rank)) + kHeaderBytes +
         static_cast<size_t>(index) * static_cast<size_t>(options_.area_bytes);
}

std::atomic<int64_t>& ShmGroup::Scalar(int32_t rank, int32_t slot) const {
  return HeaderOf(rank)->scalars[slot];
}

Status ShmGroup::Sync(const char* what) {
  const uint32_t target = ++syncs_;
  Header* mine = HeaderOf(options_.rank);
  // seq_cst on both sides: either this rank sees the sleeper registered, or
  // the sleeper sees the new counter before it sleeps.
  mine->counter.word.store(target, std::memory_order_seq_cst);
  mine->counter.WakeSleepers();
  const Clock::time_point start = Clock::now();
  for (int32_t r = 0; r < options_.size; ++r) {
    if (r == options_.rank) continue;
    KOLO_RETURN_IF_ERROR(WaitFor(r, target, start, what));
  }
  return Status::Ok();
}

Status ShmGroup::WaitFor(int32_t rank, uint32_t target, Clock::time_point start,
                         const char* what) {
  SharedFutex& counter = HeaderOf(rank)->counter;
  auto arrived = [target](uint32_t value) { return Reached(value, target); };
  auto arrived_now = [&] {
    return arrived(counter.word.load(std::memory_order_acquire));
  };
  if (arrived_now()) return Status::Ok();
  const Clock::time_point began = Clock::now();
  const AdaptiveSpin::FinishOnExit finish{&spin_, began};
  if (spin_.Spin(arrived_now, spin_style_, began)) return Status::Ok();
  while (true) {
    counter.Sleep(kSleepSlice, arrived);
    if (arrived_now()) return Status::Ok();
    KOLO_RETURN_IF_ERROR(CheckAlive(rank, what));
    if (Clock::now() - start > options_.timeout) {
      return Timeout("shm " + std::string(what) + ": rank " +
                     std::to_string(rank) + " did not arrive within " +
                     std::to_string(options_.timeout.count()) + " ms");
    }
  }
}

Status ShmGroup::CheckAlive(int32_t rank, const std::string& what) const {
  const Header* peer = HeaderOf(rank);
  if (!same_pid_namespace_[rank] || ProcessAlive(peer->pid))
    return Status::Ok();
  return PeerFailure("shm " + what + ": rank " + std::to_string(rank) +
                     " (pid " + std::to_string(peer->pid) +
                     ") exited while rank " + std::to_string(options_.rank) +
                     " waited for it");
}

void ShmGroup::RingDoorbell() {
  Header* job = HeaderOf(0);
  // Pairs with the fence in AwaitDoorbell: either this rank sees the
  // sleeper registered, or the sleeper's last look sees what this rank
  // published. The word is written only for a sleeper, so a ring that
  // nobody awaits costs no cache line taken from another core.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (job->doorbell.sleepers.load(std::memory_order_seq_cst) > 0) {
    job->doorbell.Ring();
  }
}

void ShmGroup::AwaitDoorbell(std::chrono::milliseconds slice,
                             const std::function<bool()>& ready) {
  // A ring after the registration changes the word, so the sleep returns.
  HeaderOf(0)->doorbell.Sleep(slice, [&](uint32_t) { return ready(); });
}

}  // namespace kolo
