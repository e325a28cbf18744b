#include "transport/shm_group.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <random>
#include <sstream>

#include "transport/process_liveness.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kSleepSlice = std::chrono::milliseconds(10);
constexpr size_t kHeaderBytes = 4096;

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const struct timespec* timeout) {
  // Not FUTEX_PRIVATE: the word lives in a mapping shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                 timeout, nullptr, 0);
}

// A futex wait's relative timeout.
struct timespec Timespec(std::chrono::nanoseconds span) {
  return {static_cast<time_t>(span.count() / 1000000000),
          static_cast<long>(span.count() % 1000000000)};
}

// Whether a counter has reached `target`, modulo 2^32.
bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

Status SystemError(const std::string& name, const std::string& call,
                   int error) {
  return Internal("shm: " + call + " of /dev/shm" + name +
                  " failed: " + std::strerror(error));
}

}  // namespace

struct alignas(64) ShmGroup::Header {
  std::atomic<uint32_t> counter;   // the last sync this rank reached
  std::atomic<uint32_t> sleepers;  // peers in FUTEX_WAIT on `counter`
  int32_t pid;
  uint64_t pid_namespace;
  std::atomic<int64_t> scalars[kScalarSlots];
  // A line of its own: every ring reads it, and it changes only when
  // someone sleeps, while the line above changes with every sync.
  alignas(64) std::atomic<uint32_t> doorbell;  // rank 0's is the job's
  std::atomic<uint32_t> doorbell_sleepers;     // in FUTEX_WAIT on `doorbell`
};

ShmGroup::ShmGroup(const Options& options)
    : options_(options),
      segments_(static_cast<size_t>(options.size)),
      same_pid_namespace_(static_cast<size_t>(options.size), false),
      // With more ranks than cores the peer may need this very core to arrive.
      spin_style_(RanksOutnumberCores(options.size) ? SpinStyle::kYieldEveryWait
                                                    : SpinStyle::kPause) {
  static_assert(sizeof(Header) <= kHeaderBytes, "the header fits its page");
  static_assert(std::atomic<uint32_t>::is_always_lock_free,
                "futex words are plain words");
}

ShmGroup::~ShmGroup() {
  for (Mapping& m : segments_) {
    if (m.base != nullptr) munmap(m.base, m.bytes);
  }
}

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
  // Rank 0 names the job's segments; the name is new for every group.
  std::string base;
  if (options.rank == 0) {
    std::random_device random;
    std::ostringstream name;
    name << "/kolo-" << getpid() << "-" << std::hex << random() << random();
    base = name.str();
    KOLO_RETURN_IF_ERROR(store.Set(key_prefix + "name", base));
  } else {
    KOLO_ASSIGN_OR_RETURN(base,
                          store.Get(key_prefix + "name", options.timeout));
  }
  std::unique_ptr<ShmGroup> group(new ShmGroup(options));
  KOLO_RETURN_IF_ERROR(group->Join(base, store, key_prefix));
  return group;
}

Status ShmGroup::Join(const std::string& base_name, Store& store,
                      const std::string& key_prefix) {
  const int32_t me = options_.rank;
  const size_t bytes =
      kHeaderBytes + static_cast<size_t>(options_.areas) *
                         static_cast<size_t>(options_.area_bytes);
  auto segment_name = [&](int32_t rank) {
    return base_name + "-" + std::to_string(rank);
  };

  const std::string own = segment_name(me);
  const int fd = shm_open(own.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return SystemError(own, "shm_open", errno);
  // From here on the name must go whatever happens.
  struct Unlinker {
    std::string name;
    ~Unlinker() { shm_unlink(name.c_str()); }
  } unlinker{own};
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return SystemError(own, "ftruncate to " + std::to_string(bytes) + " bytes",
                       error);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_error = errno;
  close(fd);
  if (base == MAP_FAILED) return SystemError(own, "mmap", map_error);
  segments_[me] = {base, bytes};
  // Touch every page now: a full /dev/shm fails here with an error, not in
  // a collective with SIGBUS.
  std::memset(base, 0, bytes);
  Header* header = new (base) Header();
  header->counter.store(0);
  header->sleepers.store(0);
  header->doorbell.store(0);
  header->doorbell_sleepers.store(0);
  header->pid = static_cast<int32_t>(getpid());
  header->pid_namespace = PidNamespace();
  for (auto& scalar : header->scalars) scalar.store(0);

  KOLO_RETURN_IF_ERROR(
      store.Set(key_prefix + "ready/" + std::to_string(me), "1"));
  std::vector<std::string> keys;
  for (int32_t r = 0; r < options_.size; ++r) {
    keys.push_back(key_prefix + "ready/" + std::to_string(r));
  }
  KOLO_RETURN_IF_ERROR(
      store.Wait(keys, options_.timeout)
          .WithContext("shm: waiting for every rank's segment"));
  for (int32_t r = 0; r < options_.size; ++r) {
    if (r == me) continue;
    const std::string name = segment_name(r);
    const int peer_fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (peer_fd < 0) return SystemError(name, "shm_open", errno);
    void* peer =
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, peer_fd, 0);
    const int error = errno;
    close(peer_fd);
    if (peer == MAP_FAILED) return SystemError(name, "mmap", error);
    segments_[r] = {peer, bytes};
    same_pid_namespace_[r] =
        header->pid_namespace != 0 &&
        HeaderOf(r)->pid_namespace == header->pid_namespace;
  }
  // Everyone has mapped everything: the names can go (the Unlinker).
  KOLO_ASSIGN_OR_RETURN(int64_t mapped, store.Add(key_prefix + "mapped", 1));
  if (mapped == options_.size)
    KOLO_RETURN_IF_ERROR(store.Set(key_prefix + "all_mapped", "1"));
  return store.Wait({key_prefix + "all_mapped"}, options_.timeout)
      .WithContext("shm: waiting for every rank to map the segments");
}

ShmGroup::Header* ShmGroup::HeaderOf(int32_t rank) const {
  return static_cast<Header*>(segments_[rank].base);
}

char* ShmGroup::Area(int32_t rank, int32_t index) const {
  return static_cast<char*>(segments_[rank].base) + kHeaderBytes +
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
  mine->counter.store(target, std::memory_order_seq_cst);
  if (mine->sleepers.load(std::memory_order_seq_cst) > 0) {
    Futex(&mine->counter, FUTEX_WAKE, INT_MAX, nullptr);
  }
  const Clock::time_point start = Clock::now();
  for (int32_t r = 0; r < options_.size; ++r) {
    if (r == options_.rank) continue;
    KOLO_RETURN_IF_ERROR(WaitFor(r, target, start, what));
  }
  return Status::Ok();
}

Status ShmGroup::WaitFor(int32_t rank, uint32_t target, Clock::time_point start,
                         const char* what) {
  Header* peer = HeaderOf(rank);
  std::atomic<uint32_t>& counter = peer->counter;
  if (Reached(counter.load(std::memory_order_acquire), target))
    return Status::Ok();
  const Clock::time_point began = Clock::now();
  const AdaptiveSpin::FinishOnExit finish{&spin_, began};
  if (spin_.Spin(
          [&] {
            return Reached(counter.load(std::memory_order_acquire), target);
          },
          spin_style_, began)) {
    return Status::Ok();
  }
  const struct timespec slice = Timespec(kSleepSlice);
  while (true) {
    peer->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = counter.load(std::memory_order_seq_cst);
    if (!Reached(seen, target)) Futex(&counter, FUTEX_WAIT, seen, &slice);
    peer->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (Reached(counter.load(std::memory_order_acquire), target))
      return Status::Ok();
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
  if (job->doorbell_sleepers.load(std::memory_order_seq_cst) > 0) {
    job->doorbell.fetch_add(1, std::memory_order_seq_cst);
    Futex(&job->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void ShmGroup::AwaitDoorbell(std::chrono::milliseconds slice,
                             const std::function<bool()>& ready) {
  Header* job = HeaderOf(0);
  const struct timespec timeout = Timespec(slice);
  job->doorbell_sleepers.fetch_add(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // A ring from here on changes the word, so the wait below returns.
  const uint32_t seen = job->doorbell.load(std::memory_order_seq_cst);
  if (!ready()) Futex(&job->doorbell, FUTEX_WAIT, seen, &timeout);
  job->doorbell_sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace kolo
