// TcpStreams: the connections of a TcpMesh (transport/tcp_mesh.h) used as
// byte streams without blocking, by two threads at once: one sends, the
// other receives, which a socket allows. A caller moves what the sockets
// take now (Send, Receive) and otherwise sleeps in Await, which also wakes
// when Abort is called: Abort raises an eventfd that every Await watches
// and that stays raised. The tcp PeerLink (collectives/tcp/) frames its
// messages on top; this class is where it touches the sockets, so that
// sockets stay inside net/ and transport/.
//
// Thread-safety: Send and Receive on different threads at once; Await by
// either; Abort from any thread.
#ifndef KOLO_TRANSPORT_TCP_STREAMS_H_
#define KOLO_TRANSPORT_TCP_STREAMS_H_

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "transport/tcp_mesh.h"

namespace kolo {

class TcpStreams {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `connections` indexed by rank (the own one empty).
  static StatusOr<std::unique_ptr<TcpStreams>> Create(
      std::vector<TcpMesh::Connection> connections);
  ~TcpStreams();
  TcpStreams(const TcpStreams&) = delete;
  TcpStreams& operator=(const TcpStreams&) = delete;

  // What one non-blocking send or receive did.
  struct Io {
    size_t bytes = 0;          // moved
    bool would_block = false;  // the socket has no room or no data now
    bool ended = false;        // EOF, reset or broken pipe: the peer is gone
    int error = 0;             // any other errno
  };
  // One sendmsg of `parts` to `peer` (retried on EINTR).
  Io Send(int32_t peer, const iovec* parts, size_t count);
  // One recv of at most `bytes` from `peer` (retried on EINTR).
  Io Receive(int32_t peer, void* data, size_t bytes);

  enum class Direction { kIn, kOut };
  enum class Wake {
    kReady,    // some of the peers in `ready`
    kAborted,  // Abort was called (whatever the peers did)
    kNothing,  // no event; the deadline may have passed
    kFailed,   // poll failed; `error` holds errno
  };
  struct Ready {
    int32_t peer;
    // Hung up, reset or failed. For kOut the wait watches for the peer's
    // end too, because a send into a closed connection succeeds until the
    // reset comes back.
    bool ended;
  };
  // Waits until one of `peers` can be read (kIn) or written (kOut), Abort,
  // or `deadline`. `ready` receives the peers with an event, in order.
  Wake Await(const std::vector<int32_t>& peers, Direction direction,
             TimePoint deadline, std::vector<Ready>* ready, int* error);

  // Wakes every Await now and later.
  void Abort();

  int32_t size() const { return static_cast<int32_t>(connections_.size()); }
  // "10.1.0.2:41234", for errors.
  const std::string& address(int32_t peer) const {
    return connections_[peer].address;
  }

 private:
  TcpStreams(std::vector<TcpMesh::Connection> connections, int abort_fd);

  const std::vector<TcpMesh::Connection> connections_;
  const int abort_fd_;
};

}  // namespace kolo

#endif  // KOLO_TRANSPORT_TCP_STREAMS_H_
