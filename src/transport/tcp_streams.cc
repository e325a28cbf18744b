#include "transport/tcp_streams.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "net/socket.h"

namespace kolo {

StatusOr<std::unique_ptr<TcpStreams>> TcpStreams::Create(
    std::vector<TcpMesh::Connection> connections) {
  const int abort_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (abort_fd < 0)
    return Internal(std::string("eventfd: ") + std::strerror(errno));
  return std::unique_ptr<TcpStreams>(
      new TcpStreams(std::move(connections), abort_fd));
}

TcpStreams::TcpStreams(std::vector<TcpMesh::Connection> connections,
                       int abort_fd)
    : connections_(std::move(connections)), abort_fd_(abort_fd) {}

TcpStreams::~TcpStreams() { ::close(abort_fd_); }

TcpStreams::Io TcpStreams::Send(int32_t peer, const iovec* parts,
                                size_t count) {
  Io io;
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(parts);
  message.msg_iovlen = count;
  while (true) {
    const ssize_t n = ::sendmsg(connections_[peer].socket.fd(), &message,
                                MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      io.bytes = static_cast<size_t>(n);
      return io;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      io.would_block = true;
    } else if (errno == EPIPE || errno == ECONNRESET) {
      io.ended = true;
    } else {
      io.error = errno;
    }
    return io;
  }
}

TcpStreams::Io TcpStreams::Receive(int32_t peer, void* data, size_t bytes) {
  Io io;
  while (true) {
    const ssize_t n =
        ::recv(connections_[peer].socket.fd(), data, bytes, MSG_DONTWAIT);
    if (n > 0) {
      io.bytes = static_cast<size_t>(n);
      return io;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      io.would_block = true;
    } else {
      io.ended = true;  // EOF, or the connection failed: either way gone
    }
    return io;
  }
}

TcpStreams::Wake TcpStreams::Await(const std::vector<int32_t>& peers,
                                   Direction direction, TimePoint deadline,
                                   std::vector<Ready>* ready, int* error) {
  const short events = direction == Direction::kIn
                           ? static_cast<short>(POLLIN)
                           : static_cast<short>(POLLOUT | POLLRDHUP);
  std::vector<pollfd> fds;
  fds.reserve(peers.size() + 1);
  for (int32_t peer : peers) {
    fds.push_back({connections_[peer].socket.fd(), events, 0});
  }
  fds.push_back({abort_fd_, POLLIN, 0});
  ready->clear();
  const int polled = ::poll(fds.data(), fds.size(), PollTimeoutMs(deadline));
  if (polled < 0 && errno != EINTR) {
    *error = errno;
    return Wake::kFailed;
  }
  if (fds.back().revents != 0) return Wake::kAborted;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (fds[i].revents == 0) continue;
    ready->push_back(
        {peers[i], (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0});
  }
  return ready->empty() ? Wake::kNothing : Wake::kReady;
}

void TcpStreams::Abort() {
  const uint64_t one = 1;
  // The eventfd stays readable: every later poll returns at once.
  const ssize_t written = ::write(abort_fd_, &one, sizeof(one));
  (void)written;
}

}  // namespace kolo
