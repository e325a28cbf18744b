// The gloo PeerLink with ranks as threads over a MemoryStore, each rank with
// a writer thread and a reader thread as the contract has it: frames arrive
// in order with their exact bytes, empty payloads, two ranks streaming
// 8 MiB to each other at once, four ranks trading data frames and their
// acks with both ring neighbours as the point-to-point protocol does (acks
// are empty frames the reader hands to the writer, a reader that is slow
// to read payloads), a Poll that returns kNone leaves the link
// working (Gloo closes every pair when one of its own waits expires), Abort
// wakes a blocked Poll, a peer that never reads times a write out, and a
// destroyed peer fails the next write. Built only with KOLO_WITH_GLOO
// (tests/CMakeLists.txt).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/peer_links.h"
#include "common/mutex.h"
#include "store/memory_store.h"
#include "transport/peer_link.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

using Links = std::vector<std::unique_ptr<PeerLink>>;

// Byte i of the payload of frame k from `from` to `to`: a wrong, shifted or
// swapped byte cannot pass.
char ByteOf(int32_t from, int32_t to, int64_t k, int64_t i) {
  return static_cast<char>((from * 37 + to * 11 + k * 5 + i * 3) & 0xff);
}

struct Frame {
  FrameHeader header;
  std::vector<char> payload;
};

Frame MakeFrame(int32_t from, int32_t to, int64_t k, int64_t bytes) {
  Frame frame;
  frame.header.kind = 2;
  frame.header.tag = from * 100 + to;
  frame.header.sequence = static_cast<uint64_t>(k);
  frame.header.count = -k;
  frame.header.payload_bytes = bytes;
  frame.payload.resize(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) frame.payload[i] = ByteOf(from, to, k, i);
  return frame;
}

LinkClock::time_point In(milliseconds wait) { return LinkClock::now() + wait; }

// Forms a link of `size` ranks as threads over one store, under a prefix
// of the link's own as the factory expects.
std::vector<StatusOr<std::unique_ptr<PeerLink>>> Form(int32_t size) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::future<StatusOr<std::unique_ptr<PeerLink>>>> pending;
  for (int32_t r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      PeerLinkOptions options;
      options.rank = r;
      options.size = size;
      options.timeout = milliseconds(5000);
      return CreateGlooPeerLink(
          options, std::make_shared<PrefixStore>("p2p/gloo/", store));
    }));
  }
  std::vector<StatusOr<std::unique_ptr<PeerLink>>> links;
  for (auto& p : pending) links.push_back(p.get());
  return links;
}

#define FORM_OR_SKIP(links, size)                         \
  Links links;                                            \
  {                                                       \
    auto formed = Form(size);                             \
    for (auto& link : formed) {                           \
      ASSERT_TRUE(link.ok()) << link.status().ToString(); \
      links.push_back(std::move(*link));                  \
    }                                                     \
  }

// Reads `count` frames with the reader's calls, checking each one against
// MakeFrame: per peer, frame k is the k-th to arrive.
void ReadFrames(PeerLink* link, int32_t rank, int32_t size, int64_t count,
                const std::vector<int64_t>& sizes) {
  std::vector<int64_t> next(size, 0);
  const auto deadline = In(milliseconds(10000));
  for (int64_t got = 0; got < count;) {
    ASSERT_LT(LinkClock::now(), deadline) << "rank " << rank << " got " << got;
    LinkEvent event = link->Poll(milliseconds(100));
    if (event.kind == LinkEvent::Kind::kNone) continue;
    ASSERT_EQ(event.kind, LinkEvent::Kind::kFrame) << event.error.ToString();
    const int32_t from = event.peer;
    const int64_t k = next[from]++;
    const Frame want = MakeFrame(from, rank, k, sizes[k % sizes.size()]);
    EXPECT_EQ(event.header.kind, want.header.kind);
    EXPECT_EQ(event.header.tag, want.header.tag);
    EXPECT_EQ(event.header.sequence, want.header.sequence);
    EXPECT_EQ(event.header.count, want.header.count);
    ASSERT_EQ(event.header.payload_bytes, want.header.payload_bytes);
    std::vector<char> payload(want.payload.size());
    ASSERT_TRUE(link->ReadPayload(from, payload.data(),
                                  event.header.payload_bytes,
                                  In(milliseconds(5000)))
                    .ok());
    EXPECT_TRUE(payload == want.payload)
        << "frame " << k << " from " << from << " to " << rank;
    ++got;
  }
}

// Writes `per_peer` frames to every other rank, round robin.
Status WriteFrames(PeerLink* link, int32_t rank, int32_t size, int64_t per_peer,
                   const std::vector<int64_t>& sizes) {
  for (int64_t k = 0; k < per_peer; ++k) {
    for (int32_t to = 0; to < size; ++to) {
      if (to == rank) continue;
      const Frame frame = MakeFrame(rank, to, k, sizes[k % sizes.size()]);
      KOLO_RETURN_IF_ERROR(link->Write(to, frame.header, frame.payload.data(),
                                       In(milliseconds(5000))));
    }
  }
  return Status::Ok();
}

// Every rank writes and reads at once; returns when all frames arrived.
void Exchange(const Links& links, int64_t per_peer,
              const std::vector<int64_t>& sizes) {
  const int32_t size = static_cast<int32_t>(links.size());
  std::vector<std::future<Status>> writers;
  std::vector<std::thread> readers;
  for (int32_t r = 0; r < size; ++r) {
    writers.push_back(std::async(std::launch::async, [&, r] {
      return WriteFrames(links[r].get(), r, size, per_peer, sizes);
    }));
    readers.emplace_back([&, r] {
      ReadFrames(links[r].get(), r, size, per_peer * (size - 1), sizes);
    });
  }
  for (auto& reader : readers) reader.join();
  for (int32_t r = 0; r < size; ++r) {
    Status written = writers[r].get();
    EXPECT_TRUE(written.ok()) << "rank " << r << ": " << written.ToString();
  }
}

class GlooPeerLinkRanksTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(GlooPeerLinkRanksTest, FramesArriveInOrderWithTheirExactBytes) {
  FORM_OR_SKIP(links, GetParam());
  EXPECT_STREQ(links[0]->engine(), "gloo");
  Exchange(links, 12, {0, 1, 48, 4096, 65537, 7});
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooPeerLinkRanksTest, ::testing::Values(2, 4),
                         [](const auto& info) {
                           return "np" + std::to_string(info.param);
                         });

TEST(GlooPeerLinkTest, TwoRanksWrite8MiBToEachOtherAtOnce) {
  FORM_OR_SKIP(links, 2);
  Exchange(links, 2, {int64_t{8} << 20});
}

TEST(GlooPeerLinkTest, EmptyPayloadsTravelAsHeadersAlone) {
  FORM_OR_SKIP(links, 2);
  Exchange(links, 200, {0});
}

// The traffic of collectives/point_to_point.cc: each rank's writer thread
// sends `per_peer` data frames of mixed sizes to both ring neighbours,
// alternating, and between them the acks its reader thread queues: one
// empty frame per data frame read, carrying its sequence, written ahead of
// any further data. The reader polls both peers, reads each payload (every
// `slow_every`-th one only after a pause, so the payload's send waits on a
// late receive) and checks data and acks against their closed forms.
class RingRank {
 public:
  static constexpr int32_t kData = 1;
  static constexpr int32_t kAck = 2;

  RingRank(PeerLink* link, int32_t rank, int32_t size, int64_t per_peer,
           int64_t slow_every)
      : link_(link),
        rank_(rank),
        left_((rank + size - 1) % size),
        right_((rank + 1) % size),
        per_peer_(per_peer),
        slow_every_(slow_every),
        next_data_(size, 0),
        next_ack_(size, 0) {}

  // Bytes of data frame k to a peer: empty, one byte, a header's worth, a
  // few KiB, and more than one socket buffer.
  static int64_t DataBytes(int64_t k) {
    static constexpr int64_t kSizes[] = {4004, 0, 1, 48, 8016, 300001, 2010};
    return kSizes[k % 7];
  }

  // Writes acks first, then the next data frame; once all data is out,
  // waits for the acks still owed.
  Status Write() {
    const auto deadline = In(milliseconds(8000));
    for (int64_t k = 0;;) {
      int32_t ack_to = -1;
      FrameHeader ack;
      {
        MutexLock lock(&mutex_);
        while (k == 2 * per_peer_ && acks_.empty() && acks_owed_ > 0) {
          if (!queued_.WaitUntil(&mutex_, deadline) &&
              LinkClock::now() >= deadline) {
            return Timeout("rank " + std::to_string(rank_) + " still owes " +
                           std::to_string(acks_owed_) + " acks");
          }
        }
        if (!acks_.empty()) {
          std::tie(ack_to, ack) = acks_.front();
          acks_.pop_front();
        } else if (k == 2 * per_peer_) {
          return Status::Ok();
        }
      }
      if (ack_to >= 0) {
        KOLO_RETURN_IF_ERROR(link_->Write(ack_to, ack, nullptr, deadline));
        continue;
      }
      const int32_t to = k % 2 == 0 ? right_ : left_;
      const Frame frame = MakeFrame(rank_, to, k / 2, DataBytes(k / 2));
      FrameHeader header = frame.header;
      header.kind = kData;
      KOLO_RETURN_IF_ERROR(
          link_->Write(to, header, frame.payload.data(), deadline));
      ++k;
    }
  }

  void Read() {
    const auto deadline = In(milliseconds(8000));
    int64_t frames = 0;
    while (frames < 4 * per_peer_) {
      ASSERT_LT(LinkClock::now(), deadline)
          << "rank " << rank_ << " read " << frames << " of " << 4 * per_peer_
          << " frames";
      LinkEvent event = link_->Poll(milliseconds(100));
      if (event.kind == LinkEvent::Kind::kNone) continue;
      ASSERT_EQ(event.kind, LinkEvent::Kind::kFrame) << event.error.ToString();
      const int32_t from = event.peer;
      ASSERT_TRUE(from == left_ || from == right_) << "frame from " << from;
      ++frames;
      if (event.header.kind == kAck) {
        // Acks come back in the order the data went out.
        EXPECT_EQ(event.header.sequence,
                  static_cast<uint64_t>(next_ack_[from]++))
            << "ack from " << from << " to " << rank_;
        EXPECT_EQ(event.header.payload_bytes, 0);
        continue;
      }
      ASSERT_EQ(event.header.kind, kData);
      const int64_t k = next_data_[from]++;
      const Frame want = MakeFrame(from, rank_, k, DataBytes(k));
      EXPECT_EQ(event.header.sequence, want.header.sequence);
      EXPECT_EQ(event.header.tag, want.header.tag);
      ASSERT_EQ(event.header.payload_bytes, want.header.payload_bytes)
          << "frame " << k << " from " << from << " to " << rank_;
      if (slow_every_ > 0 && k % slow_every_ == 0) {
        std::this_thread::sleep_for(milliseconds(2));
      }
      std::vector<char> payload(want.payload.size());
      Status read =
          link_->ReadPayload(from, payload.data(), event.header.payload_bytes,
                             In(milliseconds(5000)));
      ASSERT_TRUE(read.ok()) << read.ToString();
      EXPECT_TRUE(payload == want.payload)
          << "frame " << k << " from " << from << " to " << rank_;
      FrameHeader ack;
      ack.kind = kAck;
      ack.sequence = event.header.sequence;
      MutexLock lock(&mutex_);
      acks_.emplace_back(from, ack);
      --acks_owed_;
      queued_.NotifyAll();
    }
    EXPECT_EQ(next_data_[left_], per_peer_);
    EXPECT_EQ(next_data_[right_], per_peer_);
    EXPECT_EQ(next_ack_[left_], per_peer_);
    EXPECT_EQ(next_ack_[right_], per_peer_);
  }

 private:
  PeerLink* const link_;
  const int32_t rank_;
  const int32_t left_;
  const int32_t right_;
  const int64_t per_peer_;
  const int64_t slow_every_;
  // The reader's: the next data frame and ack expected per peer.
  std::vector<int64_t> next_data_;
  std::vector<int64_t> next_ack_;

  Mutex mutex_;
  CondVar queued_;  // acks_ grew
  std::deque<std::pair<int32_t, FrameHeader>> acks_ KOLO_GUARDED_BY(mutex_);
  int64_t acks_owed_ KOLO_GUARDED_BY(mutex_) = 2 * per_peer_;
};

// Four ranks, each a writer and a reader thread, each pair of neighbours
// with data and acks crossing in both directions at once.
TEST(GlooPeerLinkTest, FourRanksTradeDataAndAcksWithBothNeighbours) {
  FORM_OR_SKIP(links, 4);
  std::vector<std::unique_ptr<RingRank>> ranks;
  for (int32_t r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<RingRank>(links[r].get(), r, 4,
                                               /*per_peer=*/60,
                                               /*slow_every=*/5));
  }
  std::vector<std::future<Status>> writers;
  std::vector<std::thread> readers;
  for (auto& rank : ranks) {
    writers.push_back(
        std::async(std::launch::async, [&rank] { return rank->Write(); }));
    readers.emplace_back([&rank] { rank->Read(); });
  }
  for (auto& reader : readers) reader.join();
  for (int32_t r = 0; r < 4; ++r) {
    Status written = writers[r].get();
    EXPECT_TRUE(written.ok()) << "rank " << r << ": " << written.ToString();
  }
}

// The trap of this Gloo: a receive wait that expires by itself closes every
// pair. Polls that find nothing must leave the link as it was.
TEST(GlooPeerLinkTest, APollThatFindsNothingLeavesTheLinkWorking) {
  FORM_OR_SKIP(links, 2);
  for (int i = 0; i < 3; ++i) {
    const auto start = LinkClock::now();
    LinkEvent event = links[1]->Poll(milliseconds(30));
    EXPECT_EQ(event.kind, LinkEvent::Kind::kNone);
    EXPECT_GE(LinkClock::now() - start, milliseconds(30));
  }
  EXPECT_EQ(links[0]->Poll(milliseconds(0)).kind, LinkEvent::Kind::kNone);
  Exchange(links, 3, {5, 0, 1 << 16});
}

TEST(GlooPeerLinkTest, AbortWakesABlockedPoll) {
  FORM_OR_SKIP(links, 2);
  const auto start = LinkClock::now();
  auto poll = std::async(std::launch::async,
                         [&] { return links[0]->Poll(milliseconds(20000)); });
  std::this_thread::sleep_for(milliseconds(100));
  links[0]->Abort();
  EXPECT_EQ(poll.get().kind, LinkEvent::Kind::kNone);
  EXPECT_LT(LinkClock::now() - start, milliseconds(2000));
  // Later calls return at once too.
  EXPECT_EQ(links[0]->Poll(milliseconds(20000)).kind, LinkEvent::Kind::kNone);
  const Frame frame = MakeFrame(0, 1, 0, 10);
  Status written = links[0]->Write(1, frame.header, frame.payload.data(),
                                   In(milliseconds(5000)));
  EXPECT_EQ(written.code(), StatusCode::kAborted) << written.ToString();
  EXPECT_LT(LinkClock::now() - start, milliseconds(2000));
}

// A peer that takes the header but never reads the payload: the write
// times out at its deadline naming the peer, and since Gloo then closed
// every pair, later writes report that the link broke.
TEST(GlooPeerLinkTest, APeerThatNeverReadsTimesTheWriteOut) {
  FORM_OR_SKIP(links, 2);
  const Frame frame = MakeFrame(0, 1, 0, 1000);
  const auto start = LinkClock::now();
  Status written = links[0]->Write(1, frame.header, frame.payload.data(),
                                   In(milliseconds(200)));
  EXPECT_EQ(written.code(), StatusCode::kTimeout) << written.ToString();
  EXPECT_THAT(written.message(), HasSubstr("write to peer 1"));
  EXPECT_GE(LinkClock::now() - start, milliseconds(190));
  EXPECT_LT(LinkClock::now() - start, milliseconds(2000));
  written = links[0]->Write(1, frame.header, frame.payload.data(),
                            In(milliseconds(200)));
  EXPECT_EQ(written.code(), StatusCode::kPeerFailure) << written.ToString();
  EXPECT_THAT(written.message(), HasSubstr("timed out earlier"));
}

// A rank whose link goes away: the next write to it fails naming it, well
// before its deadline, and the reader hears that the peer is lost.
TEST(GlooPeerLinkTest, ADestroyedPeerFailsTheNextWrite) {
  FORM_OR_SKIP(links, 2);
  Exchange(links, 1, {100});
  links[1].reset();
  const auto start = LinkClock::now();
  const Frame frame = MakeFrame(0, 1, 1, 1000);
  Status written = links[0]->Write(1, frame.header, frame.payload.data(),
                                   In(milliseconds(4000)));
  EXPECT_EQ(written.code(), StatusCode::kPeerFailure) << written.ToString();
  EXPECT_THAT(written.message(), HasSubstr("peer 1"));
  EXPECT_LT(LinkClock::now() - start, milliseconds(3000));
  LinkEvent event = links[0]->Poll(milliseconds(3000));
  EXPECT_EQ(event.kind, LinkEvent::Kind::kPeerLost);
  EXPECT_EQ(event.peer, 1);
  EXPECT_THAT(event.error.message(), HasSubstr("lost peer 1"));
}

}  // namespace
}  // namespace kolo
