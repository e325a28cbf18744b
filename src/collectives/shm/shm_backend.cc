// The shared-memory backend: kolo's collectives between the processes of
// one host through a ShmGroup (transport/shm_group.h: one segment per rank
// that every rank maps, and a futex barrier), with no socket and no helper
// thread.
//
// Each collective is a loop of rounds of at most one area per rank, each
// round publish / sync / read. What a rank publishes before sync j sits in
// input area j % 2 (results in area 2 + j % 2), so the next round may
// overwrite the other area at once: one sync per round.
//
//   allreduce, small: publish my chunk; sync; reduce every rank's chunk
//     straight from its segment into my output (no copy out);
//   allreduce, 64 KiB and more: publish the slices of the chunk that the
//     others reduce; sync; reduce my slice (my part straight from my
//     input) into my result area and my output, publish the next chunk;
//     sync; copy the others' reduced slices out. Each element is reduced
//     once instead of once per rank, and each chunk costs one sync, since
//     the next chunk is published before the sync that ends this one;
//   allgatherv / broadcast: publish; sync; copy from the owners;
//   reducescatter: publish a piece of every block; sync; fold my block's
//     pieces from every rank in rank order;
//   alltoallv: one sync to agree on the rounds, then publish a piece for
//     every destination; sync; copy my pieces.
//
// Reductions fold the ranks' contributions in rank order, so every rank
// that reduces the same elements rounds the same way.
//
// Thread-safety: one call at a time, as every Backend.
#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/backend.h"
#include "common/reduce.h"
#include "transport/shm_group.h"

namespace kolo {
namespace {

// Below this many bytes an allreduce reduces the whole buffer on every
// rank: one sync instead of two.
constexpr int64_t kSliceAllreduceMinBytes = 64 * 1024;

class ShmBackend : public Backend {
 public:
  ShmBackend(const WorldInfo& world, std::unique_ptr<ShmGroup> group)
      : world_(world),
        group_(std::move(group)),
        area_bytes_(group_->area_bytes()) {}

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op) override {
    return Reduce(send, recv, count, type, op, 1);
  }

  // The division happens on each chunk's result while it is in the cache,
  // not in a pass of its own over the output.
  Status AllreduceAndDivide(const void* send, void* recv, int64_t count,
                            DataType type, int64_t divisor) override {
    return Reduce(send, recv, count, type, ReduceOp::kSum, divisor);
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
    // An empty block may come with null pointers, which memmove must
    // never see.
    if (mine > 0 && own != send) std::memmove(own, send, mine);
    for (int64_t done = 0; done < most * element; done += area_bytes_) {
      const int64_t n = std::clamp<int64_t>(mine - done, 0, area_bytes_);
      if (n > 0) std::memcpy(Input(world_.rank, Syncs() + 1), own + done, n);
      KOLO_RETURN_IF_ERROR(Sync("allgatherv"));
      for (int32_t r = 0; r < world_.size; ++r) {
        if (r == world_.rank) continue;
        const int64_t theirs = counts[r] * element;
        const int64_t m = std::clamp<int64_t>(theirs - done, 0, area_bytes_);
        std::memcpy(out + offsets[r] * element + done, Input(r, Syncs()), m);
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
        std::memcpy(Input(root, Syncs() + 1), data + done, n);
      }
      KOLO_RETURN_IF_ERROR(Sync("broadcast"));
      if (world_.rank != root)
        std::memcpy(data + done, Input(root, Syncs()), n);
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
    group_->Scalar(world_.rank, (Syncs() + 1) % 2)
        .store(largest * element, std::memory_order_relaxed);
    KOLO_RETURN_IF_ERROR(Sync("alltoallv"));
    int64_t rounds_bytes = 0;
    for (int32_t r = 0; r < n; ++r) {
      rounds_bytes = std::max(
          rounds_bytes,
          group_->Scalar(r, Syncs() % 2).load(std::memory_order_relaxed));
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
      char* area = Input(world_.rank, Syncs() + 1);
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
                    Input(r, Syncs()) + world_.rank * piece, m);
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
      char* area = Input(world_.rank, Syncs() + 1);
      for (int32_t d = 0; d < n; ++d) {
        std::memcpy(area + d * piece * element,
                    in + (d * recv_count + done) * element, m * element);
      }
      KOLO_RETURN_IF_ERROR(Sync("reducescatter"));
      ReduceAll(type, op, out + done * element, m, [&](int32_t r) {
        return Input(r, Syncs()) + world_.rank * piece * element;
      });
    }
    return Status::Ok();
  }

  Status Barrier() override { return Sync("barrier"); }

  // A tensor in the fusion buffer is copied twice before it reaches the
  // segment; a large one is cheaper alone.
  int64_t FusionCutoffBytes() const override { return 64 * 1024; }

 private:
  // Allreduce, its result divided by `divisor` unless that is 1.
  Status Reduce(const void* send, void* recv, int64_t count, DataType type,
                ReduceOp op, int64_t divisor) {
    const int64_t element = DataTypeSize(type);
    if (count * element >= kSliceAllreduceMinBytes) {
      return SliceAllreduce(send, recv, count, type, op, divisor);
    }
    const int64_t per_round = area_bytes_ / element;
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    for (int64_t done = 0; done < count; done += per_round) {
      const int64_t n = std::min(per_round, count - done);
      std::memcpy(Input(world_.rank, Syncs() + 1), in + done * element,
                  n * element);
      KOLO_RETURN_IF_ERROR(Sync("allreduce"));
      ReduceAll(type, op, out + done * element, n,
                [&](int32_t r) { return Input(r, Syncs()); });
      if (divisor != 1) DivideInPlace(type, out + done * element, n, divisor);
    }
    return Status::Ok();
  }

  // Chunks of the area's size, pipelined so that each costs one sync:
  //
  //   publish the first chunk; sync;
  //   for each step j: reduce my slice of step j's chunk into my result
  //     area and my output; publish the next step's chunk; sync; copy the
  //     others' slices of step j's chunk out.
  //
  // Step j's inputs and results sit in the areas of parity (first sync of
  // the call + j + 1): the sync that follows them. A rank writes an area
  // again two syncs after it last wrote it, by when every other rank has
  // read it, since each read lies between the two.
  //
  // Every other call takes the chunks last to first. A buffer reduced again
  // (a loop over one tensor) then starts with what the last call touched
  // last, which is still in the caches, where a pass in the same order
  // would find each chunk evicted by the ones after it whenever the
  // buffers outgrow the last-level cache. The order changes nothing else:
  // each chunk is reduced alike in either.
  //
  // Each rank publishes only the slices the others reduce, and reads its
  // own slice straight from `send`: per element it reads its input and
  // writes its output once from memory, and everything else stays in the
  // caches (the area is 1 MiB by default). In place, a slice of `recv` is
  // written only after it has been published or reduced.
  Status SliceAllreduce(const void* send, void* recv, int64_t count,
                        DataType type, ReduceOp op, int64_t divisor) {
    const int64_t element = DataTypeSize(type);
    const int32_t n = world_.size;
    const int32_t me = world_.rank;
    const int64_t per_round = area_bytes_ / element;
    // Slices start on cache lines, so that no two ranks write one.
    const int64_t line = std::max<int64_t>(1, 64 / element);
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    const uint32_t first = Syncs() + 1;
    const int64_t chunks = (count + per_round - 1) / per_round;
    // Every rank makes the same calls, so every rank takes the same order.
    const bool backward = backward_next_;
    backward_next_ = !backward_next_;
    auto chunk_at = [&](int64_t step) {
      return backward ? chunks - 1 - step : step;
    };
    auto chunk_count = [&](int64_t c) {
      return std::min(per_round, count - c * per_round);
    };
    auto slice_begin = [&](int64_t m, int32_t r) {
      return r == n ? m : m * r / n / line * line;
    };
    auto publish = [&](int64_t j) {
      const int64_t c = chunk_at(j);
      const int64_t m = chunk_count(c);
      char* area = Input(me, first + static_cast<uint32_t>(j));
      const char* chunk = in + c * per_round * element;
      for (int32_t r = 0; r < n; ++r) {
        if (r == me) continue;
        const int64_t b = slice_begin(m, r);
        std::memcpy(area + b * element, chunk + b * element,
                    (slice_begin(m, r + 1) - b) * element);
      }
    };
    publish(0);
    KOLO_RETURN_IF_ERROR(Sync("allreduce"));
    for (int64_t j = 0; j < chunks; ++j) {
      const uint32_t parity = first + static_cast<uint32_t>(j);
      const int64_t c = chunk_at(j);
      const int64_t m = chunk_count(c);
      const int64_t offset = c * per_round * element;
      const int64_t begin = slice_begin(m, me);
      const int64_t end = slice_begin(m, me + 1);
      char* result = Result(me, parity) + begin * element;
      ReduceAll(type, op, result, end - begin, [&](int32_t r) -> const char* {
        if (r == me) return in + offset + begin * element;
        return Input(r, parity) + begin * element;
      });
      if (divisor != 1) DivideInPlace(type, result, end - begin, divisor);
      if (end > begin) {
        std::memcpy(out + offset + begin * element, result,
                    (end - begin) * element);
      }
      if (j + 1 < chunks) publish(j + 1);
      KOLO_RETURN_IF_ERROR(Sync("allreduce"));
      for (int32_t r = 0; r < n; ++r) {
        if (r == me) continue;
        const int64_t b = slice_begin(m, r);
        const int64_t e = slice_begin(m, r + 1);
        std::memcpy(out + offset + b * element, Result(r, parity) + b * element,
                    (e - b) * element);
      }
    }
    return Status::Ok();
  }

  // In rank order (common/reduce.h), so that every rank that reduces the
  // same elements rounds the same way.
  template <typename Source>
  void ReduceAll(DataType type, ReduceOp op, char* out, int64_t count,
                 Source source) {
    FoldInRankOrder(type, op, world_.size, out, count, source);
  }

  uint32_t Syncs() const { return group_->syncs(); }
  Status Sync(const char* what) { return group_->Sync(what); }
  // The input area `rank` publishes at sync `sync`, and its result area.
  char* Input(int32_t rank, uint32_t sync) {
    return group_->Area(rank, static_cast<int32_t>(sync % 2));
  }
  char* Result(int32_t rank, uint32_t sync) {
    return group_->Area(rank, static_cast<int32_t>(2 + sync % 2));
  }

  const WorldInfo world_;
  const std::unique_ptr<ShmGroup> group_;
  const int64_t area_bytes_;
  bool backward_next_ = false;  // SliceAllreduce's next order
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateShmBackend(
    const BackendOptions& options, std::shared_ptr<Store> store) {
  if (!store) return InvalidArgument("the shm backend needs the store");
  if (options.world.cross_size > 1 ||
      options.world.local_size != options.world.size) {
    return InvalidArgument(
        "the shm backend needs every rank on one host, but this job spans " +
        std::to_string(options.world.cross_size) + " hosts (" +
        std::to_string(options.world.local_size) + " of " +
        std::to_string(options.world.size) +
        " ranks on this one); use gloo or mpi");
  }
  ShmGroup::Options group_options;
  group_options.rank = options.world.rank;
  group_options.size = options.world.size;
  group_options.areas = 4;  // inputs and results, each by sync parity
  group_options.area_bytes = options.shm_area_bytes;
  group_options.timeout = options.timeout;
  StatusOr<std::unique_ptr<ShmGroup>> group =
      ShmGroup::Create(group_options, *store, options.store_prefix + "/");
  if (!group.ok()) {
    return group.status().WithContext("rank " +
                                      std::to_string(options.world.rank) +
                                      " could not set up shared memory");
  }
  return std::unique_ptr<Backend>(
      new ShmBackend(options.world, std::move(group).value()));
}

}  // namespace kolo
