#include "store/tcp_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

std::unique_ptr<TcpStoreServer> StartServer() {
  StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start("127.0.0.1", 0, kSecret);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return std::move(server).value();
}

std::unique_ptr<TcpStoreClient> Connect(const TcpStoreServer& server,
                                        int32_t rank,
                                        const std::string& secret = kSecret) {
  StatusOr<std::unique_ptr<TcpStoreClient>> client = TcpStoreClient::Connect(
      "127.0.0.1", server.port(), secret, rank, milliseconds(5000));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

TEST(TcpStoreTest, SetGetAddWaitAcrossClients) {
  auto server = StartServer();
  EXPECT_GT(server->port(), 0);
  auto a = Connect(*server, 0);
  auto b = Connect(*server, 1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Set("key", std::string("bin\0ary", 7)).ok());
  EXPECT_EQ(*b->Get("key", milliseconds(100)), std::string("bin\0ary", 7));
  EXPECT_EQ(*a->Add("counter", 2), 2);
  EXPECT_EQ(*b->Add("counter", 3), 5);
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(50));
    (void)a->Set("later", "x");
  });
  EXPECT_TRUE(b->Wait({"key", "later"}, milliseconds(5000)).ok());
  later.join();
  Status timeout = b->Wait({"missing"}, milliseconds(50));
  EXPECT_EQ(timeout.code(), StatusCode::kTimeout);
  EXPECT_THAT(timeout.message(), HasSubstr("'missing'"));
  EXPECT_TRUE(a->Close().ok());
  EXPECT_TRUE(b->Close().ok());
  EXPECT_TRUE(server->FailedRanks().empty());
}

TEST(TcpStoreTest, WrongSecretIsRejected) {
  auto server = StartServer();
  StatusOr<std::unique_ptr<TcpStoreClient>> intruder = TcpStoreClient::Connect(
      "127.0.0.1", server->port(), "not-the-secret", 0, milliseconds(5000));
  ASSERT_FALSE(intruder.ok());
  EXPECT_EQ(intruder.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(intruder.status().message(), HasSubstr("wrong job secret"));
  EXPECT_EQ(server->rejected_connections(), 1);
  // The server keeps serving honest clients.
  auto honest = Connect(*server, 0);
  ASSERT_TRUE(honest);
  EXPECT_TRUE(honest->Set("k", "v").ok());
}

TEST(TcpStoreTest, GarbageConnectionIsRejected) {
  auto server = StartServer();
  StatusOr<Socket> raw = Socket::Connect("127.0.0.1", server->port(),
                                         DeadlineAfter(milliseconds(2000)));
  ASSERT_TRUE(raw.ok());
  const char junk[] = "\x05\x00\x00\x00GET /";
  ASSERT_TRUE(
      raw->SendAll(junk, sizeof(junk) - 1, DeadlineAfter(milliseconds(1000)))
          .ok());
  char buffer[256];
  // The server answers with a refusal and closes; reading eventually ends.
  Status read =
      raw->RecvAll(buffer, sizeof(buffer), DeadlineAfter(milliseconds(5000)));
  EXPECT_EQ(read.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(server->rejected_connections(), 1);
}

TEST(TcpStoreTest, ClientThatVanishesIsRecordedAsFailed) {
  auto server = StartServer();
  auto survivor = Connect(*server, 0);
  auto doomed = Connect(*server, 3);
  ASSERT_TRUE(survivor && doomed);
  doomed.reset();  // closes the socket without a goodbye, like a killed process
  StatusOr<std::string> failed =
      survivor->Get(kFailedRanksKey, milliseconds(5000));
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(*failed, "3");
  EXPECT_EQ(server->FailedRanks(), std::vector<int32_t>{3});
}

TEST(TcpStoreTest, ConnectWaitsForALateServerThenTimesOut) {
  // Reserve a port, free it, and connect to it with nobody listening.
  int port = 0;
  {
    StatusOr<Socket> probe = Socket::Listen("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = probe->LocalPort();
  }
  const auto start = Clock::now();
  StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", port, kSecret, 0, milliseconds(300));
  EXPECT_EQ(client.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(client.status().message(),
              HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(TcpStoreTest, ServerStopWakesBlockedClients) {
  auto server = StartServer();
  auto client = Connect(*server, 0);
  ASSERT_TRUE(client);
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(50));
    server->Stop();
  });
  StatusOr<std::string> value = client->Get("never", milliseconds(20000));
  stopper.join();
  EXPECT_FALSE(value.ok());
}

// A client speaking the wire format by hand (tcp_store.h): a 4-byte
// length and a body of fields, a string being a 4-byte length and bytes.
class RawClient {
 public:
  explicit RawClient(Socket socket) : socket_(std::move(socket)) {}

  static std::string U8(uint8_t v) {
    return std::string(1, static_cast<char>(v));
  }
  static std::string I64(int64_t v) {
    return std::string(reinterpret_cast<char*>(&v), 8);
  }
  static std::string Str(const std::string& text) {
    uint32_t n = static_cast<uint32_t>(text.size());
    return std::string(reinterpret_cast<char*>(&n), 4) + text;
  }

  // Sends one message and returns the answer's status (code and message).
  Status Ask(const std::string& body) {
    uint32_t length = static_cast<uint32_t>(body.size());
    const Deadline deadline = DeadlineAfter(milliseconds(5000));
    KOLO_RETURN_IF_ERROR(socket_.SendAll(&length, 4, deadline));
    KOLO_RETURN_IF_ERROR(socket_.SendAll(body.data(), body.size(), deadline));
    KOLO_RETURN_IF_ERROR(socket_.RecvAll(&length, 4, deadline));
    std::string answer(length, '\0');
    KOLO_RETURN_IF_ERROR(socket_.RecvAll(answer.data(), length, deadline));
    uint32_t message_length = 0;
    std::memcpy(&message_length, answer.data() + 1, 4);
    return Status(static_cast<StatusCode>(answer[0]),
                  answer.substr(5, message_length));
  }

  Status Hello(const std::string& secret, int64_t rank) {
    return Ask(U8(1) + Str("KOLO-STORE-1") + Str(secret) + I64(rank));
  }

 private:
  Socket socket_;
};

RawClient ConnectRaw(const TcpStoreServer& server) {
  StatusOr<Socket> socket = Socket::Connect("127.0.0.1", server.port(),
                                            DeadlineAfter(milliseconds(2000)));
  EXPECT_TRUE(socket.ok()) << socket.status().ToString();
  return RawClient(socket.ok() ? std::move(socket).value() : Socket());
}

// Each bad request gets its own answer, and the connection carries on.
TEST(TcpStoreTest,
     MalformedAndUnknownRequestsAreAnsweredAndTheConnectionStays) {
  auto server = StartServer();
  RawClient raw = ConnectRaw(*server);
  ASSERT_TRUE(raw.Hello(kSecret, 0).ok());

  Status unknown = raw.Ask(RawClient::U8(99));
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "unknown store command");

  Status empty = raw.Ask("");
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.message(), "unknown store command");

  // A set whose value is cut short, a get without its timeout, an add
  // without its delta, a wait that announces more keys than it carries.
  const struct {
    std::string body;
    const char* message;
  } malformed[] = {
      {RawClient::U8(2) + RawClient::Str("k") + std::string("\x09\0\0\0ab", 6),
       "malformed set"},
      {RawClient::U8(3) + RawClient::Str("k"), "malformed get"},
      {RawClient::U8(4) + RawClient::Str("k"), "malformed add"},
      {RawClient::U8(5) + RawClient::I64(3) + RawClient::Str("k"),
       "malformed wait"},
  };
  for (const auto& m : malformed) {
    Status s = raw.Ask(m.body);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << m.message;
    EXPECT_EQ(s.message(), m.message);
  }

  // Still served: a well-formed set and a goodbye.
  EXPECT_TRUE(
      raw.Ask(RawClient::U8(2) + RawClient::Str("k") + RawClient::Str("v"))
          .ok());
  auto reader = Connect(*server, 1);
  ASSERT_TRUE(reader);
  EXPECT_EQ(*reader->Get("k", milliseconds(1000)), "v");
  EXPECT_TRUE(raw.Ask(RawClient::U8(6)).ok());
  EXPECT_EQ(server->rejected_connections(), 0);
}

// Only ranks are reported when they vanish: a client that said -1 (a tool,
// not a rank) and a rank that said goodbye are not failures.
TEST(TcpStoreTest, OnlyARankThatVanishesWithoutAGoodbyeIsAFailure) {
  auto server = StartServer();
  auto observer = Connect(*server, -1);
  auto polite = Connect(*server, 2);
  ASSERT_TRUE(observer && polite);
  EXPECT_TRUE(polite->Close().ok());
  observer.reset();
  auto doomed = Connect(*server, 5);
  ASSERT_TRUE(doomed);
  doomed.reset();
  auto survivor = Connect(*server, 0);
  ASSERT_TRUE(survivor);
  StatusOr<std::string> failed =
      survivor->Get(kFailedRanksKey, milliseconds(5000));
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(*failed, "5");
  EXPECT_EQ(server->FailedRanks(), std::vector<int32_t>{5});
}

// A hello with the right secret but the wrong magic is refused like a
// wrong secret: counted, answered kUnauthenticated, closed.
TEST(TcpStoreTest, AHelloWithTheWrongMagicIsRefused) {
  auto server = StartServer();
  RawClient raw = ConnectRaw(*server);
  Status s = raw.Ask(RawClient::U8(1) + RawClient::Str("OTHER-STORE-9") +
                     RawClient::Str(kSecret) + RawClient::I64(0));
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("malformed hello from 127.0.0.1:"));
  EXPECT_EQ(server->rejected_connections(), 1);
}

}  // namespace
}  // namespace kolo
