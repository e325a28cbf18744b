// The TCP engine's algorithms for every collective but allreduce
// (tcp_allreduce.cc).
#include <algorithm>
#include <cstring>
#include <utility>

#include "collectives/tcp/tcp_algorithms.h"
#include "common/logging.h"
#include "common/reduce.h"

namespace kolo {
namespace {

int32_t Mod(int64_t k, int32_t n) {
  return static_cast<int32_t>((k % n + n) % n);
}

// Byte offsets of blocks of `counts` elements laid end to end.
std::vector<int64_t> Offsets(const std::vector<int64_t>& counts,
                             int64_t element) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (size_t k = 1; k < counts.size(); ++k)
    offsets[k] = offsets[k - 1] + counts[k - 1] * element;
  return offsets;
}

}  // namespace

// Ring allgatherv.
//
// Step s = 0 .. n-2: send block r-s to the next rank, receive block r-s-1
// from the previous one, both straight from and into the output. What goes
// out at step s+1 is what came in at step s, so the steps make one stream
// each way (one Transfer), and the send may run as far as has arrived: a
// block is forwarded while it is still arriving. Each rank sends and
// receives everything but its own block once. Blocks may differ in size,
// or be empty.
Status RingAllgatherv(const TcpGroup& group, const void* send, void* recv,
                      const std::vector<int64_t>& counts, DataType type) {
  const int32_t n = group.size();
  const int32_t r = group.rank();
  const int64_t element = DataTypeSize(type);
  const std::vector<int64_t> offsets = Offsets(counts, element);
  char* out = static_cast<char*>(recv);
  auto bytes = [&](int32_t k) { return counts[k] * element; };
  // In place when the input already sits in this rank's slot.
  if (bytes(r) > 0 && send != out + offsets[r])
    std::memcpy(out + offsets[r], send, bytes(r));
  if (n == 1) return Status::Ok();

  TcpMesh::Transfer ring;
  ring.to = (r + 1) % n;
  ring.from = (r + n - 1) % n;
  for (int32_t s = 0; s < n - 1; ++s) {
    const int32_t outgoing = Mod(r - s, n);
    const int32_t incoming = Mod(r - s - 1, n);
    ring.send.push_back({out + offsets[outgoing], bytes(outgoing)});
    ring.recv.push_back({out + offsets[incoming], bytes(incoming)});
  }
  const int64_t own_bytes = bytes(r);
  ring.progress = [own_bytes](int64_t, int64_t received) {
    TcpMesh::Limits limits;
    limits.send = own_bytes + received;
    return limits;
  };
  return group.mesh->Run(ring, "allgatherv");
}

// Binomial-tree broadcast, for small buffers.
//
// Ranks are numbered relative to the root (v = rank - root mod n). In round
// k the 2^k ranks that have the data, v < 2^k, send it to v + 2^k. A rank
// receives once, from v minus its lowest set bit, and then sends to
// v + 2^j for every j below that bit, largest first: log2(n) rounds,
// each a whole-buffer send, so latency rather than bandwidth.
Status BinomialTreeBroadcast(const TcpGroup& group, void* buffer, int64_t bytes,
                             int32_t root) {
  const int32_t n = group.size();
  const int32_t v = Mod(group.rank() - root, n);
  int32_t mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((v & mask) != 0) {
      TcpMesh::Transfer from_parent;
      from_parent.from = Mod(v - mask + root, n);
      from_parent.recv = {{buffer, bytes}};
      KOLO_RETURN_IF_ERROR(group.mesh->Run(from_parent, "broadcast"));
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask >= n) continue;
    TcpMesh::Transfer to_child;
    to_child.to = Mod(v + mask + root, n);
    to_child.send = {{buffer, bytes}};
    KOLO_RETURN_IF_ERROR(group.mesh->Run(to_child, "broadcast"));
  }
  return Status::Ok();
}

// Chain broadcast, for large buffers.
//
// The ranks form a chain from the root, v = 0 -> 1 -> ... -> n-1 (v
// relative to the root). Each rank forwards every byte to the next as soon
// as it arrives from the previous one, so the buffer flows down the chain
// as a pipeline: n-1 hops of latency, but each link carries the buffer
// once and all links run at once, where a tree would have the root send
// it log2(n) times.
Status ChainBroadcast(const TcpGroup& group, void* buffer, int64_t bytes,
                      int32_t root) {
  const int32_t n = group.size();
  const int32_t v = Mod(group.rank() - root, n);
  TcpMesh::Transfer link;
  if (v > 0) {
    link.from = Mod(v - 1 + root, n);
    link.recv = {{buffer, bytes}};
  }
  if (v < n - 1) {
    link.to = Mod(v + 1 + root, n);
    link.send = {{buffer, bytes}};
  }
  const bool first = v == 0;
  link.progress = [first](int64_t, int64_t received) {
    TcpMesh::Limits limits;
    if (!first) limits.send = received;
    return limits;
  };
  return group.mesh->Run(link, "broadcast");
}

// Pairwise alltoallv.
//
// Round k = 1 .. n-1: send my block for rank r+k while receiving rank
// r-k's block for me, in one full-duplex transfer. Every pair meets in
// exactly one round, each link carries one block per direction, and no
// rank ever waits on two peers at once. In place, the input is copied
// aside first, since the output overwrites blocks not yet sent.
Status PairwiseAlltoallv(const TcpGroup& group, const void* send,
                         const std::vector<int64_t>& send_counts, void* recv,
                         const std::vector<int64_t>& recv_counts,
                         DataType type) {
  const int32_t n = group.size();
  const int32_t r = group.rank();
  const int64_t element = DataTypeSize(type);
  const std::vector<int64_t> send_offsets = Offsets(send_counts, element);
  const std::vector<int64_t> recv_offsets = Offsets(recv_counts, element);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (send == recv) {
    const int64_t total = send_offsets[n - 1] + send_counts[n - 1] * element;
    char* copy = group.scratch->Get(total);
    if (total > 0) std::memcpy(copy, in, total);
    in = copy;
  }
  if (recv_counts[r] > 0) {
    std::memcpy(out + recv_offsets[r], in + send_offsets[r],
                recv_counts[r] * element);
  }
  for (int32_t k = 1; k < n; ++k) {
    TcpMesh::Transfer round;
    round.to = Mod(r + k, n);
    round.send = {
        {in + send_offsets[round.to], send_counts[round.to] * element}};
    round.from = Mod(r - k, n);
    round.recv = {
        {out + recv_offsets[round.from], recv_counts[round.from] * element}};
    KOLO_RETURN_IF_ERROR(group.mesh->Run(round, "alltoallv"));
  }
  return Status::Ok();
}

// Ring reduce-scatter.
//
// The input holds n blocks of recv_count elements; rank r ends with block r
// reduced over everyone. Step s = 0 .. n-2: send partial block r-s-1 to
// the next rank, receive partial block r-s-2 from the previous one into
// scratch slot s, and reduce this rank's own contribution into it. What
// goes out at step s+1 is slot s, and the last step's block is block r,
// whose reduction goes to the output instead. Each rank moves (n-1)/n of
// the input each way, the least a reduce-scatter can.
//
// As in the ring allreduce the steps are one stream each way: a piece is
// reduced as it arrives and forwarded once reduced. Slots are not reused
// within a call, because a slot may still be on its way out while the next
// ones fill; scratch is (n-1) blocks. Each block is reduced on one rank
// only, so the result does not depend on who computes it.
Status RingReducescatter(const TcpGroup& group, const void* send, void* recv,
                         int64_t recv_count, DataType type, ReduceOp op) {
  const int32_t n = group.size();
  const int32_t r = group.rank();
  const int64_t element = DataTypeSize(type);
  const int64_t block_bytes = recv_count * element;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  auto block = [&](int64_t k) { return in + Mod(k, n) * block_bytes; };
  if (n == 1) {
    if (out != in) std::memcpy(out, in, block_bytes);
    return Status::Ok();
  }
  char* slots = group.scratch->Get((n - 1) * block_bytes);
  auto slot = [&](int32_t s) { return slots + s * block_bytes; };

  TcpMesh::Transfer ring;
  ring.to = (r + 1) % n;
  ring.from = (r + n - 1) % n;
  ring.send.push_back({block(r - 1), block_bytes});
  std::vector<int64_t> ends;
  for (int32_t s = 0; s < n - 1; ++s) {
    ring.recv.push_back({slot(s), block_bytes});
    if (s < n - 2) ring.send.push_back({slot(s), block_bytes});
    ends.push_back((s + 1) * block_bytes);
  }
  PieceCursor cursor(std::move(ends), element);
  ring.progress = [&](int64_t, int64_t received) {
    cursor.Advance(received, [&](int32_t s, int64_t offset, int64_t bytes) {
      char* partial = slot(s) + offset;
      char* into = s == n - 2 ? out + offset : partial;
      ReduceInto(type, op, into, partial, block(r - s - 2) + offset,
                 bytes / element);
    });
    TcpMesh::Limits limits;
    limits.send = block_bytes + cursor.done();
    return limits;
  };
  KOLO_RETURN_IF_ERROR(group.mesh->Run(ring, "reducescatter"));
  KOLO_CHECK_EQ(cursor.done(), (n - 1) * block_bytes);
  return Status::Ok();
}

// Dissemination barrier.
//
// Round k (distance d = 2^k while d < n): send one byte to rank r+d and
// receive one from rank r-d, at once. After round k a rank has heard,
// directly or through others, from the 2^(k+1) - 1 ranks before it, so
// after ceil(log2(n)) rounds from everyone: no rank leaves before all
// have arrived.
Status DisseminationBarrier(const TcpGroup& group) {
  const int32_t n = group.size();
  const int32_t r = group.rank();
  char token = 0;
  char heard = 0;
  for (int32_t distance = 1; distance < n; distance <<= 1) {
    TcpMesh::Transfer round;
    round.to = Mod(r + distance, n);
    round.send = {{&token, 1}};
    round.from = Mod(r - distance, n);
    round.recv = {{&heard, 1}};
    KOLO_RETURN_IF_ERROR(group.mesh->Run(round, "barrier"));
  }
  return Status::Ok();
}

}  // namespace kolo
