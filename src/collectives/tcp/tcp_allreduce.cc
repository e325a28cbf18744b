// The TCP engine's allreduce algorithms; tcp_backend.cc picks one by the
// world's size and the buffer's.
#include <algorithm>
#include <cstring>
#include <utility>

#include "collectives/tcp/tcp_algorithms.h"
#include "common/logging.h"
#include "common/reduce.h"

namespace kolo {

char* Scratch::Get(int64_t bytes) {
  if (bytes > capacity_) {
    data_.reset(new char[bytes]);
    capacity_ = bytes;
  }
  return data_.get();
}

// Recursive doubling (n a power of two).
//
// Round k (k = 0 .. log2(n)-1): this rank and its partner, rank ^ 2^k, swap
// their whole buffers in one full-duplex transfer and each reduces the two,
// the lower rank's operand first, so both compute the same bits. After
// round k every rank holds the reduction over its group of 2^(k+1) ranks,
// the same bits across the group; after the last round, over everyone.
// With two ranks that is a single exchange: one round trip, and the same
// bytes each way as a ring, which needs two steps for them.
//
// The partner's buffer lands in scratch and is reduced piece by piece as it
// arrives, so reducing overlaps the transfer. In place (round 0 when send
// == recv, and every later round, which works on recv), a piece of mine is
// overwritten only after it was handed to the socket.
Status RecursiveDoublingAllreduce(const TcpGroup& group, const void* send,
                                  void* recv, int64_t count, DataType type,
                                  ReduceOp op) {
  const int64_t element = DataTypeSize(type);
  const int64_t bytes = count * element;
  char* theirs = group.scratch->Get(bytes);
  const char* mine = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  for (int32_t distance = 1; distance < group.size(); distance <<= 1) {
    const int32_t partner = group.rank() ^ distance;
    const bool lower = group.rank() < partner;
    PieceCursor cursor({bytes}, element);
    TcpMesh::Transfer exchange;
    exchange.to = partner;
    exchange.send = {{mine, bytes}};
    exchange.from = partner;
    exchange.recv = {{theirs, bytes}};
    exchange.progress = [&](int64_t sent, int64_t received) {
      const int64_t reducible =
          mine == out ? std::min(sent, received) : received;
      cursor.Advance(reducible, [&](int32_t, int64_t offset, int64_t piece) {
        const char* a = mine + offset;
        const char* b = theirs + offset;
        ReduceInto(type, op, out + offset, lower ? a : b, lower ? b : a,
                   piece / element);
      });
      return TcpMesh::Limits();
    };
    KOLO_RETURN_IF_ERROR(group.mesh->Run(exchange, "allreduce"));
    KOLO_CHECK_EQ(cursor.done(), bytes);
    mine = out;
  }
  return Status::Ok();
}

// Ring allreduce: a reduce-scatter, then an allgather, around the ring
// rank -> rank + 1.
//
// The buffer is cut into n blocks, block k holding elements
// [k*count/n, (k+1)*count/n). Reduce-scatter, steps s = 0 .. n-2: send
// block r-s to the next rank, receive block r-s-1 from the previous one
// and reduce it with this rank's own into the output. What goes out at
// step s+1 is the block reduced at step s, and after step n-2 this rank
// holds block r+1 reduced over everyone. Allgather, steps t = 0 .. n-2:
// send block r+1-t, receive block r-t straight into the output; again what
// goes out at step t+1 is what came in at step t. Each rank moves 2(n-1)/n
// of the buffer each way, the least any allreduce can, in 2(n-1) steps,
// and reduces 1/n of it (a full exchange between two ranks reduces all of
// it, which is why two ranks take this ring too once buffers are large).
//
// Since every step sends what the step before received, the 2(n-1) steps
// make one stream in each direction: one Transfer, whose progress callback
// reduces each piece of a received block as it arrives and lets the send
// run as far as has been reduced (or, in the allgather, received). Sending
// piece k overlaps receiving piece k+1 and reducing piece k-1, and no step
// waits for the whole of the one before. The reduce-scatter's incoming
// blocks land in the kSlots scratch slots in turn, kSlotBytes at a time,
// and the receive may run at most kSlots slots ahead of the reduction: the
// reduction reads them from cache. Each block is reduced to its final
// value on one rank and copied to the others, so every rank ends with the
// same bits.
//
// In place, block r goes out raw at step 0 from the memory into which the
// allgather later receives block r's final value; a piece of that value
// exists only after this rank's raw piece went out, so nothing is
// overwritten before it was sent.
Status RingAllreduce(const TcpGroup& group, const void* send, void* recv,
                     int64_t count, DataType type, ReduceOp op) {
  const int32_t n = group.size();
  const int32_t r = group.rank();
  const int64_t element = DataTypeSize(type);
  // Block k's offset and length in bytes; k is taken modulo n.
  auto block = [&](int64_t k) {
    k = (k % n + n) % n;
    const int64_t first = count * k / n;
    const int64_t last = count * (k + 1) / n;
    return std::make_pair(first * element, (last - first) * element);
  };
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const int64_t slot_bytes = kSlotBytes / element * element;
  char* slots = group.scratch->Get(kSlots * slot_bytes);

  TcpMesh::Transfer ring;
  ring.to = (r + 1) % n;
  ring.from = (r + n - 1) % n;
  const int64_t own_bytes = block(r).second;
  ring.send.push_back({in + block(r).first, own_bytes});
  // The reduce-scatter's receive spans, one per slot's worth of a block:
  // where each ends in the stream, and where its bytes go in the output.
  std::vector<int64_t> span_ends;
  std::vector<int64_t> span_targets;
  int64_t scattered = 0;
  for (int32_t s = 0; s < n - 1; ++s) {
    const auto [offset, bytes] = block(r - s - 1);
    for (int64_t done = 0; done < bytes; done += slot_bytes) {
      const int64_t span = std::min(slot_bytes, bytes - done);
      char* slot = slots + span_ends.size() % kSlots * slot_bytes;
      ring.recv.push_back({slot, span});
      scattered += span;
      span_ends.push_back(scattered);
      span_targets.push_back(offset + done);
    }
    if (s < n - 2) ring.send.push_back({out + offset, bytes});
  }
  const size_t spans = span_ends.size();
  for (int32_t t = 0; t < n - 1; ++t) {
    const auto [send_offset, send_bytes] = block(r + 1 - t);
    ring.send.push_back({out + send_offset, send_bytes});
    const auto [recv_offset, recv_bytes] = block(r - t);
    ring.recv.push_back({out + recv_offset, recv_bytes});
  }
  PieceCursor cursor(span_ends, element);
  ring.progress = [&](int64_t, int64_t received) {
    cursor.Advance(
        std::min(received, scattered),
        [&](int32_t span, int64_t offset, int64_t bytes) {
          const char* partial = slots + span % kSlots * slot_bytes + offset;
          const int64_t at = span_targets[span] + offset;
          ReduceInto(type, op, out + at, partial, in + at, bytes / element);
        });
    TcpMesh::Limits limits;
    limits.send =
        own_bytes + cursor.done() + std::max<int64_t>(0, received - scattered);
    // A slot is refilled only once the reduction has read it.
    const size_t last_free = cursor.pending() + kSlots - 1;
    if (last_free < spans) limits.recv = span_ends[last_free];
    return limits;
  };
  KOLO_RETURN_IF_ERROR(group.mesh->Run(ring, "allreduce"));
  KOLO_CHECK_EQ(cursor.done(), scattered);
  return Status::Ok();
}

}  // namespace kolo
