// The tcp PeerLink: one TCP connection per pair of ranks, formed by TcpMesh
// (its token-admitted handshake, transport/tcp_mesh.h), each carrying the
// frames of both directions as one byte stream: a 48-byte header, then its
// payload.
//
// The writer and the reader share each connection, one sending, the other
// receiving, through TcpStreams (transport/tcp_streams.h), which keeps the
// sockets in transport/: both move what the socket takes now and sleep in
// its Await, the writer for room until its deadline, the reader for data
// from every peer at once. A header that arrives in pieces is kept between
// polls, so a slow peer never holds up the others. Abort wakes every wait.
//
// A connection that ends (EOF, reset) makes its peer lost: the reader
// reports it once, as kPeerLost, and the writer, which may not see the end
// itself (a send into a closed connection succeeds until the reset comes
// back), learns it from a flag the reader raises, or from the wait that
// watches for the peer's end.
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "collectives/peer_links.h"
#include "transport/peer_link.h"
#include "transport/tcp_mesh.h"
#include "transport/tcp_streams.h"

namespace kolo {
namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

class TcpPeerLink : public PeerLink {
 public:
  TcpPeerLink(int32_t rank, std::unique_ptr<TcpStreams> streams)
      : rank_(rank), streams_(std::move(streams)), peers_(streams_->size()) {}

  Status Write(int32_t peer, const FrameHeader& header, const void* payload,
               LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "write to"));
    KOLO_RETURN_IF_ERROR(CheckPayloadSize("tcp", rank_, peer, header));
    if (aborted_.load()) return AbortedError(peer);
    if (peers_[peer].lost.load(std::memory_order_acquire)) return Closed(peer);
    iovec parts[2] = {
        {const_cast<FrameHeader*>(&header), kHeaderBytes},
        {const_cast<void*>(payload), static_cast<size_t>(header.payload_bytes)},
    };
    size_t first = 0;
    const size_t count = header.payload_bytes > 0 ? 2 : 1;
    std::vector<TcpStreams::Ready> ready;
    while (first < count) {
      const TcpStreams::Io io =
          streams_->Send(peer, parts + first, count - first);
      if (io.ended) return Closed(peer);
      if (io.error != 0) {
        return PeerFailure("tcp: sending to " + Describe(peer) +
                           " failed: " + std::strerror(io.error));
      }
      if (!io.would_block) {
        size_t left = io.bytes;
        while (first < count && left >= parts[first].iov_len) {
          left -= parts[first].iov_len;
          ++first;
        }
        if (first < count) {
          parts[first].iov_base = static_cast<char*>(parts[first].iov_base) +
                                  static_cast<ptrdiff_t>(left);
          parts[first].iov_len -= left;
        }
        continue;
      }
      // Full: wait for room, the end of the connection, or Abort.
      int error = 0;
      switch (streams_->Await({peer}, TcpStreams::Direction::kOut, deadline,
                              &ready, &error)) {
        case TcpStreams::Wake::kFailed:
          return Internal("tcp: poll while writing to " + Describe(peer) +
                          ": " + std::strerror(error));
        case TcpStreams::Wake::kAborted: return AbortedError(peer);
        case TcpStreams::Wake::kReady:
          if (ready.front().ended) return Closed(peer);
          break;
        case TcpStreams::Wake::kNothing:
          if (LinkClock::now() >= deadline) {
            return Timeout("tcp: " + Describe(peer) +
                           " took no more of a frame (" +
                           std::to_string(header.payload_bytes) +
                           " payload bytes) before the deadline");
          }
          break;
      }
    }
    return Status::Ok();
  }

  LinkEvent Poll(std::chrono::milliseconds wait) override {
    const LinkClock::time_point until = LinkClock::now() + wait;
    const int32_t size = static_cast<int32_t>(peers_.size());
    while (!aborted_.load()) {
      // A loss ReadPayload found is reported here, once.
      for (int32_t p = 0; p < size; ++p) {
        if (peers_[p].state == State::kGone) return Lost(p);
      }
      std::vector<int32_t> open;
      for (int32_t k = 0; k < size; ++k) {
        const int32_t p = (next_ + k) % size;
        if (p == rank_ || peers_[p].state != State::kOpen) continue;
        open.push_back(p);
      }
      std::vector<TcpStreams::Ready> ready;
      int error = 0;
      const TcpStreams::Wake wake = streams_->Await(
          open, TcpStreams::Direction::kIn, until, &ready, &error);
      if (wake == TcpStreams::Wake::kFailed) {
        LinkEvent event;
        event.kind = LinkEvent::Kind::kPeerLost;
        event.error =
            Internal("tcp: rank " + std::to_string(rank_) +
                     " cannot poll its peers: " + std::strerror(error));
        return event;
      }
      if (wake == TcpStreams::Wake::kAborted) break;
      // In rotation from next_, so a busy peer does not starve the others.
      for (const TcpStreams::Ready& r : ready) {
        const int32_t p = r.peer;
        if (ReadHeader(p)) {
          next_ = (p + 1) % size;
          if (peers_[p].state == State::kGone) return Lost(p);
          LinkEvent event;
          event.kind = LinkEvent::Kind::kFrame;
          event.peer = p;
          std::memcpy(&event.header, peers_[p].header, kHeaderBytes);
          peers_[p].header_got = 0;
          peers_[p].payload_bytes = event.header.payload_bytes;
          return event;
        }
      }
      if (LinkClock::now() >= until) break;
    }
    return LinkEvent();
  }

  Status ReadPayload(int32_t peer, void* payload, int64_t bytes,
                     LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "read from"));
    KOLO_RETURN_IF_ERROR(
        CheckReadSize("tcp", rank_, peer, bytes, peers_[peer].payload_bytes));
    peers_[peer].payload_bytes = -1;
    char* out = static_cast<char*>(payload);
    int64_t got = 0;
    std::vector<TcpStreams::Ready> ready;
    while (got < bytes) {
      if (aborted_.load()) return AbortedError(peer);
      if (peers_[peer].state != State::kOpen) return Closed(peer);
      const TcpStreams::Io io =
          streams_->Receive(peer, out + got, static_cast<size_t>(bytes - got));
      if (io.bytes > 0) {
        got += static_cast<int64_t>(io.bytes);
        continue;
      }
      if (!io.would_block) {
        MarkGone(peer);
        return Closed(peer);
      }
      int error = 0;
      const TcpStreams::Wake wake = streams_->Await(
          {peer}, TcpStreams::Direction::kIn, deadline, &ready, &error);
      if (wake == TcpStreams::Wake::kFailed) {
        return Internal("tcp: poll while reading from " + Describe(peer) +
                        ": " + std::strerror(error));
      }
      if (wake == TcpStreams::Wake::kNothing && LinkClock::now() >= deadline) {
        return Timeout("tcp: " + Describe(peer) + " sent " +
                       std::to_string(got) + " of the " +
                       std::to_string(bytes) +
                       " payload bytes of its frame before the deadline");
      }
    }
    return Status::Ok();
  }

  void Abort() override {
    aborted_.store(true);
    streams_->Abort();
  }

  const char* engine() const override { return "tcp"; }

 private:
  // The reader's view of a peer; `lost` is the one field the writer reads.
  enum class State {
    kOpen,
    kGone,      // the connection ended; Poll has not said so yet
    kReported,  // Poll returned kPeerLost
  };
  struct PeerState {
    State state = State::kOpen;
    std::atomic<bool> lost{false};
    char header[kHeaderBytes] = {};
    size_t header_got = 0;
    int64_t payload_bytes = -1;  // of the frame Poll handed out
  };

  std::string Describe(int32_t peer) const {
    return "rank " + std::to_string(peer) + " (" + streams_->address(peer) +
           ")";
  }

  Status CheckPeer(int32_t peer, const char* what) const {
    if (peer >= 0 && peer < static_cast<int32_t>(peers_.size()) &&
        peer != rank_) {
      return Status::Ok();
    }
    return InvalidArgument("tcp: rank " + std::to_string(rank_) + " cannot " +
                           what + " rank " + std::to_string(peer) + " of " +
                           std::to_string(peers_.size()));
  }

  Status Closed(int32_t peer) const {
    return PeerFailure("tcp: " + Describe(peer) +
                       " closed its connection to rank " +
                       std::to_string(rank_));
  }

  Status AbortedError(int32_t peer) const {
    return Aborted("tcp: rank " + std::to_string(rank_) +
                   "'s link was aborted during a transfer with " +
                   Describe(peer));
  }

  void MarkGone(int32_t peer) {
    peers_[peer].state = State::kGone;
    peers_[peer].lost.store(true, std::memory_order_release);
  }

  LinkEvent Lost(int32_t peer) {
    peers_[peer].state = State::kReported;
    LinkEvent event;
    event.kind = LinkEvent::Kind::kPeerLost;
    event.peer = peer;
    event.error = Closed(peer);
    return event;
  }

  // Reads what has arrived of `peer`'s next header; true when it is
  // complete or the connection ended (then the peer is kGone).
  bool ReadHeader(int32_t peer) {
    PeerState& state = peers_[peer];
    while (state.header_got < kHeaderBytes) {
      const TcpStreams::Io io =
          streams_->Receive(peer, state.header + state.header_got,
                            kHeaderBytes - state.header_got);
      if (io.bytes > 0) {
        state.header_got += io.bytes;
        continue;
      }
      if (io.would_block) return false;
      MarkGone(peer);
      return true;
    }
    return true;
  }

  const int32_t rank_;
  const std::unique_ptr<TcpStreams> streams_;
  std::atomic<bool> aborted_{false};
  std::vector<PeerState> peers_;  // indexed by rank; fields but `lost`: reader
  int32_t next_ = 0;              // reader: where the next scan starts
};

}  // namespace

StatusOr<std::unique_ptr<PeerLink>> CreateTcpPeerLink(
    const PeerLinkOptions& options, Store* store) {
  TcpMesh::Options mesh_options;
  mesh_options.rank = options.rank;
  mesh_options.size = options.size;
  mesh_options.hostname = options.hostname;
  mesh_options.timeout = options.timeout;
  mesh_options.job_secret = options.job_secret;
  StatusOr<std::unique_ptr<TcpMesh>> mesh =
      TcpMesh::Connect(mesh_options, store);
  if (!mesh.ok()) {
    return mesh.status().WithContext("tcp link of rank " +
                                     std::to_string(options.rank));
  }
  StatusOr<std::unique_ptr<TcpStreams>> streams =
      TcpStreams::Create((*mesh)->ReleaseConnections());
  if (!streams.ok()) {
    return streams.status().WithContext("tcp link of rank " +
                                        std::to_string(options.rank));
  }
  return std::unique_ptr<PeerLink>(
      new TcpPeerLink(options.rank, *std::move(streams)));
}

}  // namespace kolo
