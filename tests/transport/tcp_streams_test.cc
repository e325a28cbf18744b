// TcpStreams between two ranks as threads on loopback: bytes sent in
// pieces arrive whole and in order, a wait with nothing to read ends at its
// deadline, Abort wakes every wait for good, and a peer that closes is
// seen as ended by both a receive and a wait to send.
#include "transport/tcp_streams.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <numeric>
#include <vector>

#include "store/memory_store.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The streams of ranks 0 and 1, from a mesh formed over `store`.
std::vector<std::unique_ptr<TcpStreams>> TwoRanks(Store* store) {
  std::vector<std::future<StatusOr<std::unique_ptr<TcpMesh>>>> pending;
  for (int32_t r = 0; r < 2; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      TcpMesh::Options options;
      options.rank = r;
      options.size = 2;
      options.timeout = milliseconds(10000);
      options.job_secret = testing::kTestJobSecret;
      return TcpMesh::Connect(options, store);
    }));
  }
  std::vector<std::unique_ptr<TcpStreams>> streams;
  for (auto& p : pending) {
    StatusOr<std::unique_ptr<TcpMesh>> mesh = p.get();
    EXPECT_TRUE(mesh.ok()) << mesh.status().ToString();
    if (!mesh.ok()) return {};
    StatusOr<std::unique_ptr<TcpStreams>> made =
        TcpStreams::Create((*mesh)->ReleaseConnections());
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return {};
    streams.push_back(*std::move(made));
  }
  return streams;
}

// Byte i is i mod 251: a prime, so no power-of-two piece repeats it.
TEST(TcpStreamsTest, PiecesArriveWholeAndInOrder) {
  MemoryStore store;
  auto streams = TwoRanks(&store);
  ASSERT_EQ(streams.size(), 2u);
  std::vector<char> sent(300000);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i % 251);
  std::vector<char> got(sent.size());
  auto reader = std::async(std::launch::async, [&] {
    size_t have = 0;
    std::vector<TcpStreams::Ready> ready;
    int error = 0;
    while (have < got.size()) {
      TcpStreams::Io io =
          streams[1]->Receive(0, got.data() + have, got.size() - have);
      if (io.ended || io.error != 0) return false;
      have += io.bytes;
      if (io.would_block) {
        streams[1]->Await({0}, TcpStreams::Direction::kIn,
                          Clock::now() + milliseconds(1000), &ready, &error);
      }
    }
    return true;
  });
  // Two parts, as a frame's header and payload.
  size_t done = 0;
  std::vector<TcpStreams::Ready> ready;
  int error = 0;
  while (done < sent.size()) {
    const size_t half = sent.size() / 2;
    iovec parts[2];
    size_t count = 0;
    if (done < half) {
      parts[count++] = {sent.data() + done, half - done};
    }
    const size_t second = std::max(done, half);
    parts[count++] = {sent.data() + second, sent.size() - second};
    TcpStreams::Io io = streams[0]->Send(1, parts, count);
    ASSERT_FALSE(io.ended);
    ASSERT_EQ(io.error, 0);
    done += io.bytes;
    if (io.would_block) {
      ASSERT_NE(
          streams[0]->Await({1}, TcpStreams::Direction::kOut,
                            Clock::now() + milliseconds(5000), &ready, &error),
          TcpStreams::Wake::kFailed);
    }
  }
  ASSERT_TRUE(reader.get());
  EXPECT_EQ(got, sent);
}

TEST(TcpStreamsTest, AWaitForNothingEndsAtItsDeadlineAndAbortWakesForGood) {
  MemoryStore store;
  auto streams = TwoRanks(&store);
  ASSERT_EQ(streams.size(), 2u);
  std::vector<TcpStreams::Ready> ready;
  int error = 0;
  const Clock::time_point began = Clock::now();
  TcpStreams::Wake wake =
      streams[0]->Await({1}, TcpStreams::Direction::kIn,
                        began + milliseconds(50), &ready, &error);
  EXPECT_EQ(wake, TcpStreams::Wake::kNothing);
  EXPECT_GE(Clock::now() - began, milliseconds(40));
  EXPECT_TRUE(streams[0]->Receive(1, &error, 1).would_block);

  streams[0]->Abort();
  for (int i = 0; i < 2; ++i) {
    wake =
        streams[0]->Await({1}, TcpStreams::Direction::kIn,
                          Clock::now() + milliseconds(10000), &ready, &error);
    EXPECT_EQ(wake, TcpStreams::Wake::kAborted);
  }
}

TEST(TcpStreamsTest, APeerThatClosesIsSeenAsEnded) {
  MemoryStore store;
  auto streams = TwoRanks(&store);
  ASSERT_EQ(streams.size(), 2u);
  streams[1].reset();
  char byte = 0;
  EXPECT_TRUE(streams[0]->Receive(1, &byte, 1).ended);
  std::vector<TcpStreams::Ready> ready;
  int error = 0;
  EXPECT_EQ(
      streams[0]->Await({1}, TcpStreams::Direction::kOut,
                        Clock::now() + milliseconds(10000), &ready, &error),
      TcpStreams::Wake::kReady);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].peer, 1);
  EXPECT_TRUE(ready[0].ended);
}

}  // namespace
}  // namespace kolo
