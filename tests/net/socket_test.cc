// Socket over loopback: every blocking call ends by its deadline, a closed
// or absent peer is kPeerFailure, and Shutdown() from another thread wakes
// a blocked reader. Ports are chosen by the OS (port 0).
#include "net/socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <numeric>
#include <regex>
#include <thread>
#include <vector>

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// A listener on an OS-chosen port, a client connected to it and the
// server's end of that connection.
struct Connection {
  Socket listener;
  Socket client;
  Socket server;
};

Connection Connect() {
  Connection c;
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  if (!listener.ok()) return c;
  c.listener = std::move(listener).value();
  StatusOr<Socket> client = Socket::Connect("127.0.0.1", c.listener.LocalPort(),
                                            DeadlineAfter(milliseconds(5000)));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) return c;
  c.client = std::move(client).value();
  StatusOr<Socket> server =
      c.listener.Accept(DeadlineAfter(milliseconds(5000)));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (server.ok()) c.server = std::move(server).value();
  return c;
}

TEST(SocketTest, ListensOnAPortTheSystemChose) {
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EXPECT_TRUE(listener->valid());
  EXPECT_GT(listener->LocalPort(), 0);
  EXPECT_LE(listener->LocalPort(), 65535);
}

// Larger than a loopback socket buffer, so both sides must take turns:
// SendAll and RecvAll loop over partial transfers.
TEST(SocketTest, MovesABufferLargerThanTheKernelsBothWays) {
  Connection c = Connect();
  ASSERT_TRUE(c.server.valid());
  constexpr size_t kBytes = 8 << 20;
  std::vector<uint8_t> sent(kBytes);
  for (size_t i = 0; i < kBytes; ++i)
    sent[i] = static_cast<uint8_t>(i * 7 + i / 251);
  auto sending = std::async(std::launch::async, [&] {
    return c.client.SendAll(sent.data(), sent.size(),
                            DeadlineAfter(milliseconds(20000)));
  });
  std::vector<uint8_t> received(kBytes);
  Status got = c.server.RecvAll(received.data(), received.size(),
                                DeadlineAfter(milliseconds(20000)));
  ASSERT_TRUE(got.ok()) << got.ToString();
  ASSERT_TRUE(sending.get().ok());
  EXPECT_TRUE(received == sent);

  // And back, from the accepted end.
  const char reply[] = "done";
  ASSERT_TRUE(
      c.server.SendAll(reply, sizeof(reply), DeadlineAfter(milliseconds(5000)))
          .ok());
  char echo[sizeof(reply)] = {};
  ASSERT_TRUE(
      c.client.RecvAll(echo, sizeof(echo), DeadlineAfter(milliseconds(5000)))
          .ok());
  EXPECT_STREQ(echo, "done");
}

TEST(SocketTest, PeerAddressNamesTheOtherEnd) {
  Connection c = Connect();
  ASSERT_TRUE(c.server.valid());
  EXPECT_EQ(c.client.PeerAddress(),
            "127.0.0.1:" + std::to_string(c.listener.LocalPort()));
  EXPECT_TRUE(std::regex_match(c.server.PeerAddress(),
                               std::regex(R"(127\.0\.0\.1:\d+)")))
      << c.server.PeerAddress();
  EXPECT_EQ(Socket().PeerAddress(), "unknown peer");
}

TEST(SocketTest, AcceptWithoutAClientTimesOutAtTheDeadline) {
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const auto start = Clock::now();
  StatusOr<Socket> none = listener->Accept(DeadlineAfter(milliseconds(100)));
  const auto waited = Clock::now() - start;
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(none.status().message(), HasSubstr("accept a connection"));
  EXPECT_GE(waited, milliseconds(90));
  EXPECT_LT(waited, milliseconds(5000));
}

TEST(SocketTest, ReceiveFromASilentPeerTimesOut) {
  Connection c = Connect();
  ASSERT_TRUE(c.server.valid());
  char byte = 0;
  Status status = c.server.RecvAll(&byte, 1, DeadlineAfter(milliseconds(100)));
  EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("receive"));
}

TEST(SocketTest, APeerThatClosesMidMessageIsAPeerFailure) {
  Connection c = Connect();
  ASSERT_TRUE(c.server.valid());
  ASSERT_TRUE(
      c.client.SendAll("abc", 3, DeadlineAfter(milliseconds(5000))).ok());
  c.client.Close();
  EXPECT_FALSE(c.client.valid());
  char buffer[8] = {};
  Status status = c.server.RecvAll(buffer, sizeof(buffer),
                                   DeadlineAfter(milliseconds(5000)));
  EXPECT_EQ(status.code(), StatusCode::kPeerFailure) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("connection closed by peer"));
  EXPECT_EQ(std::string(buffer, 3), "abc");  // what came before the close
}

TEST(SocketTest, SendingToAClosedPeerIsAPeerFailure) {
  Connection c = Connect();
  ASSERT_TRUE(c.server.valid());
  c.server.Close();
  // The first sends may still land in the kernel's buffer; keep sending
  // until the reset comes back.
  std::vector<char> chunk(1 << 16, 'x');
  Status status;
  for (int i = 0; i < 1000 && status.ok(); ++i) {
    status = c.client.SendAll(chunk.data(), chunk.size(),
                              DeadlineAfter(milliseconds(5000)));
  }
  EXPECT_EQ(status.code(), StatusCode::kPeerFailure) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("send to"));
}

TEST(SocketTest, ConnectingWhereNobodyListensIsAPeerFailureNamingTheTarget) {
  int port = 0;
  {
    StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok());
    port = listener->LocalPort();
  }  // closed: nobody listens there now
  StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", port, DeadlineAfter(milliseconds(2000)));
  ASSERT_FALSE(socket.ok());
  EXPECT_EQ(socket.status().code(), StatusCode::kPeerFailure)
      << socket.status().ToString();
  EXPECT_THAT(socket.status().message(),
              HasSubstr("127.0.0.1:" + std::to_string(port)));
}

// getaddrinfo keeps the low 16 bits of a port: 70000 must be refused, not
// turned into 4464.
TEST(SocketTest, APortOutOfRangeIsAnInvalidArgumentNamingIt) {
  for (int port : {70000, -1}) {
    StatusOr<Socket> listener = Socket::Listen("127.0.0.1", port);
    ASSERT_FALSE(listener.ok())
        << port << " listened on " << listener->LocalPort();
    EXPECT_EQ(listener.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(listener.status().message(),
                HasSubstr("port " + std::to_string(port) +
                          " for host '127.0.0.1' is out of range (0-65535)"));
    StatusOr<Socket> client =
        Socket::Connect("127.0.0.1", port, DeadlineAfter(milliseconds(100)));
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(SocketTest, ShutdownFromAnotherThreadWakesABlockedReader) {
  Connection c = Connect();
  ASSERT_TRUE(c.server.valid());
  auto reading = std::async(std::launch::async, [&] {
    char byte = 0;
    return c.server.RecvAll(&byte, 1, DeadlineAfter(milliseconds(20000)));
  });
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = Clock::now();
  c.server.Shutdown();
  ASSERT_EQ(reading.wait_for(std::chrono::seconds(5)),
            std::future_status::ready)
      << "the reader was not woken";
  EXPECT_EQ(reading.get().code(), StatusCode::kPeerFailure);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(SocketTest, MovingTransfersOwnershipOfTheDescriptor) {
  Connection c = Connect();
  ASSERT_TRUE(c.client.valid());
  const int fd = c.client.fd();
  Socket moved(std::move(c.client));
  EXPECT_FALSE(c.client.valid());  // NOLINT(bugprone-use-after-move): checking
                                   // the moved-from state
  EXPECT_EQ(moved.fd(), fd);
  Socket assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.fd(), fd);
  EXPECT_FALSE(moved.valid());  // NOLINT(bugprone-use-after-move)
  // Still the same connection.
  ASSERT_TRUE(assigned.SendAll("z", 1, DeadlineAfter(milliseconds(5000))).ok());
  char byte = 0;
  ASSERT_TRUE(
      c.server.RecvAll(&byte, 1, DeadlineAfter(milliseconds(5000))).ok());
  EXPECT_EQ(byte, 'z');
}

}  // namespace
}  // namespace kolo
