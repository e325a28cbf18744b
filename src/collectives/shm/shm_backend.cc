// The shared-memory backend: kolo's collectives between processes of one
// host, through POSIX shared memory and futexes, with no socket and no
// helper thread.
//
// Segments. Every rank owns one segment, /kolo-<job>-<rank>, that every
// other rank maps: a header (the rank's sync counter, its pid) and four
// areas of `area_bytes`, two for inputs and two for results. Once every rank
// has mapped every segment (counted in the store), each rank unlinks its
// own name, so the segments live exactly as long as the mappings: nothing
// is left in /dev/shm however the job ends, SIGKILL included.
//
// Sync. A sync is a barrier: a rank raises its counter to the next value
// and waits until every peer's counter has reached it. Data written before
// sync j is "published at j" and peers may read it until their sync j+1;
// areas alternate by the parity of j, so a rank rewrites an area only after
// sync j+1, when every peer has finished reading it. Each collective is a
// loop of rounds of at most one area, each round one sync:
//
//   allreduce, 2 ranks or small: publish my chunk; sync; reduce every rank's
//     chunk straight from its segment into my output (no copy out);
//   allreduce, 3+ ranks and large: publish; sync; reduce my slice of the
//     chunk into my result area; sync; copy every rank's reduced slice out.
//     Each element is reduced once instead of once per rank;
//   allgatherv / broadcast: publish; sync; copy from the owners;
//   reducescatter: publish a piece of every block; sync; fold my block's
//     pieces from every rank in rank order;
//   alltoallv: one sync to agree on the rounds, then publish a piece for
//     every destination; sync; copy my pieces.
//
// Waiting. A waiter spins for up to kSpinFor, then sleeps on the peer's
// counter with FUTEX_WAIT in slices of kSleepSlice; a rank that raises its
// counter calls FUTEX_WAKE only when someone sleeps on it. Between slices
// the waiter checks that the peer's process still exists (kPeerFailure
// naming the rank) and that the job's timeout has not passed (kTimeout).
// A bounded spin is what keeps a 4 KiB allreduce at microseconds without a
// spinning thread stealing a compute core for longer than that.
//
// Thread-safety: one call at a time, as every Backend.
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "collectives/backend.h"
#include "common/reduce.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kSleepSlice = std::chrono::milliseconds(10);
constexpr size_t kHeaderBytes = 4096;
// Below this many bytes an allreduce of 3+ ranks reduces the whole buffer
// on every rank: one sync instead of two.
constexpr int64_t kSliceAllreduceMinBytes = 64 * 1024;

struct alignas(64) SegmentHeader {
  std::atomic<uint32_t> counter;  // the last sync this rank reached
  std::atomic<uint32_t> sleepers;  // peers in FUTEX_WAIT on `counter`
  int32_t pid;
  uint64_t pid_namespace;
  // Per-sync scalars a collective publishes with its data, by parity.
  std::atomic<int64_t> scalar[2];
};
static_assert(sizeof(SegmentHeader) <= kHeaderBytes, "header fits its page");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex word");

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const struct timespec* timeout) {
  // Shared (not FUTEX_PRIVATE): the word lives in a mapping of another
  // process.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                 timeout, nullptr, 0);
}

// Whether a counter value has reached `target`, modulo 2^32.
bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

uint64_t PidNamespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// Whether `pid` names a live (not zombie) process. Only meaningful when the
// caller shares its pid namespace.
bool ProcessAlive(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: assume alive
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

std::string ErrnoText(int error) { return std::strerror(error); }

struct Mapping {
  void* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, bytes);
  }
};

class ShmBackend : public Backend {
 public:
  ShmBackend(const WorldInfo& world, std::chrono::milliseconds timeout,
             int64_t area_bytes)
      : world_(world), timeout_(timeout), area_bytes_(area_bytes),
        same_pid_namespace_(static_cast<size_t>(world.size), false),
        segments_(static_cast<size_t>(world.size)) {}

  Status Init(const std::string& base_name, Store& store,
              const std::string& prefix);

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op) override {
    const int64_t element = DataTypeSize(type);
    const int64_t bytes = count * element;
    if (world_.size >= 3 && bytes >= kSliceAllreduceMinBytes) {
      return SliceAllreduce(send, recv, count, type, op);
    }
    const int64_t per_round = area_bytes_ / element;
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    for (int64_t done = 0; done < count; done += per_round) {
      const int64_t n = std::min(per_round, count - done);
      std::memcpy(Input(world_.rank, seq_ + 1), in + done * element,
                  n * element);
      KOLO_RETURN_IF_ERROR(Sync("allreduce"));
      ReduceAll(type, op, out + done * element, n, [&](int32_t r) {
        return Input(r, seq_);
      });
    }
    return Status::Ok();
  }

  Status Allgatherv(const void* send, void* recv,
                    const std::vector<int64_t>& counts,
                    DataType type) override {
    const int64_t element = DataTypeSize(type);
    std::vector<int64_t> offsets(counts.size(), 0);
    int64_t most = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (r > 0) offsets[r] = offsets[r - 1] + counts[r - 1];
      most = std::max(most, counts[r]);
    }
    char* out = static_cast<char*>(recv);
    char* own = out + offsets[world_.rank] * element;
    const int64_t mine = counts[world_.rank] * element;
    if (own != send) std::memmove(own, send, mine);
    for (int64_t done = 0; done < most * element; done += area_bytes_) {
      const int64_t n = std::clamp<int64_t>(mine - done, 0, area_bytes_);
      std::memcpy(Input(world_.rank, seq_ + 1), own + done, n);
      KOLO_RETURN_IF_ERROR(Sync("allgatherv"));
      for (int32_t r = 0; r < world_.size; ++r) {
        if (r == world_.rank) continue;
        const int64_t theirs = counts[r] * element;
        const int64_t m = std::clamp<int64_t>(theirs - done, 0, area_bytes_);
        std::memcpy(out + offsets[r] * element + done, Input(r, seq_), m);
      }
    }
    return Status::Ok();
  }

  Status Broadcast(void* buffer, int64_t count, DataType type,
                   int32_t root) override {
    const int64_t bytes = count * DataTypeSize(type);
    char* data = static_cast<char*>(buffer);
    for (int64_t done = 0; done < bytes; done += area_bytes_) {
      const int64_t n = std::min(area_bytes_, bytes - done);
      if (world_.rank == root) {
        std::memcpy(Input(root, seq_ + 1), data + done, n);
      }
      KOLO_RETURN_IF_ERROR(Sync("broadcast"));
      if (world_.rank != root) std::memcpy(data + done, Input(root, seq_), n);
    }
    return Status::Ok();
  }

  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                   void* recv, const std::vector<int64_t>& recv_counts,
                   DataType type) override {
    const int64_t element = DataTypeSize(type);
    const int32_t n = world_.size;
    std::vector<int64_t> send_offsets(n, 0), recv_offsets(n, 0);
    int64_t largest = 0;
    for (int32_t r = 0; r < n; ++r) {
      if (r > 0) {
        send_offsets[r] = send_offsets[r - 1] + send_counts[r - 1];
        recv_offsets[r] = recv_offsets[r - 1] + recv_counts[r - 1];
      }
      largest = std::max({largest, send_counts[r], recv_counts[r]});
    }
    // Agree on the number of rounds: the largest block of any pair.
    SegmentHeader* header = Header(world_.rank);
    header->scalar[(seq_ + 1) % 2].store(largest * element,
                                         std::memory_order_relaxed);
    KOLO_RETURN_IF_ERROR(Sync("alltoallv"));
    int64_t rounds_bytes = 0;
    for (int32_t r = 0; r < n; ++r) {
      rounds_bytes = std::max(
          rounds_bytes,
          Header(r)->scalar[seq_ % 2].load(std::memory_order_relaxed));
    }
    // Each destination gets an equal piece of the area per round.
    const int64_t piece = area_bytes_ / n;
    const char* in = static_cast<const char*>(send);
    // In place: the blocks still to be sent must not be overwritten by the
    // ones received, so read from a copy.
    std::vector<char> copy;
    if (send == recv) {
      const int64_t total = send_offsets[n - 1] + send_counts[n - 1];
      copy.assign(in, in + total * element);
      in = copy.data();
    }
    char* out = static_cast<char*>(recv);
    for (int64_t done = 0; done < rounds_bytes; done += piece) {
      char* area = Input(world_.rank, seq_ + 1);
      for (int32_t d = 0; d < n; ++d) {
        const int64_t m =
            std::clamp<int64_t>(send_counts[d] * element - done, 0, piece);
        std::memcpy(area + d * piece, in + send_offsets[d] * element + done, m);
      }
      KOLO_RETURN_IF_ERROR(Sync("alltoallv"));
      for (int32_t r = 0; r < n; ++r) {
        const int64_t m =
            std::clamp<int64_t>(recv_counts[r] * element - done, 0, piece);
        std::memcpy(out + recv_offsets[r] * element + done,
                    Input(r, seq_) + world_.rank * piece, m);
      }
    }
    return Status::Ok();
  }

  Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                       DataType type, ReduceOp op) override {
    const int64_t element = DataTypeSize(type);
    const int32_t n = world_.size;
    const int64_t piece = area_bytes_ / n / element;  // elements per block
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    for (int64_t done = 0; done < recv_count; done += piece) {
      const int64_t m = std::min(piece, recv_count - done);
      char* area = Input(world_.rank, seq_ + 1);
      for (int32_t d = 0; d < n; ++d) {
        std::memcpy(area + d * piece * element,
                    in + (d * recv_count + done) * element, m * element);
      }
      KOLO_RETURN_IF_ERROR(Sync("reducescatter"));
      ReduceAll(type, op, out + done * element, m, [&](int32_t r) {
        return Input(r, seq_) + world_.rank * piece * element;
      });
    }
    return Status::Ok();
  }

  Status Barrier() override { return Sync("barrier"); }

  // A tensor in the fusion buffer is copied twice before it reaches the
  // segment; a large one is cheaper alone.
  int64_t FusionCutoffBytes() const override { return 64 * 1024; }

 private:
  // Publishes the chunk, reduces this rank's slice of it into the result
  // area, and after a second sync copies every slice out.
  Status SliceAllreduce(const void* send, void* recv, int64_t count,
                        DataType type, ReduceOp op) {
    const int64_t element = DataTypeSize(type);
    const int32_t n = world_.size;
    const int64_t per_round = area_bytes_ / element;
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    for (int64_t done = 0; done < count; done += per_round) {
      const int64_t m = std::min(per_round, count - done);
      auto slice_begin = [&](int32_t r) { return m * r / n; };
      std::memcpy(Input(world_.rank, seq_ + 1), in + done * element,
                  m * element);
      KOLO_RETURN_IF_ERROR(Sync("allreduce"));
      const int64_t begin = slice_begin(world_.rank);
      const int64_t end = slice_begin(world_.rank + 1);
      ReduceAll(type, op, Result(world_.rank, seq_ + 1) + begin * element,
                end - begin, [&](int32_t r) {
                  return Input(r, seq_) + begin * element;
                });
      KOLO_RETURN_IF_ERROR(Sync("allreduce"));
      for (int32_t r = 0; r < n; ++r) {
        const int64_t b = slice_begin(r);
        const int64_t e = slice_begin(r + 1);
        std::memcpy(out + (done + b) * element, Result(r, seq_) + b * element,
                    (e - b) * element);
      }
    }
    return Status::Ok();
  }

  // out = source(0) op source(1) op ... in rank order, so that every rank
  // that reduces the same elements rounds the same way.
  template <typename Source>
  void ReduceAll(DataType type, ReduceOp op, char* out, int64_t count,
                 Source source) {
    if (count <= 0) return;
    if (world_.size == 1) {
      std::memcpy(out, source(0), count * DataTypeSize(type));
      return;
    }
    ReduceInto(type, op, out, source(0), source(1), count);
    for (int32_t r = 2; r < world_.size; ++r) {
      ReduceInto(type, op, out, out, source(r), count);
    }
  }

  SegmentHeader* Header(int32_t rank) {
    return static_cast<SegmentHeader*>(segments_[rank].base);
  }
  // The input area rank `rank` publishes at sync `sync`.
  char* Input(int32_t rank, uint32_t sync) {
    return static_cast<char*>(segments_[rank].base) + kHeaderBytes +
           (sync % 2) * area_bytes_;
  }
  char* Result(int32_t rank, uint32_t sync) {
    return static_cast<char*>(segments_[rank].base) + kHeaderBytes +
           (2 + sync % 2) * area_bytes_;
  }

  Status Sync(const char* what) {
    const uint32_t target = ++seq_;
    SegmentHeader* mine = Header(world_.rank);
    mine->counter.store(target, std::memory_order_seq_cst);
    if (mine->sleepers.load(std::memory_order_seq_cst) > 0) {
      Futex(&mine->counter, FUTEX_WAKE, INT32_MAX, nullptr);
    }
    const Clock::time_point start = Clock::now();
    for (int32_t r = 0; r < world_.size; ++r) {
      if (r == world_.rank) continue;
      KOLO_RETURN_IF_ERROR(WaitFor(r, target, start, what));
    }
    return Status::Ok();
  }

  Status WaitFor(int32_t rank, uint32_t target, Clock::time_point start,
                 const char* what) {
    SegmentHeader* peer = Header(rank);
    std::atomic<uint32_t>& counter = peer->counter;
    if (Reached(counter.load(std::memory_order_acquire), target)) {
      return Status::Ok();
    }
    const Clock::time_point spin_until = Clock::now() + kSpinFor;
    for (int i = 0;; ++i) {
      if (Reached(counter.load(std::memory_order_acquire), target)) {
        return Status::Ok();
      }
      if ((i & 63) == 63 && Clock::now() >= spin_until) break;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    const struct timespec slice = {
        0, static_cast<long>(
               std::chrono::nanoseconds(kSleepSlice).count())};
    while (true) {
      peer->sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t seen = counter.load(std::memory_order_seq_cst);
      if (!Reached(seen, target)) Futex(&counter, FUTEX_WAIT, seen, &slice);
      peer->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (Reached(counter.load(std::memory_order_acquire), target)) {
        return Status::Ok();
      }
      if (same_pid_namespace_[rank] && !ProcessAlive(peer->pid)) {
        return PeerFailure("shm " + std::string(what) + ": rank " +
                           std::to_string(rank) + " (pid " +
                           std::to_string(peer->pid) +
                           ") exited while rank " +
                           std::to_string(world_.rank) + " waited for it");
      }
      if (Clock::now() - start > timeout_) {
        return Timeout("shm " + std::string(what) + ": rank " +
                       std::to_string(rank) + " did not arrive within " +
                       std::to_string(timeout_.count() / 1000) + " s");
      }
    }
  }

  const WorldInfo world_;
  const std::chrono::milliseconds timeout_;
  const int64_t area_bytes_;
  std::vector<bool> same_pid_namespace_;
  std::vector<Mapping> segments_;
  uint32_t seq_ = 0;  // the last sync this rank reached
};

Status ShmBackend::Init(const std::string& base_name, Store& store,
                        const std::string& prefix) {
  const size_t bytes = kHeaderBytes + 4 * static_cast<size_t>(area_bytes_);
  auto segment_name = [&](int32_t rank) {
    return base_name + "-" + std::to_string(rank);
  };
  auto fail = [&](const std::string& name, const std::string& call, int error) {
    return Internal("shm: " + call + " of /dev/shm" + name + " failed: " +
                    ErrnoText(error));
  };
  const std::string own = segment_name(world_.rank);
  {
    const int fd = shm_open(own.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return fail(own, "shm_open", errno);
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int error = errno;
      close(fd);
      shm_unlink(own.c_str());
      return fail(own, "ftruncate to " + std::to_string(bytes) + " bytes", error);
    }
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int error = errno;
    close(fd);
    if (base == MAP_FAILED) {
      shm_unlink(own.c_str());
      return fail(own, "mmap", error);
    }
    segments_[world_.rank].base = base;
    segments_[world_.rank].bytes = bytes;
    // Touch every page now: a full /dev/shm fails here, not in a
    // collective with SIGBUS.
    std::memset(base, 0, bytes);
    auto* header = new (base) SegmentHeader();
    header->counter.store(0);
    header->sleepers.store(0);
    header->pid = static_cast<int32_t>(getpid());
    header->pid_namespace = PidNamespace();
  }
  // From here on the own segment must be unlinked whatever happens.
  struct Unlinker {
    std::string name;
    ~Unlinker() { shm_unlink(name.c_str()); }
  } unlinker{own};

  Status ready = store.Set(prefix + "ready/" + std::to_string(world_.rank), "1");
  if (!ready.ok()) return ready;
  std::vector<std::string> keys;
  for (int32_t r = 0; r < world_.size; ++r) {
    keys.push_back(prefix + "ready/" + std::to_string(r));
  }
  KOLO_RETURN_IF_ERROR(store.Wait(keys, timeout_).WithContext(
      "shm: waiting for every rank's segment"));
  const uint64_t my_namespace = Header(world_.rank)->pid_namespace;
  for (int32_t r = 0; r < world_.size; ++r) {
    if (r == world_.rank) continue;
    const std::string name = segment_name(r);
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) return fail(name, "shm_open", errno);
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int error = errno;
    close(fd);
    if (base == MAP_FAILED) return fail(name, "mmap", error);
    segments_[r].base = base;
    segments_[r].bytes = bytes;
    same_pid_namespace_[r] =
        my_namespace != 0 && Header(r)->pid_namespace == my_namespace;
  }
  // Everyone has mapped everything: the names can go.
  KOLO_ASSIGN_OR_RETURN(int64_t mapped, store.Add(prefix + "mapped", 1));
  if (mapped == world_.size) {
    KOLO_RETURN_IF_ERROR(store.Set(prefix + "all_mapped", "1"));
  }
  KOLO_RETURN_IF_ERROR(store.Wait({prefix + "all_mapped"}, timeout_)
                           .WithContext("shm: waiting for every rank to map "
                                        "the segments"));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateShmBackend(
    const BackendOptions& options, std::shared_ptr<Store> store) {
  if (!store) return InvalidArgument("the shm backend needs the store");
  if (options.shm_area_bytes < 4096 || options.shm_area_bytes % 4096 != 0) {
    return InvalidArgument("shm area must be a positive multiple of 4096 "
                           "bytes, got " +
                           std::to_string(options.shm_area_bytes));
  }
  const std::string prefix = options.store_prefix + "/";
  // Rank 0 names the job's segments; the name is new for every Init.
  std::string base;
  if (options.world.rank == 0) {
    std::random_device random;
    std::ostringstream name;
    name << "/kolo-" << getpid() << "-" << std::hex << random() << random();
    base = name.str();
    KOLO_RETURN_IF_ERROR(store->Set(prefix + "name", base));
  } else {
    KOLO_ASSIGN_OR_RETURN(base, store->Get(prefix + "name", options.timeout));
  }
  auto backend = std::make_unique<ShmBackend>(options.world, options.timeout,
                                              options.shm_area_bytes);
  KOLO_RETURN_IF_ERROR(backend->Init(base, *store, prefix).WithContext(
      "rank " + std::to_string(options.world.rank) +
      " could not set up shared memory"));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace kolo
