// One HTTP request to a server on loopback, for the tests of kolo's metrics
// endpoint (which closes the connection after each answer). Header-only,
// so that any test target with kolo_core can use it.
//
//   std::string body = kolo::testing::HttpGet(port, "/metrics");
#ifndef KOLO_TESTS_TESTING_HTTP_GET_H_
#define KOLO_TESTS_TESTING_HTTP_GET_H_

#include <chrono>
#include <string>

#include "net/socket.h"

namespace kolo::testing {

struct HttpReply {
  bool sent = false;  // connected and sent the request
  std::string head;   // status line and headers (all of it without a body)
  std::string body;
};

// `method` `path` to http://127.0.0.1:`port`; what came back within
// `timeout`.
inline HttpReply HttpRequest(
    int port, const std::string& method, const std::string& path,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  HttpReply reply;
  const Deadline deadline = DeadlineAfter(timeout);
  StatusOr<Socket> socket = Socket::Connect("127.0.0.1", port, deadline);
  if (!socket.ok()) return reply;
  const std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  if (!socket->SendAll(request.data(), request.size(), deadline).ok()) {
    return reply;
  }
  reply.sent = true;
  std::string bytes;
  char c;
  while (socket->RecvAll(&c, 1, deadline).ok()) bytes += c;
  const size_t split = bytes.find("\r\n\r\n");
  if (split == std::string::npos) {
    reply.head = bytes;
  } else {
    reply.head = bytes.substr(0, split);
    reply.body = bytes.substr(split + 4);
  }
  return reply;
}

// The body of GET `path`; "" when there is none.
inline std::string HttpGet(
    int port, const std::string& path,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  return HttpRequest(port, "GET", path, timeout).body;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_HTTP_GET_H_
