// The TCP backend: kolo's own network engine, for jobs that span hosts.
//
// Why not Gloo alone: Gloo hands every send and receive to an event-loop
// thread and waits for it, and with as many busy threads as cores (a rank's
// caller, its runtime, Gloo's loop) those hand-offs cost more than the
// network: a 4 KiB allreduce between two hosts (network namespaces on a
// 2-core machine) took 1-4 ms in Gloo on a link whose TCP round trip is
// 26-50 us. This engine moves the bytes on the calling thread, over one
// connection per pair of ranks (transport/tcp_mesh.h), with each
// collective's algorithm written for that (collectives/tcp/
// tcp_algorithms.h); there, the same allreduce takes about one round trip.
//
//   allreduce      power-of-two worlds below kRingAllreduceMinBytes:
//                  recursive doubling (one exchange per round, both sides
//                  reducing the same bits; for two ranks a single
//                  exchange); otherwise a pipelined ring reduce-scatter +
//                  allgather;
//   allgatherv     ring, one stream each way;
//   broadcast      binomial tree below kChainBroadcastMinBytes, otherwise a
//                  pipelined chain;
//   alltoallv      pairwise exchange, n-1 full-duplex rounds;
//   reducescatter  ring, pipelined like the allreduce's first half;
//   barrier        dissemination, one byte each way per round.
//
// The ranks meet in the store under options.store_prefix and listen on
// options.gloo_hostname (KOLO_GLOO_HOSTNAME, which names the address of
// both network engines). Errors are the mesh's: sticky, naming the peer's
// rank and address.
#include <cstring>

#include "collectives/backend.h"
#include "collectives/tcp/tcp_algorithms.h"
#include "transport/tcp_mesh.h"

namespace kolo {
namespace {

// Below this, recursive doubling's log2(n) rounds beat the ring's 2(n-1)
// steps although it moves more bytes (the whole buffer every round) and
// reduces all of it. Measured between network namespaces, medians of 4
// runs: at 2 ranks the exchange took 115 us at 128 KiB against the ring's
// 136, and 275 us at 256 KiB against 163; at 4 ranks the two met at 128
// KiB (510 and 467 us) and the ring was ahead from 256 KiB (712 against
// 948). Above it the ring wins because it moves 2(n-1)/n of the buffer and
// reduces 1/n of it; at 2 ranks, where both move the whole buffer, the
// halved reduction is what counts (a quarter less user CPU at 16-64 MiB).
constexpr int64_t kRingAllreduceMinBytes = 256 * 1024;
// Below this, a tree's log2(n) rounds beat a chain's n-1 hops; above, the
// chain's pipeline carries the buffer over each link once.
constexpr int64_t kChainBroadcastMinBytes = 64 * 1024;

bool PowerOfTwo(int32_t n) { return (n & (n - 1)) == 0; }

class TcpBackend : public Backend {
 public:
  explicit TcpBackend(std::unique_ptr<TcpMesh> mesh)
      : mesh_(std::move(mesh)), group_{mesh_.get(), &scratch_} {}

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op) override {
    KOLO_RETURN_IF_ERROR(mesh_->error());
    const int32_t n = mesh_->size();
    const int64_t bytes = count * DataTypeSize(type);
    if (n == 1) {
      if (send != recv) std::memcpy(recv, send, bytes);
      return Status::Ok();
    }
    if (PowerOfTwo(n) && bytes < kRingAllreduceMinBytes)
      return RecursiveDoublingAllreduce(group_, send, recv, count, type, op);
    return RingAllreduce(group_, send, recv, count, type, op);
  }

  Status Allgatherv(const void* send, void* recv,
                    const std::vector<int64_t>& counts,
                    DataType type) override {
    KOLO_RETURN_IF_ERROR(mesh_->error());
    return RingAllgatherv(group_, send, recv, counts, type);
  }

  Status Broadcast(void* buffer, int64_t count, DataType type,
                   int32_t root) override {
    KOLO_RETURN_IF_ERROR(mesh_->error());
    const int64_t bytes = count * DataTypeSize(type);
    if (bytes < kChainBroadcastMinBytes)
      return BinomialTreeBroadcast(group_, buffer, bytes, root);
    return ChainBroadcast(group_, buffer, bytes, root);
  }

  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                   void* recv, const std::vector<int64_t>& recv_counts,
                   DataType type) override {
    KOLO_RETURN_IF_ERROR(mesh_->error());
    return PairwiseAlltoallv(group_, send, send_counts, recv, recv_counts,
                             type);
  }

  Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                       DataType type, ReduceOp op) override {
    KOLO_RETURN_IF_ERROR(mesh_->error());
    return RingReducescatter(group_, send, recv, recv_count, type, op);
  }

  Status Barrier() override {
    KOLO_RETURN_IF_ERROR(mesh_->error());
    return DisseminationBarrier(group_);
  }

  int64_t FusionCutoffBytes() const override { return kFusionCutoffBytes; }

 private:
  // A fused tensor is copied into the fusion buffer and out again, at
  // memory speed; alone it costs one more call, about one network round
  // trip, and from a few hundred KiB a call is at the link's bandwidth
  // anyway. kolo-bench fusion (ResNet-50's gradients, 2 hosts of one rank)
  // put the runtime's step at 92-99 ms with a cutoff of 256 KiB, 86-96 ms
  // at 1 MiB, 105-109 ms at 4 MiB and 126-237 ms fusing everything.
  static constexpr int64_t kFusionCutoffBytes = int64_t{1} << 20;

  const std::unique_ptr<TcpMesh> mesh_;
  Scratch scratch_;
  const TcpGroup group_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateTcpBackend(
    const BackendOptions& options, std::shared_ptr<Store> store) {
  PrefixStore prefixed(options.store_prefix, std::move(store));
  TcpMesh::Options mesh_options;
  mesh_options.rank = options.world.rank;
  mesh_options.size = options.world.size;
  mesh_options.hostname = options.gloo_hostname;
  mesh_options.timeout = options.timeout;
  mesh_options.job_secret = options.job_secret;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<TcpMesh> mesh,
                        TcpMesh::Connect(mesh_options, &prefixed));
  return std::unique_ptr<Backend>(new TcpBackend(std::move(mesh)));
}

}  // namespace kolo
