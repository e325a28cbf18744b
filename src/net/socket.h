// Socket: a TCP socket owned by value, with every blocking call bounded by a
// deadline. This and the shared-memory code are the only places in kolo that
// touch the operating system's transports.
//
// Why net/ and not transport/: the TCP store (store/) carries the rendezvous
// over this socket, and the transports (transport/) rendezvous through a
// store, so the socket has to sit below both. net/ depends on common/ only:
//   common <- net <- store <- transport <- collectives <- runtime
//
// Thread-safety: one thread at a time per Socket, except Shutdown(), which
// another thread may call to wake a blocked reader.
#ifndef KOLO_NET_SOCKET_H_
#define KOLO_NET_SOCKET_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "kolo/status.h"

namespace kolo {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}

// poll()'s timeout for a wait that ends at `deadline`: the milliseconds
// left, at least 0, rounded up so that a wait never ends just before its
// deadline and spins through a series of zero-timeout polls.
int PollTimeoutMs(Deadline deadline);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Listens on host:port; port 0 lets the OS choose (see LocalPort()).
  static StatusOr<Socket> Listen(const std::string& host, int port);
  // One connection attempt to host:port that gives up at `deadline`.
  static StatusOr<Socket> Connect(const std::string& host, int port,
                                  Deadline deadline);

  // Waits for a connection until `deadline`; kTimeout when none came.
  StatusOr<Socket> Accept(Deadline deadline);
  Status SendAll(const void* data, size_t size, Deadline deadline);
  // kPeerFailure when the peer closed before `size` bytes arrived.
  Status RecvAll(void* data, size_t size, Deadline deadline);

  int LocalPort() const;
  std::string PeerAddress() const;  // "127.0.0.1:54321"
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Shutdown();  // wakes blocked calls on other threads
  void Close();

 private:
  int fd_ = -1;
};

}  // namespace kolo

#endif  // KOLO_NET_SOCKET_H_
