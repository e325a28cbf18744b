// The tcp PeerLink: one TCP connection per pair of ranks, formed by TcpMesh
// (its token-admitted handshake, transport/tcp_mesh.h), each carrying the
// frames of both directions as one byte stream: a 48-byte header, then its
// payload.
//
// The writer and the reader share each socket, one sending, the other
// receiving, which a socket allows at once. Both use it non-blocking and
// sleep in poll: the writer on POLLOUT until its deadline, the reader on
// POLLIN of every peer at once. A header that arrives in pieces is kept
// between polls, so a slow peer never holds up the others. Abort writes an
// eventfd that every poll also waits on, and that stays readable.
//
// A connection that ends (EOF, reset) makes its peer lost: the reader
// reports it once, as kPeerLost, and the writer, which may not see the end
// itself (a send into a closed connection succeeds until the reset comes
// back), learns it from a flag the reader raises, or from POLLRDHUP.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "transport/peer_link.h"
#include "transport/tcp_mesh.h"

namespace kolo {
namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

class TcpPeerLink : public PeerLink {
 public:
  TcpPeerLink(int32_t rank, std::vector<TcpMesh::Connection> connections,
              int abort_fd)
      : rank_(rank),
        connections_(std::move(connections)),
        abort_fd_(abort_fd),
        peers_(connections_.size()) {}

  ~TcpPeerLink() override { ::close(abort_fd_); }

  Status Write(int32_t peer, const FrameHeader& header, const void* payload,
               LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "write to"));
    if (header.payload_bytes < 0) {
      return InvalidArgument("tcp: rank " + std::to_string(rank_) +
                             " cannot write a frame of " +
                             std::to_string(header.payload_bytes) +
                             " payload bytes to " + Describe(peer));
    }
    if (aborted_.load()) return AbortedError(peer);
    if (peers_[peer].lost.load(std::memory_order_acquire)) return Closed(peer);
    const int fd = connections_[peer].socket.fd();
    iovec parts[2] = {
        {const_cast<FrameHeader*>(&header), kHeaderBytes},
        {const_cast<void*>(payload), static_cast<size_t>(header.payload_bytes)},
    };
    size_t first = 0;
    const size_t count = header.payload_bytes > 0 ? 2 : 1;
    while (first < count) {
      msghdr message{};
      message.msg_iov = parts + first;
      message.msg_iovlen = count - first;
      const ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        size_t left = static_cast<size_t>(n);
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
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (errno == EPIPE || errno == ECONNRESET) return Closed(peer);
        return PeerFailure("tcp: sending to " + Describe(peer) +
                           " failed: " + std::strerror(errno));
      }
      // Full: wait for room, the end of the connection, or Abort.
      pollfd fds[2] = {{fd, POLLOUT | POLLRDHUP, 0}, {abort_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, 2, PollTimeoutMs(deadline));
      if (ready < 0 && errno != EINTR) {
        return Internal("tcp: poll while writing to " + Describe(peer) + ": " +
                        std::strerror(errno));
      }
      if (fds[1].revents != 0) return AbortedError(peer);
      if ((fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
        return Closed(peer);
      if (ready == 0 && LinkClock::now() >= deadline) {
        return Timeout("tcp: " + Describe(peer) + " took no more of a frame (" +
                       std::to_string(header.payload_bytes) +
                       " payload bytes) before the deadline");
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
      std::vector<pollfd> fds;
      std::vector<int32_t> ranks;
      for (int32_t k = 0; k < size; ++k) {
        const int32_t p = (next_ + k) % size;
        if (p == rank_ || peers_[p].state != State::kOpen) continue;
        fds.push_back({connections_[p].socket.fd(), POLLIN, 0});
        ranks.push_back(p);
      }
      fds.push_back({abort_fd_, POLLIN, 0});
      const int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs(until));
      if (ready < 0 && errno != EINTR) {
        LinkEvent event;
        event.kind = LinkEvent::Kind::kPeerLost;
        event.error =
            Internal("tcp: rank " + std::to_string(rank_) +
                     " cannot poll its peers: " + std::strerror(errno));
        return event;
      }
      if (fds.back().revents != 0) break;
      // In rotation from next_, so a busy peer does not starve the others.
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const int32_t p = ranks[i];
        if (ReadHeader(p)) {
          next_ = (p + 1) % size;
          if (peers_[p].state == State::kGone) return Lost(p);
          LinkEvent event;
          event.kind = LinkEvent::Kind::kFrame;
          event.peer = p;
          std::memcpy(&event.header, peers_[p].header, kHeaderBytes);
          peers_[p].header_got = 0;
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
    const int fd = connections_[peer].socket.fd();
    char* out = static_cast<char*>(payload);
    int64_t got = 0;
    while (got < bytes) {
      if (aborted_.load()) return AbortedError(peer);
      if (peers_[peer].state != State::kOpen) return Closed(peer);
      const ssize_t n =
          ::recv(fd, out + got, static_cast<size_t>(bytes - got), MSG_DONTWAIT);
      if (n > 0) {
        got += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        MarkGone(peer);
        return Closed(peer);
      }
      pollfd fds[2] = {{fd, POLLIN, 0}, {abort_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, 2, PollTimeoutMs(deadline));
      if (ready < 0 && errno != EINTR) {
        return Internal("tcp: poll while reading from " + Describe(peer) +
                        ": " + std::strerror(errno));
      }
      if (ready == 0 && LinkClock::now() >= deadline) {
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
    const uint64_t one = 1;
    // The eventfd stays readable: every later poll returns at once.
    ssize_t written = ::write(abort_fd_, &one, sizeof(one));
    (void)written;
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
  };

  std::string Describe(int32_t peer) const {
    return "rank " + std::to_string(peer) + " (" + connections_[peer].address +
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
      const ssize_t n = ::recv(connections_[peer].socket.fd(),
                               state.header + state.header_got,
                               kHeaderBytes - state.header_got, MSG_DONTWAIT);
      if (n > 0) {
        state.header_got += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      MarkGone(peer);
      return true;
    }
    return true;
  }

  const int32_t rank_;
  const std::vector<TcpMesh::Connection> connections_;
  const int abort_fd_;
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
  StatusOr<std::unique_ptr<TcpMesh>> mesh =
      TcpMesh::Connect(mesh_options, store);
  if (!mesh.ok()) {
    return mesh.status().WithContext("tcp link of rank " +
                                     std::to_string(options.rank));
  }
  const int abort_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (abort_fd < 0) {
    return Internal("tcp link of rank " + std::to_string(options.rank) +
                    ": eventfd: " + std::strerror(errno));
  }
  return std::unique_ptr<PeerLink>(
      new TcpPeerLink(options.rank, (*mesh)->ReleaseConnections(), abort_fd));
}

}  // namespace kolo
