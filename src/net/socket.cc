#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kolo {
namespace {

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Waits until fd is ready for `events` or the deadline passes.
Status PollFor(int fd, short events, Deadline deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) return Status::Ok();
    if (n == 0) return Timeout(std::string("timed out waiting to ") + what);
    if (errno != EINTR) return Internal(Errno(std::string("poll to ") + what));
  }
}

StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  // getaddrinfo takes the port as text and keeps its low 16 bits, so port
  // 70000 would quietly become 4464.
  if (port < 0 || port > 65535) {
    return InvalidArgument("port " + std::to_string(port) + " for host '" +
                           host + "' is out of range (0-65535)");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                         &hints, &result);
  if (rc != 0) {
    return InvalidArgument("cannot resolve host '" + host +
                           "': " + ::gai_strerror(rc));
  }
  return result;
}

void SetNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

}  // namespace

int PollTimeoutMs(Deadline deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

Socket::~Socket() { Close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

StatusOr<Socket> Socket::Listen(const std::string& host, int port) {
  KOLO_ASSIGN_OR_RETURN(addrinfo * addresses, Resolve(host, port, true));
  std::string last_error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    Socket s(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      last_error = Errno("socket");
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd_, a->ai_addr, a->ai_addrlen) != 0) {
      last_error = Errno("bind");
      continue;
    }
    if (::listen(s.fd_, 1024) != 0) {
      last_error = Errno("listen");
      continue;
    }
    SetNonBlocking(s.fd_);
    ::freeaddrinfo(addresses);
    return s;
  }
  ::freeaddrinfo(addresses);
  return Internal("cannot listen on " + host + ":" + std::to_string(port) +
                  ": " + last_error);
}

StatusOr<Socket> Socket::Connect(const std::string& host, int port,
                                 Deadline deadline) {
  KOLO_ASSIGN_OR_RETURN(addrinfo * addresses, Resolve(host, port, false));
  const std::string target = host + ":" + std::to_string(port);
  Status last = PeerFailure("cannot connect to " + target);
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    Socket s(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) continue;
    SetNonBlocking(s.fd_);
    int rc = ::connect(s.fd_, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last = PeerFailure(Errno("cannot connect to " + target));
      continue;
    }
    if (rc != 0) {
      Status ready = PollFor(s.fd_, POLLOUT, deadline, "connect");
      if (!ready.ok()) {
        last = ready.WithContext("connecting to " + target);
        continue;
      }
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        last = PeerFailure("cannot connect to " + target + ": " +
                           std::strerror(error));
        continue;
      }
    }
    int one = 1;
    ::setsockopt(s.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::freeaddrinfo(addresses);
    return s;
  }
  ::freeaddrinfo(addresses);
  return last;
}

StatusOr<Socket> Socket::Accept(Deadline deadline) {
  while (true) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Internal(Errno("accept"));
    KOLO_RETURN_IF_ERROR(PollFor(fd_, POLLIN, deadline, "accept a connection"));
  }
}

Status Socket::SendAll(const void* data, size_t size, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KOLO_RETURN_IF_ERROR(PollFor(fd_, POLLOUT, deadline, "send"));
      continue;
    }
    return PeerFailure(Errno("send to " + PeerAddress()));
  }
  return Status::Ok();
}

Status Socket::RecvAll(void* data, size_t size, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd_, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return PeerFailure("connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      KOLO_RETURN_IF_ERROR(PollFor(fd_, POLLIN, deadline, "receive"));
      continue;
    }
    return PeerFailure(Errno("receive"));
  }
  return Status::Ok();
}

int Socket::LocalPort() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return -1;
  }
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
}

std::string Socket::PeerAddress() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return "unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (address.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace kolo
