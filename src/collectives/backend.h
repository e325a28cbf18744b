// Backend: the seam between kolo's collectives and an engine (kolo's own
// TCP and shared-memory engines, Gloo, MPI).
// A backend moves data and nothing else: argument checks, averaging, empty
// buffers, sticky errors and naming dead peers happen once, above it, in
// Communicator.
//
// Contract for every call: all ranks call it in the same order with matching
// arguments (already checked); counts are > 0; ReduceOp is never kAverage;
// the aliasing forms of kolo.h (in place) may occur and must be handled. A
// failed call returns kPeerFailure or kTimeout when a peer is gone or silent,
// kInternal otherwise; the engine may be unusable afterwards.
//
// Thread-safety: one call at a time.
#ifndef KOLO_COLLECTIVES_BACKEND_H_
#define KOLO_COLLECTIVES_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/topology.h"
#include "kolo/kolo.h"
#include "kolo/options.h"
#include "store/store.h"

namespace kolo {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Status Allreduce(const void* send, void* recv, int64_t count,
                           DataType type, ReduceOp op) = 0;
  // counts[r] elements from rank r, concatenated in rank order into recv.
  virtual Status Allgatherv(const void* send, void* recv,
                            const std::vector<int64_t>& counts,
                            DataType type) = 0;
  virtual Status Broadcast(void* buffer, int64_t count, DataType type,
                           int32_t root) = 0;
  virtual Status Alltoallv(const void* send,
                           const std::vector<int64_t>& send_counts, void* recv,
                           const std::vector<int64_t>& recv_counts,
                           DataType type) = 0;
  virtual Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                               DataType type, ReduceOp op) = 0;
  virtual Status Barrier() = 0;

  // Allreduce's sum with every element then divided by `divisor`: an
  // average. The default divides in a pass of its own over `recv`; an
  // engine that can divide within its last pass over the result overrides
  // it. Either way each element is the sum divided once, so the bits are
  // the same.
  virtual Status AllreduceAndDivide(const void* send, void* recv, int64_t count,
                                    DataType type, int64_t divisor);

  // Tensors of at least this many bytes run alone even when they could be
  // fused: on this engine the copies into and out of the fusion buffer
  // would cost more than the engine call they save. Must be the same on
  // every rank (it is a constant of the engine).
  virtual int64_t FusionCutoffBytes() const = 0;
};

struct BackendOptions {
  WorldInfo world;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // The address the network engines (gloo and tcp) listen on
  // (KOLO_GLOO_HOSTNAME).
  std::string gloo_hostname = "127.0.0.1";
  // The job's secret (KOLO_STORE_SECRET): the tcp engine admits only ranks
  // that prove it (transport/tcp_mesh.h).
  std::string job_secret;
  // Namespace in the store for this backend's rendezvous keys.
  std::string store_prefix = "gloo";
  // Bytes of each of the four areas of a rank's shared-memory segment: the
  // most one round of a shm collective moves per rank.
  int64_t shm_area_bytes = 1 << 20;
};

// Each returns kInvalidArgument naming the CMake option when the backend was
// not compiled in.
StatusOr<std::unique_ptr<Backend>> CreateGlooBackend(
    const BackendOptions& options, std::shared_ptr<Store> store);
// kolo's own engine over TCP, one connection per pair of ranks; see
// tcp/tcp_backend.cc. Always built.
StatusOr<std::unique_ptr<Backend>> CreateTcpBackend(
    const BackendOptions& options, std::shared_ptr<Store> store);
StatusOr<std::unique_ptr<Backend>> CreateMpiBackend(
    const BackendOptions& options);
// The ranks of MPI_COMM_WORLD for which `member` is true, as a world of
// their own (options.world gives this rank's place in it, in world-rank
// order). Every rank of the job must call it, members or not, because MPI
// splits a communicator collectively; non-members get a null backend.
StatusOr<std::unique_ptr<Backend>> CreateMpiSubBackend(
    const BackendOptions& options, bool member);
// All ranks must be on one host.
StatusOr<std::unique_ptr<Backend>> CreateShmBackend(
    const BackendOptions& options, std::shared_ptr<Store> store);
// Allreduce in three stages for jobs that span hosts (shm inside each host,
// `network` between one leader per host); the other collectives run flat
// over `network`. See hierarchical/hierarchical_backend.cc.
StatusOr<std::unique_ptr<Backend>> CreateHierarchicalBackend(
    const BackendOptions& options, std::shared_ptr<Store> store,
    const HostTopology& topology, BackendKind network);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_BACKEND_H_
