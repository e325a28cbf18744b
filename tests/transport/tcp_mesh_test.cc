// TcpMesh with ranks as threads over a MemoryStore, on loopback: the mesh
// forms despite stray connections, which are refused and counted; transfers
// are full-duplex; a rank that never comes, a silent peer and a closed one
// give errors that name them, within the timeout.
#include "transport/tcp_mesh.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "store/memory_store.h"
#include "testing/timing.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TcpMesh::Options OptionsFor(int32_t rank, int32_t size,
                            std::chrono::milliseconds timeout) {
  TcpMesh::Options options;
  options.rank = rank;
  options.size = size;
  options.timeout = timeout;
  return options;
}

// Forms a mesh of `size` ranks as threads; the results in rank order.
std::vector<StatusOr<std::unique_ptr<TcpMesh>>> FormMesh(
    int32_t size, Store* store,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  std::vector<std::future<StatusOr<std::unique_ptr<TcpMesh>>>> pending;
  for (int32_t r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      return TcpMesh::Connect(OptionsFor(r, size, timeout), store);
    }));
  }
  std::vector<StatusOr<std::unique_ptr<TcpMesh>>> meshes;
  for (auto& p : pending) meshes.push_back(p.get());
  return meshes;
}

// Every ordered pair (i, j) can send i*100+j to j: each rank sends to rank
// r+k and receives from r-k in round k.
TEST(TcpMeshTest, EveryPairIsConnected) {
  constexpr int32_t kRanks = 4;
  MemoryStore store;
  auto meshes = FormMesh(kRanks, &store);
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kRanks);
  for (int32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (int32_t k = 1; k < kRanks; ++k) {
        const int32_t to = (r + k) % kRanks, from = (r - k + kRanks) % kRanks;
        int32_t out = r * 100 + to, in = -1;
        TcpMesh::Transfer t;
        t.to = to;
        t.send = {{&out, sizeof(out)}};
        t.from = from;
        t.recv = {{&in, sizeof(in)}};
        Status s = (*meshes[r])->Run(t, "test");
        if (!s.ok() || in != from * 100 + r) {
          failures[r] += "round " + std::to_string(k) + ": " + s.ToString() +
                         " got " + std::to_string(in) + "; ";
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int32_t r = 0; r < kRanks; ++r) EXPECT_EQ(failures[r], "") << r;
  for (auto& m : meshes) EXPECT_EQ((*m)->refused_connections(), 0);
}

// Both ranks send 32 MiB to each other at once, far more than the socket
// buffers hold: a transfer that sent before receiving would deadlock.
TEST(TcpMeshTest, TransfersAreFullDuplex) {
  MemoryStore store;
  auto meshes = FormMesh(2, &store);
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  constexpr size_t kWords = 8 << 20;
  std::vector<std::vector<uint32_t>> out(2), in(2);
  for (int r = 0; r < 2; ++r) {
    out[r].resize(kWords);
    std::iota(out[r].begin(), out[r].end(), r * 7u);
    in[r].assign(kWords, 0);
  }
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      TcpMesh::Transfer t;
      t.to = t.from = 1 - r;
      // Two spans each way, to cross a span boundary mid-stream.
      const int64_t half = kWords / 2 * sizeof(uint32_t);
      t.send = {{out[r].data(), half}, {out[r].data() + kWords / 2, half}};
      t.recv = {{in[r].data(), half}, {in[r].data() + kWords / 2, half}};
      results[r] = (*meshes[r])->Run(t, "test");
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].ToString();
    EXPECT_TRUE(in[r] == out[1 - r]) << "rank " << r;
  }
}

// Connects to rank 0's listener once it is published, as a stranger would.
Socket ConnectToRankZero(MemoryStore* store) {
  StatusOr<std::string> address =
      store->Get("addr/0", std::chrono::milliseconds(5000));
  EXPECT_TRUE(address.ok()) << address.status().ToString();
  const size_t colon = address->rfind(':');
  StatusOr<Socket> socket = Socket::Connect(
      address->substr(0, colon), std::stoi(address->substr(colon + 1)),
      DeadlineAfter(std::chrono::milliseconds(5000)));
  EXPECT_TRUE(socket.ok()) << socket.status().ToString();
  return std::move(socket).value();
}

// A hello as the mesh writes it: magic, from, to (network order), token.
std::vector<unsigned char> HelloBytes(int32_t from, int32_t to,
                                      const std::string& token_hex) {
  std::vector<unsigned char> hello = {'k', 'o', 'l', 'o', '-', 't', 'c', 'p'};
  for (int32_t value : {from, to}) {
    for (int shift = 24; shift >= 0; shift -= 8)
      hello.push_back(static_cast<unsigned char>(value >> shift));
  }
  for (size_t i = 0; i + 1 < token_hex.size(); i += 2)
    hello.push_back(
        static_cast<unsigned char>(std::stoi(token_hex.substr(i, 2), 0, 16)));
  hello.resize(32, 0);
  return hello;
}

// Strangers reach rank 0's listener before its real peer: one with a wrong
// token, one with the right token but an impossible rank, one that says
// nothing. Each is dropped and counted; the mesh forms anyway.
TEST(TcpMeshTest, StrayConnectionsAreRefusedAndTheMeshStillForms) {
  MemoryStore store;
  auto rank0 = std::async(std::launch::async, [&] {
    return TcpMesh::Connect(OptionsFor(0, 2, std::chrono::milliseconds(10000)),
                            &store);
  });
  Socket wrong_token = ConnectToRankZero(&store);
  std::vector<unsigned char> forged =
      HelloBytes(1, 0, std::string(32, '0'));  // not the token
  ASSERT_TRUE(wrong_token
                  .SendAll(forged.data(), forged.size(),
                           DeadlineAfter(std::chrono::seconds(5)))
                  .ok());
  StatusOr<std::string> token = store.Get("token", std::chrono::seconds(5));
  ASSERT_TRUE(token.ok());
  Socket wrong_rank = ConnectToRankZero(&store);
  std::vector<unsigned char> impossible = HelloBytes(7, 0, *token);
  ASSERT_TRUE(wrong_rank
                  .SendAll(impossible.data(), impossible.size(),
                           DeadlineAfter(std::chrono::seconds(5)))
                  .ok());
  Socket silent = ConnectToRankZero(&store);
  // The refusals are answered by closing: the strangers read end of file.
  for (Socket* refused : {&wrong_token, &wrong_rank}) {
    char byte;
    Status read =
        refused->RecvAll(&byte, 1, DeadlineAfter(std::chrono::seconds(5)));
    EXPECT_EQ(read.code(), StatusCode::kPeerFailure) << read.ToString();
  }

  StatusOr<std::unique_ptr<TcpMesh>> rank1 = TcpMesh::Connect(
      OptionsFor(1, 2, std::chrono::milliseconds(10000)), &store);
  StatusOr<std::unique_ptr<TcpMesh>> mesh0 = rank0.get();
  ASSERT_TRUE(mesh0.ok()) << mesh0.status().ToString();
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();
  EXPECT_EQ((*mesh0)->refused_connections(), 3);
  EXPECT_EQ((*rank1)->refused_connections(), 0);

  // And the admitted connection carries data.
  int32_t ping = 42, got = 0;
  TcpMesh::Transfer send;
  send.to = 1;
  send.send = {{&ping, sizeof(ping)}};
  TcpMesh::Transfer recv;
  recv.from = 0;
  recv.recv = {{&got, sizeof(got)}};
  ASSERT_TRUE((*mesh0)->Run(send, "test").ok());
  ASSERT_TRUE((*rank1)->Run(recv, "test").ok());
  EXPECT_EQ(got, 42);
}

// Rank 2 of 3 never comes: ranks 0 and 1 give up at the timeout, naming it.
TEST(TcpMeshTest, ARankThatNeverComesIsNamedAtTheTimeout) {
  MemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  auto r0 = std::async(std::launch::async, [&] {
    return TcpMesh::Connect(OptionsFor(0, 3, std::chrono::milliseconds(500)),
                            &store);
  });
  StatusOr<std::unique_ptr<TcpMesh>> r1 = TcpMesh::Connect(
      OptionsFor(1, 3, std::chrono::milliseconds(500)), &store);
  StatusOr<std::unique_ptr<TcpMesh>> m0 = r0.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500) + testing::kSchedulingSlack);
  ASSERT_FALSE(m0.ok());
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(m0.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(m0.status().message(),
              MatchesRegex("rank 0 \\(127\\.0\\.0\\.1:[0-9]+\\) waited 500 ms "
                           "for rank 2 to connect"));
  EXPECT_EQ(r1.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(r1.status().message(), HasSubstr("for rank 2 to connect"));
}

// A peer that stays silent: kTimeout naming it, once the timeout passed;
// the error is sticky.
TEST(TcpMeshTest, ASilentPeerTimesOutAndTheErrorSticks) {
  MemoryStore store;
  auto meshes = FormMesh(2, &store, std::chrono::milliseconds(300));
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  int32_t got = 0;
  TcpMesh::Transfer recv;
  recv.from = 1;
  recv.recv = {{&got, sizeof(got)}};
  const auto start = std::chrono::steady_clock::now();
  Status silent = (*meshes[0])->Run(recv, "allreduce");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::milliseconds(300) + testing::kSchedulingSlack);
  EXPECT_EQ(silent.code(), StatusCode::kTimeout);
  EXPECT_THAT(silent.message(),
              MatchesRegex("rank 1 \\(127\\.0\\.0\\.1:[0-9]+\\) sent nothing "
                           "for 300 ms during allreduce"));
  Status again = (*meshes[0])->Run(recv, "barrier");
  EXPECT_EQ(again.code(), silent.code());
  EXPECT_EQ(again.message(), silent.message());
  EXPECT_EQ((*meshes[0])->error().message(), silent.message());
}

// A peer that closes its end: kPeerFailure naming it, at once.
TEST(TcpMeshTest, APeerThatClosesIsNamed) {
  MemoryStore store;
  auto meshes = FormMesh(2, &store);
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    meshes[1]->reset();
  });
  std::vector<char> big(1 << 20);
  TcpMesh::Transfer t;
  t.to = t.from = 1;
  t.send = {{big.data(), static_cast<int64_t>(big.size())}};
  t.recv = {{big.data(), static_cast<int64_t>(big.size())}};
  Status closed = (*meshes[0])->Run(t, "allgatherv");
  closer.join();
  EXPECT_EQ(closed.code(), StatusCode::kPeerFailure);
  EXPECT_THAT(closed.message(),
              MatchesRegex("rank 1 \\(127\\.0\\.0\\.1:[0-9]+\\) closed the "
                           "connection during allgatherv"));
}

}  // namespace
}  // namespace kolo
