// PeerLink: ordered, reliable frames between this rank and every other rank
// of a job, the wire under kolo's point-to-point transfers
// (collectives/point_to_point.h, which owns the protocol: matching, acks,
// errors). A link only moves frames; it knows nothing of tags or requests.
//
// A frame is a fixed header (FrameHeader, 48 bytes) followed by
// header.payload_bytes bytes of payload. Frames from one rank to another
// arrive in the order they were written, each exactly once.
//
// Two threads use a link at once, and only these two: the writer, which
// calls Write, and the reader, which calls Poll and ReadPayload. Neither
// may wait on the other: a Write blocks only until the peer's reader has
// made room, and that reader drains without writing. So two ranks that
// write to each other at once never deadlock.
//
// Engines: shm (an inbox of one ring per sender in each rank's segment),
// tcp (one connection per pair), gloo (a Gloo context of the link's own),
// mpi (a duplicate of MPI_COMM_WORLD). Each lives beside its engine under
// collectives/, and collectives/peer_links.h declares their factories.
#ifndef KOLO_TRANSPORT_PEER_LINK_H_
#define KOLO_TRANSPORT_PEER_LINK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kolo/options.h"
#include "kolo/status.h"
#include "store/store.h"

namespace kolo {

using LinkClock = std::chrono::steady_clock;

// The link reads only payload_bytes; the other fields are the protocol's.
struct FrameHeader {
  int32_t kind = 0;
  int32_t tag = 0;
  int32_t type = 0;
  int32_t result = 0;
  int64_t count = 0;
  uint64_t sequence = 0;
  int64_t payload_bytes = 0;
  int64_t reserved = 0;
};
static_assert(sizeof(FrameHeader) == 48, "FrameHeader is sent as raw bytes");

// The most payload one frame may carry: 1 TiB, more than any tensor a rank
// sends at once, and a bound on what a reader sizes for a header before it
// has seen a byte of the payload.
inline constexpr int64_t kMaxFramePayloadBytes = int64_t{1} << 40;

// What every engine's Write refuses before it touches its wire: a header
// whose payload_bytes is negative or over kMaxFramePayloadBytes.
// kInvalidArgument naming the engine (`link`: "tcp", "mpi link", ...), this
// rank and the peer.
Status CheckPayloadSize(const char* link, int32_t rank, int32_t peer,
                        const FrameHeader& header);

// What a reader checks of a frame from `peer` before it reads a byte of
// its payload or sizes a buffer for it: payload_bytes within the bounds
// above and equal to `expected`, the bytes the frame's own fields say it
// carries (-1: they describe no valid payload). kInvalidArgument naming
// `what` (the protocol and engine), both ranks, the tag, the bytes
// expected and got. The caller can no longer trust the peer's stream.
Status CheckArrivingPayload(const std::string& what, int32_t rank, int32_t peer,
                            const FrameHeader& header, int64_t expected);

// What every engine's ReadPayload checks before it takes a byte: that the
// caller reads exactly `frame_bytes`, the payload of the frame Poll last
// handed out from `peer` (-1 when there is none), so no read runs past a
// frame into the next or leaves part of one behind. kInvalidArgument
// naming the engine, both ranks and both lengths.
Status CheckReadSize(const char* link, int32_t rank, int32_t peer,
                     int64_t bytes, int64_t frame_bytes);

struct LinkEvent {
  enum class Kind {
    kNone,      // nothing arrived within the wait
    kFrame,     // `header` arrived from `peer`; its payload follows
    kPeerLost,  // `peer` (-1: not known which) is gone; `error` says how
  };
  Kind kind = Kind::kNone;
  int32_t peer = -1;
  FrameHeader header;
  Status error;
};

class PeerLink {
 public:
  virtual ~PeerLink() = default;

  // Writer thread. Sends `header` and then header.payload_bytes bytes of
  // `payload` to `peer`. Blocks while the peer's side cannot take more, at
  // most until `deadline` (kTimeout naming the peer); kPeerFailure naming
  // the peer when it is gone; kAborted after Abort.
  virtual Status Write(int32_t peer, const FrameHeader& header,
                       const void* payload, LinkClock::time_point deadline) = 0;

  // Reader thread. Waits up to `wait` for the next frame from any peer.
  // After a kFrame event the caller must read its payload with ReadPayload
  // before it polls again. After kPeerLost for a peer, no event comes from
  // it again. kNone as well after Abort.
  virtual LinkEvent Poll(std::chrono::milliseconds wait) = 0;

  // Reader thread. The payload of the frame Poll last returned from `peer`
  // (its header's payload_bytes) into `payload`; waits at most until
  // `deadline`.
  virtual Status ReadPayload(int32_t peer, void* payload, int64_t bytes,
                             LinkClock::time_point deadline) = 0;

  // Makes blocked and later calls of both threads return soon (Write with
  // kAborted, Poll with kNone). Any thread; for shutdown.
  virtual void Abort() = 0;

  // "shm", "tcp", "gloo" or "mpi": for errors and logs.
  virtual const char* engine() const = 0;
};

struct PeerLinkOptions {
  int32_t rank = 0;
  int32_t size = 1;
  // Bounds the link's setup; the waits of Write and ReadPayload have
  // deadlines of their own.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // The address this rank listens on (tcp, gloo).
  std::string hostname = "127.0.0.1";
  // The job's secret (KOLO_STORE_SECRET): the tcp link admits only ranks
  // that prove it (transport/tcp_mesh.h).
  std::string job_secret;
  // Bytes of each ring of a shm inbox: the most a sender has in flight to
  // one receiver. The segment is sparse: rings never written cost nothing.
  int64_t shm_ring_bytes = 1 << 20;
};

}  // namespace kolo

#endif  // KOLO_TRANSPORT_PEER_LINK_H_
