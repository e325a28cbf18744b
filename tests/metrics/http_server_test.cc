// The exporter's HTTP server reads requests from anyone who can reach its
// port: the request head is bounded before it is kept, and a request line
// that is not one is answered 400, never trusted.
#include "metrics/http_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "net/socket.h"

namespace kolo {
namespace metrics {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
        "127.0.0.1", 0,
        [](const std::string& path) {
          return HttpResponse{200, "text/plain", "path " + path + "\n"};
        },
        nullptr, std::chrono::milliseconds(50));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  // Sends `request` and returns all the server answered before it closed.
  std::string Ask(const std::string& request) {
    const Deadline deadline = DeadlineAfter(std::chrono::seconds(5));
    StatusOr<Socket> socket =
        Socket::Connect("127.0.0.1", server_->port(), deadline);
    EXPECT_TRUE(socket.ok()) << socket.status().ToString();
    if (!socket.ok()) return "";
    // The server may close before it has read everything: ignore that.
    (void)socket->SendAll(request.data(), request.size(), deadline);
    std::string answer;
    char byte;
    while (socket->RecvAll(&byte, 1, deadline).ok()) answer += byte;
    return answer;
  }

  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AWellFormedRequestIsAnswered) {
  const std::string answer =
      Ask("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("path /metrics\n"), std::string::npos) << answer;
}

TEST_F(HttpServerTest, RequestLinesThatAreNotOneAre400Or405) {
  for (const char* line : {"GARBAGE", "GET", "GET /", "GET / FTP/1.0", " "}) {
    const std::string answer = Ask(std::string(line) + "\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << line << ": " << answer;
  }
  EXPECT_EQ(Ask("POST / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405 ", 0), 0u);
  // The server still serves after them.
  EXPECT_EQ(Ask("GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
}

// A head that never ends (a request line or headers past 16 KiB) is
// dropped without an answer, and the server serves the next client.
TEST_F(HttpServerTest, AnEndlessHeadIsDroppedUnanswered) {
  EXPECT_EQ(Ask("GET /" + std::string(64 * 1024, 'a')), "");
  EXPECT_EQ(Ask("GET / HTTP/1.1\r\nX: " + std::string(64 * 1024, 'b')), "");
  EXPECT_EQ(Ask("GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
}

}  // namespace
}  // namespace metrics
}  // namespace kolo
