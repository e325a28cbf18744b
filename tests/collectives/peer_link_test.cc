// The shm and tcp PeerLinks with ranks as threads over a MemoryStore, each
// rank with a writer thread and a reader thread as the contract has it:
// frames arrive in order with their exact bytes, two ranks stream more than
// a ring's worth to each other at once, a peer that never reads makes a
// write time out, a destroyed peer is lost, and Abort wakes a blocked Poll.
// The shm cases also check that nothing is left in /dev/shm.
#include "collectives/peer_links.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "store/tcp_store.h"
#include "testing/engines.h"
#include "testing/own_shm_segments.h"
#include "testing/timing.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

using Links = std::vector<std::unique_ptr<PeerLink>>;

// The job secret of the tests that meet over a TcpStore (at least
// kMinJobSecretBytes).
constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

// Byte i of frame k from rank `from` to rank `to`.
char Expected(int32_t from, int32_t to, int64_t k, int64_t i) {
  return static_cast<char>((from * 31 + to * 7 + k * 13 + i) & 0xff);
}

std::vector<char> Payload(int32_t from, int32_t to, int64_t k, int64_t bytes) {
  std::vector<char> payload(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) payload[i] = Expected(from, to, k, i);
  return payload;
}

FrameHeader HeaderFor(int32_t from, int32_t to, int64_t k, int64_t bytes) {
  FrameHeader header;
  header.kind = 1;
  header.tag = static_cast<int32_t>(k);
  header.count = from * 1000 + to;
  header.sequence = static_cast<uint64_t>(k);
  header.payload_bytes = bytes;
  return header;
}

class PeerLinkTest : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override {
    if (GetParam() == "shm") {
      EXPECT_THAT(testing::OwnShmSegments(), ::testing::IsEmpty());
    }
  }

  // Forms a link of `size` ranks as threads; fails the test if any fails.
  Links Form(int32_t size, MemoryStore* store, int64_t ring_bytes = 64 << 10) {
    std::vector<std::future<StatusOr<std::unique_ptr<PeerLink>>>> pending;
    for (int32_t r = 0; r < size; ++r) {
      PeerLinkOptions options;
      options.rank = r;
      options.size = size;
      options.timeout = milliseconds(5000);
      options.job_secret = testing::kTestJobSecret;
      options.shm_ring_bytes = ring_bytes;
      pending.push_back(std::async(std::launch::async, [=] {
        return GetParam() == "shm" ? CreateShmPeerLink(options, store)
                                   : CreateTcpPeerLink(options, store);
      }));
    }
    Links links;
    for (auto& p : pending) {
      StatusOr<std::unique_ptr<PeerLink>> link = p.get();
      EXPECT_TRUE(link.ok()) << link.status().ToString();
      if (!link.ok()) return Links();
      links.push_back(std::move(link).value());
    }
    return links;
  }
};

LinkClock::time_point In(milliseconds span) { return LinkClock::now() + span; }

// Reads frames until `expected` per peer arrived or 5 s passed; checks each
// frame's header and bytes against the closed form and its order. Returns
// the failures, "" when none.
std::string ReceiveAll(PeerLink* link, int32_t me, int32_t size,
                       const std::vector<int64_t>& bytes_of_frame) {
  const int64_t frames = static_cast<int64_t>(bytes_of_frame.size());
  std::vector<int64_t> next(size, 0);
  next[me] = frames;
  std::string failures;
  const auto give_up = In(milliseconds(5000));
  auto done = [&] {
    for (int64_t n : next)
      if (n < frames) return false;
    return true;
  };
  while (!done() && LinkClock::now() < give_up) {
    LinkEvent event = link->Poll(milliseconds(100));
    if (event.kind == LinkEvent::Kind::kNone) continue;
    if (event.kind == LinkEvent::Kind::kPeerLost)
      return "lost rank " + std::to_string(event.peer) + ": " +
             event.error.ToString();
    const int32_t from = event.peer;
    if (from < 0 || from >= size || next[from] >= frames)
      return "an unexpected frame from rank " + std::to_string(from);
    const int64_t k = next[from]++;
    const FrameHeader& h = event.header;
    const int64_t bytes = bytes_of_frame[k];
    if (h.tag != k || h.sequence != static_cast<uint64_t>(k) ||
        h.count != from * 1000 + me || h.payload_bytes != bytes) {
      failures += "frame " + std::to_string(k) + " from " +
                  std::to_string(from) + " has header tag " +
                  std::to_string(h.tag) + "; ";
    }
    std::vector<char> payload(static_cast<size_t>(h.payload_bytes));
    Status read = link->ReadPayload(from, payload.data(), h.payload_bytes,
                                    In(milliseconds(5000)));
    if (!read.ok()) return read.ToString();
    if (payload != Payload(from, me, k, bytes)) {
      failures += "frame " + std::to_string(k) + " from " +
                  std::to_string(from) + " has wrong bytes; ";
    }
  }
  if (!done()) failures += "not every frame arrived within 5 s";
  return failures;
}

// Every rank writes `bytes_of_frame.size()` frames to every peer (to the
// peers in turn) on its writer thread while its reader thread takes
// everything sent to it.
void Exchange(const Links& links, const std::vector<int64_t>& bytes_of_frame) {
  const int32_t size = static_cast<int32_t>(links.size());
  std::vector<std::string> write_failures(size), read_failures(size);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      for (size_t k = 0; k < bytes_of_frame.size(); ++k) {
        for (int32_t d = 1; d < size; ++d) {
          const int32_t to = (r + d) % size;
          const std::vector<char> payload =
              Payload(r, to, static_cast<int64_t>(k), bytes_of_frame[k]);
          Status s = links[r]->Write(
              to, HeaderFor(r, to, static_cast<int64_t>(k), bytes_of_frame[k]),
              payload.data(), In(milliseconds(5000)));
          if (!s.ok()) write_failures[r] += s.ToString() + "; ";
        }
      }
    });
    threads.emplace_back([&, r] {
      read_failures[r] = ReceiveAll(links[r].get(), r, size, bytes_of_frame);
    });
  }
  for (auto& t : threads) t.join();
  for (int32_t r = 0; r < size; ++r) {
    EXPECT_EQ(write_failures[r], "") << "rank " << r;
    EXPECT_EQ(read_failures[r], "") << "rank " << r;
  }
}

TEST_P(PeerLinkTest, FramesArriveInOrderWithTheirBytes) {
  // Sizes from empty to several rings' worth, and odd ones that wrap.
  std::vector<int64_t> bytes_of_frame;
  for (int64_t k = 0; k < 24; ++k)
    bytes_of_frame.push_back((k * 9973) % 150001);
  for (int32_t size : {2, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(size));
    MemoryStore store;
    Links links = Form(size, &store);
    ASSERT_EQ(links.size(), static_cast<size_t>(size));
    EXPECT_EQ(std::string(links[0]->engine()), GetParam());
    Exchange(links, bytes_of_frame);
  }
}

// 8 MiB each way through 64 KiB rings: each writer blocks on a full ring
// while the other rank's reader drains it, so neither waits on the other.
TEST_P(PeerLinkTest, TwoRanksStreamToEachOtherAtOnce) {
  MemoryStore store;
  Links links = Form(2, &store, 64 << 10);
  ASSERT_EQ(links.size(), 2u);
  Exchange(links, {8 << 20});
}

TEST_P(PeerLinkTest, AFrameWithoutPayload) {
  MemoryStore store;
  Links links = Form(2, &store);
  ASSERT_EQ(links.size(), 2u);
  ASSERT_TRUE(
      links[1]
          ->Write(0, HeaderFor(1, 0, 5, 0), nullptr, In(milliseconds(2000)))
          .ok());
  LinkEvent event = links[0]->Poll(milliseconds(2000));
  ASSERT_EQ(event.kind, LinkEvent::Kind::kFrame) << event.error.ToString();
  EXPECT_EQ(event.peer, 1);
  EXPECT_EQ(event.header.tag, 5);
  EXPECT_EQ(event.header.count, 1000);
  EXPECT_EQ(event.header.payload_bytes, 0);
  EXPECT_TRUE(links[0]->ReadPayload(1, nullptr, 0, In(milliseconds(100))).ok());
  EXPECT_EQ(links[0]->Poll(milliseconds(20)).kind, LinkEvent::Kind::kNone);
}

// Rank 1 never reads: rank 0's writes fill the ring (shm) or the sockets'
// buffers (tcp), and then one times out, naming rank 1.
TEST_P(PeerLinkTest, AWriteToAPeerThatNeverReadsTimesOut) {
  MemoryStore store;
  Links links = Form(2, &store);
  ASSERT_EQ(links.size(), 2u);
  const std::vector<char> payload(1 << 20, 'x');
  Status written;
  auto start = LinkClock::now();
  for (int k = 0; k < 64 && written.ok(); ++k) {
    start = LinkClock::now();
    written = links[0]->Write(1, HeaderFor(0, 1, k, 1 << 20), payload.data(),
                              In(milliseconds(200)));
  }
  EXPECT_EQ(written.code(), StatusCode::kTimeout) << written.ToString();
  EXPECT_THAT(written.message(), HasSubstr("rank 1"));
  EXPECT_LT(LinkClock::now() - start,
            milliseconds(200) + testing::kSchedulingSlack);
}

// Rank 1 writes a frame and destroys its link: rank 0 still gets the frame,
// then learns promptly that rank 1 is gone, and cannot write to it.
TEST_P(PeerLinkTest, ADestroyedPeerIsLost) {
  MemoryStore store;
  Links links = Form(2, &store);
  ASSERT_EQ(links.size(), 2u);
  const std::vector<char> payload = Payload(1, 0, 0, 1000);
  ASSERT_TRUE(links[1]
                  ->Write(0, HeaderFor(1, 0, 0, 1000), payload.data(),
                          In(milliseconds(2000)))
                  .ok());
  links[1].reset();

  LinkEvent event = links[0]->Poll(milliseconds(2000));
  ASSERT_EQ(event.kind, LinkEvent::Kind::kFrame) << event.error.ToString();
  std::vector<char> got(1000);
  ASSERT_TRUE(
      links[0]->ReadPayload(1, got.data(), 1000, In(milliseconds(2000))).ok());
  EXPECT_EQ(got, payload);

  const auto start = LinkClock::now();
  event = links[0]->Poll(testing::kFastFailTimeout);
  EXPECT_LT(LinkClock::now() - start, testing::kFastFailBound);
  ASSERT_EQ(event.kind, LinkEvent::Kind::kPeerLost);
  EXPECT_EQ(event.peer, 1);
  EXPECT_EQ(event.error.code(), StatusCode::kPeerFailure);
  EXPECT_THAT(event.error.message(), HasSubstr("rank 1"));
  // Lost once: nothing more comes from it.
  EXPECT_EQ(links[0]->Poll(milliseconds(20)).kind, LinkEvent::Kind::kNone);

  Status written = links[0]->Write(1, HeaderFor(0, 1, 0, 1000), payload.data(),
                                   In(milliseconds(1000)));
  EXPECT_EQ(written.code(), StatusCode::kPeerFailure) << written.ToString();
  EXPECT_THAT(written.message(), HasSubstr("rank 1"));
}

TEST_P(PeerLinkTest, AbortWakesABlockedPoll) {
  MemoryStore store;
  Links links = Form(2, &store);
  ASSERT_EQ(links.size(), 2u);
  const auto start = LinkClock::now();
  std::future<LinkEvent> polled = std::async(std::launch::async, [&] {
    return links[0]->Poll(testing::kFastFailTimeout);
  });
  std::this_thread::sleep_for(milliseconds(50));
  links[0]->Abort();
  EXPECT_EQ(polled.get().kind, LinkEvent::Kind::kNone);
  EXPECT_LT(LinkClock::now() - start, testing::kFastFailBound);
  // Later calls return at once too.
  const auto later = LinkClock::now();
  EXPECT_EQ(links[0]->Poll(testing::kFastFailTimeout).kind,
            LinkEvent::Kind::kNone);
  Status written = links[0]->Write(1, HeaderFor(0, 1, 0, 0), nullptr,
                                   In(testing::kFastFailTimeout));
  EXPECT_EQ(written.code(), StatusCode::kAborted) << written.ToString();
  EXPECT_LT(LinkClock::now() - later, testing::kFastFailBound);
}

INSTANTIATE_TEST_SUITE_P(Engines, PeerLinkTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

TEST(ShmPeerLinkTest, ARingThatIsNotWholePagesIsNamed) {
  MemoryStore store;
  PeerLinkOptions options;
  options.shm_ring_bytes = 1000;
  EXPECT_THAT(CreateShmPeerLink(options, &store).status().message(),
              HasSubstr("multiple of 4096 bytes, got 1000"));
}

// Rank 1 is a forked process that joins the link and exits without
// closing it: rank 0's reader finds its pid gone within a liveness period,
// and its writer then refuses to fill the dead rank's ring.
TEST(ShmPeerLinkTest, APeerProcessThatExitsIsLost) {
  int port_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int port = 0;
    if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) _exit(2);
    auto store = TcpStoreClient::Connect("127.0.0.1", port, kSecret, 1,
                                         std::chrono::seconds(5));
    if (!store.ok()) _exit(3);
    PeerLinkOptions options;
    options.rank = 1;
    options.size = 2;
    options.timeout = milliseconds(5000);
    auto link = CreateShmPeerLink(options, store->get());
    _exit(link.ok() ? 0 : 4);
  }
  auto server = TcpStoreServer::Start("127.0.0.1", 0, kSecret);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  ASSERT_EQ(write(port_pipe[1], &port, sizeof(port)),
            static_cast<ssize_t>(sizeof(port)));
  auto store = TcpStoreClient::Connect("127.0.0.1", port, kSecret, 0,
                                       std::chrono::seconds(5));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  PeerLinkOptions options;
  options.size = 2;
  options.timeout = milliseconds(5000);
  auto link = CreateShmPeerLink(options, store->get());
  ASSERT_TRUE(link.ok()) << link.status().ToString();

  const auto start = LinkClock::now();
  LinkEvent event = (*link)->Poll(testing::kFastFailTimeout);
  EXPECT_LT(LinkClock::now() - start, testing::kFastFailBound);
  ASSERT_EQ(event.kind, LinkEvent::Kind::kPeerLost);
  EXPECT_EQ(event.peer, 1);
  EXPECT_THAT(event.error.message(),
              HasSubstr("rank 1 (pid " + std::to_string(child) + ") exited"));
  Status written =
      (*link)->Write(1, HeaderFor(0, 1, 0, 0), nullptr, In(milliseconds(1000)));
  EXPECT_EQ(written.code(), StatusCode::kPeerFailure) << written.ToString();
  EXPECT_THAT(written.message(), HasSubstr("rank 1"));

  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(port_pipe[0]);
  close(port_pipe[1]);
  link->reset();
  EXPECT_THAT(testing::OwnShmSegments(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace kolo
