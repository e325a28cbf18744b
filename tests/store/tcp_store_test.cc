#include "store/tcp_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace kolo {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

std::unique_ptr<TcpStoreServer> StartServer() {
  StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start("127.0.0.1", 0, kSecret);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return std::move(server).value();
}

std::unique_ptr<TcpStoreClient> Connect(const TcpStoreServer& server, int32_t rank,
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
  ASSERT_TRUE(raw->SendAll(junk, sizeof(junk) - 1, DeadlineAfter(milliseconds(1000))).ok());
  char buffer[256];
  // The server answers with a refusal and closes; reading eventually ends.
  Status read = raw->RecvAll(buffer, sizeof(buffer), DeadlineAfter(milliseconds(5000)));
  EXPECT_EQ(read.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(server->rejected_connections(), 1);
}

TEST(TcpStoreTest, ClientThatVanishesIsRecordedAsFailed) {
  auto server = StartServer();
  auto survivor = Connect(*server, 0);
  auto doomed = Connect(*server, 3);
  ASSERT_TRUE(survivor && doomed);
  doomed.reset();  // closes the socket without a goodbye, like a killed process
  StatusOr<std::string> failed = survivor->Get(kFailedRanksKey, milliseconds(5000));
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
  EXPECT_THAT(client.status().message(), HasSubstr("127.0.0.1:" + std::to_string(port)));
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

}  // namespace
}  // namespace kolo
