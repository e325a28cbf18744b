// PointToPoint: the protocol behind kolo/point_to_point.h, over a PeerLink
// (transport/peer_link.h) of the job's engine.
//
// Frames. A send is one data frame: its header carries the tag, the type,
// the element count and the sender's sequence number for that peer, and the
// elements follow. The receiver answers every data frame with one ack frame
// (no payload) carrying the same sequence number and a verdict: taken, or
// refused because the matching receive expected another type or count (its
// own type and count ride along, so that both sides can name both).
//
// Threads. Two threads per process, started by its first transfer (a job
// that never uses point to point leaves its engine to the runtime):
//   - the writer ("kolo-p2p-write") writes queued frames, acks first (they
//     are small and a peer's send waits on them);
//   - the reader ("kolo-p2p-read") polls the link and handles each frame:
//     a data frame goes straight into the oldest posted receive from that
//     peer with that tag, or, when there is none, into memory as an
//     unexpected message that a later receive takes; an ack completes or
//     fails its send.
// The reader never waits on the writer or on a caller, so two ranks that
// send to each other before they receive both make progress.
//
// State. mutex_ guards the queues, the posted receives, the unexpected
// messages, the sends awaiting acks, each peer's sticky error, and every
// transfer's own progress fields; the reader and
// writer fill a caller's buffer only while that transfer is marked busy, so
// a Wait that times out cancels a transfer that is not busy at once and
// waits for a busy one to finish its (deadline-bounded) link call.
//
// Errors. A lost peer (the link's kPeerLost, or a failed Write) fails every
// transfer with that peer and every later one with the same status, named
// by the link (or, when the link cannot tell which peer it lost, through
// the job's failure news, collectives/peer_failure.h). Transfers
// with other peers carry on. Shutdown fails whatever is pending with
// kAborted.
#ifndef KOLO_COLLECTIVES_POINT_TO_POINT_H_
#define KOLO_COLLECTIVES_POINT_TO_POINT_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "kolo/options.h"
#include "kolo/point_to_point.h"
#include "kolo/status.h"
#include "store/store.h"
#include "transport/peer_link.h"

namespace kolo {

class PointToPoint {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t size = 1;
    // Every Wait without a timeout of its own, and every link call.
    std::chrono::milliseconds timeout = kDefaultTimeout;
    // The most bytes held for one peer's messages that no receive has
    // claimed yet. A frame that would pass it fails that peer, naming the
    // limit, instead of letting a peer's header size an allocation (MPI
    // bounds its unexpected-message buffers alike).
    int64_t max_unexpected_bytes = int64_t{1} << 30;
  };

  // Takes the link and starts the threads. `news` (may be null) names dead
  // ranks in errors.
  static StatusOr<std::unique_ptr<PointToPoint>> Start(
      const Options& options, std::unique_ptr<PeerLink> link,
      std::shared_ptr<Store> news);
  // Fails pending transfers with kAborted, aborts the link and joins.
  ~PointToPoint();

  // Checks the arguments (peer in range and not this rank, tag in range,
  // count >= 0, data non-null when count > 0) and posts the transfer.
  StatusOr<Request> Isend(const void* data, int64_t count, DataType type,
                          int32_t peer, int32_t tag);
  StatusOr<Request> Irecv(void* data, int64_t count, DataType type,
                          int32_t peer, int32_t tag);

  const char* engine() const;

  class Core;

 private:
  explicit PointToPoint(std::shared_ptr<Core> core);
  StatusOr<Request> Post(bool is_send, const void* send_data, void* recv_data,
                         int64_t count, DataType type, int32_t peer,
                         int32_t tag);
  std::shared_ptr<Core> core_;
};

// Builds the link for a job's engine: shm on one host, otherwise the
// network engine (tcp or gloo), or mpi. Collective over the world.
StatusOr<std::unique_ptr<PeerLink>> CreatePeerLinkFor(
    BackendKind backend, const PeerLinkOptions& options,
    std::shared_ptr<Store> store);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_POINT_TO_POINT_H_
