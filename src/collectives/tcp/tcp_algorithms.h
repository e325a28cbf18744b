// The algorithms of kolo's TCP engine, one function each, over a TcpMesh
// (transport/tcp_mesh.h). Each opens with its essay in its .cc file; the
// backend (tcp_backend.cc) picks among them by size.
//
// All of them take the Backend contract (collectives/backend.h): every rank
// calls with matching arguments, so every rank picks the same algorithm and
// the byte streams between each pair of ranks line up without tags; send
// may equal recv (in place); an empty block may come with a null pointer.
// Reductions that more than one rank computes combine the operands in a
// canonical order (the lower rank's first), so that every rank ends with
// the same bits.
#ifndef KOLO_COLLECTIVES_TCP_TCP_ALGORITHMS_H_
#define KOLO_COLLECTIVES_TCP_TCP_ALGORITHMS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "transport/tcp_mesh.h"

namespace kolo {

// Memory an algorithm needs for the length of one call, kept between calls
// so that a steady loop of collectives does not fault in fresh pages every
// time. The contents are garbage on every Get.
class Scratch {
 public:
  char* Get(int64_t bytes);

 private:
  std::unique_ptr<char[]> data_;
  int64_t capacity_ = 0;
};

// What every algorithm works with: the mesh (this rank is mesh->rank() of
// mesh->size()) and the scratch memory.
struct TcpGroup {
  TcpMesh* mesh;
  Scratch* scratch;
  int32_t rank() const { return mesh->rank(); }
  int32_t size() const { return mesh->size(); }
};

// Reductions fold what has arrived in pieces of at least this many bytes
// (or the rest of a block): large enough for the kernels to run at speed,
// small enough that the next piece arrives while this one is reduced.
inline constexpr int64_t kReducePieceBytes = 64 * 1024;
// Where an algorithm receives operands that it reduces into its output,
// they land in kSlots slots of kSlotBytes, taken in turn: the bytes are
// still in cache when the reduction reads them, and scratch stays at 1 MiB
// whatever the buffer.
inline constexpr int64_t kSlotBytes = 256 * 1024;
inline constexpr int32_t kSlots = 4;

// Walks a receive stream made of blocks laid end to end and hands what has
// arrived to a reduction, in order, in pieces of kReducePieceBytes or the
// rest of a block; piece boundaries fall on elements.
class PieceCursor {
 public:
  // `ends[i]`: the stream offset where block i ends.
  PieceCursor(std::vector<int64_t> ends, int64_t element)
      : ends_(std::move(ends)), element_(element) {}

  // Calls reduce(block, offset in the block, bytes) for every piece that
  // lies below `arrived` and is complete.
  template <typename Reduce>
  void Advance(int64_t arrived, Reduce&& reduce) {
    while (block_ < ends_.size() && done_ < arrived) {
      const int64_t begin = block_ == 0 ? 0 : ends_[block_ - 1];
      const int64_t end = ends_[block_];
      if (done_ == end) {
        ++block_;
        continue;
      }
      int64_t bytes = std::min(arrived, end) - done_;
      if (done_ + bytes < end) {
        bytes -= bytes % element_;
        if (bytes < kReducePieceBytes) return;
      }
      reduce(static_cast<int32_t>(block_), done_ - begin, bytes);
      done_ += bytes;
    }
  }
  // Stream bytes reduced so far.
  int64_t done() const { return done_; }
  // The first block not yet wholly reduced (the number of blocks once all
  // are).
  size_t pending() const {
    size_t block = block_;
    while (block < ends_.size() && done_ == ends_[block]) ++block;
    return block;
  }

 private:
  const std::vector<int64_t> ends_;
  const int64_t element_;
  size_t block_ = 0;
  int64_t done_ = 0;
};

// Allreduce for a power-of-two world: log2(n) rounds of a full exchange
// with a partner. Moves and reduces the whole buffer every round; the
// choice for small buffers (for two ranks, one exchange).
Status RecursiveDoublingAllreduce(const TcpGroup& group, const void* send,
                                  void* recv, int64_t count, DataType type,
                                  ReduceOp op);
// Ring reduce-scatter then ring allgather, pipelined in pieces: moves
// 2(n-1)/n of the buffer per rank and reduces 1/n of it, whatever n.
Status RingAllreduce(const TcpGroup& group, const void* send, void* recv,
                     int64_t count, DataType type, ReduceOp op);
Status RingAllgatherv(const TcpGroup& group, const void* send, void* recv,
                      const std::vector<int64_t>& counts, DataType type);
Status BinomialTreeBroadcast(const TcpGroup& group, void* buffer, int64_t bytes,
                             int32_t root);
Status ChainBroadcast(const TcpGroup& group, void* buffer, int64_t bytes,
                      int32_t root);
Status PairwiseAlltoallv(const TcpGroup& group, const void* send,
                         const std::vector<int64_t>& send_counts, void* recv,
                         const std::vector<int64_t>& recv_counts,
                         DataType type);
Status RingReducescatter(const TcpGroup& group, const void* send, void* recv,
                         int64_t recv_count, DataType type, ReduceOp op);
Status DisseminationBarrier(const TcpGroup& group);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_TCP_TCP_ALGORITHMS_H_
