// What the fuzzers of kolo's network servers share: a client that reaches
// a server on 127.0.0.1 through a real socket, so that the fuzzed bytes
// travel the same path a peer's do and the server's own receiving code
// (its length checks, its deadlines) reads them.
#ifndef KOLO_FUZZ_LOOPBACK_H_
#define KOLO_FUZZ_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kolo::fuzz {

// Ends the fuzzer on a failure of the harness itself (not of the server
// under test), with the reason: such a run proves nothing.
[[noreturn]] inline void HarnessFailure(const char* what) {
  std::perror(what);
  std::abort();
}

// The server under test, started by `start` on first use and kept until
// the process exits: libFuzzer runs every input in one process, and a
// server per input would measure the server's start, not its parser.
template <typename Server, typename Start>
Server& StartedOnce(Start start) {
  static Server* server = [&] {
    auto started = start();
    if (!started.ok()) HarnessFailure("fuzz: start the server under test");
    return started->release();
  }();
  return *server;
}

// A connected socket to 127.0.0.1:`port`, closed when it goes out of scope.
class LoopbackClient {
 public:
  explicit LoopbackClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (fd_ < 0) HarnessFailure("fuzz: socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // Out of local ports: connections of earlier inputs still in TIME_WAIT
    // (the servers' own, which this harness cannot reset). Wait for them
    // rather than report the harness's limit as a finding.
    for (int tries = 0;; ++tries) {
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&address),
                    sizeof(address)) == 0) {
        break;
      }
      // libFuzzer's timers interrupt a connect, which then completes in
      // the background: wait for it rather than call the harness broken.
      if (errno == EINTR && FinishInterruptedConnect()) break;
      if (errno != EADDRNOTAVAIL || tries == 6000)
        HarnessFailure("fuzz: connect to the server under test");
      ::usleep(10000);
    }
  }
  // Whether a connect that a signal interrupted went through; errno is
  // the connect's error when it did not.
  bool FinishInterruptedConnect() {
    pollfd writable{fd_, POLLOUT, 0};
    int ready;
    do {
      ready = ::poll(&writable, 1, 10000);
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return false;
    int error = 0;
    socklen_t length = sizeof(error);
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0)
      return false;
    errno = error;
    return error == 0;
  }
  // Reset rather than close: a closed connection would leave its port in
  // TIME_WAIT for a minute, and a fuzzer makes thousands a second.
  ~LoopbackClient() {
    const linger reset{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    ::close(fd_);
  }
  LoopbackClient(const LoopbackClient&) = delete;
  LoopbackClient& operator=(const LoopbackClient&) = delete;

  // Sends everything; false once the server has closed the connection
  // (which it may do at any point of a malformed input).
  bool Send(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
      if (n <= 0) return false;
      p += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  bool Send(const std::string& bytes) {
    return Send(bytes.data(), bytes.size());
  }

  // Exactly `size` bytes; false when the connection ends first.
  bool Receive(void* data, size_t size) {
    char* p = static_cast<char*>(data);
    while (size > 0) {
      const ssize_t n = ::recv(fd_, p, size, 0);
      if (n <= 0) return false;
      p += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  // Tells the server nothing more is coming, then reads until it closes:
  // one input is done only when the server has finished with it. A server
  // that never closes is reported by libFuzzer's -timeout.
  void FinishAndDrain() {
    ::shutdown(fd_, SHUT_WR);
    char buffer[4096];
    while (::recv(fd_, buffer, sizeof(buffer), 0) > 0) {
    }
  }

 private:
  int fd_;
};

}  // namespace kolo::fuzz

#endif  // KOLO_FUZZ_LOOPBACK_H_
