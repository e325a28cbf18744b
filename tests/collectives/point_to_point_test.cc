// The point-to-point protocol (matching, acks, mismatches, timeouts, lost
// peers) with ranks as threads over an in-memory link. The real engines'
// links have tests of their own (tests/collectives/peer_link_test.cc, ...);
// tests/integration/point_to_point_test.cc runs the whole API in processes.
#include "collectives/point_to_point.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/peer_links.h"
#include "store/memory_store.h"
#include "testing/engines.h"
#include "transport/tcp_mesh.h"

namespace kolo {
namespace {

using namespace std::chrono_literals;

// Frames between threads: one queue per ordered pair, unbounded.
class Wire {
 public:
  explicit Wire(int32_t size) : size_(size), dead_(size, false) {}

  struct Frame {
    FrameHeader header;
    std::vector<char> payload;
  };

  Status Write(int32_t from, int32_t to, const FrameHeader& header,
               const void* payload) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_[to])
      return PeerFailure("rank " + std::to_string(to) + " is gone");
    Frame frame{header, {}};
    const char* bytes = static_cast<const char*>(payload);
    if (header.payload_bytes > 0) {
      frame.payload.assign(bytes, bytes + header.payload_bytes);
    }
    queues_[{from, to}].push_back(std::move(frame));
    changed_.notify_all();
    return Status::Ok();
  }

  // The next frame for `to`, round robin over senders.
  LinkEvent Poll(int32_t to, std::chrono::milliseconds wait,
                 std::vector<char>* payload, const std::atomic<bool>* aborted) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      if (*aborted) return {};
      for (int32_t from = 0; from < size_; ++from) {
        if (dead_[from] && !reported_[{to, from}]) {
          reported_[{to, from}] = true;
          LinkEvent event;
          event.kind = LinkEvent::Kind::kPeerLost;
          event.peer = from;
          event.error =
              PeerFailure("rank " + std::to_string(from) + " closed its link");
          return event;
        }
        auto& queue = queues_[{from, to}];
        if (queue.empty()) continue;
        LinkEvent event;
        event.kind = LinkEvent::Kind::kFrame;
        event.peer = from;
        event.header = queue.front().header;
        *payload = std::move(queue.front().payload);
        queue.pop_front();
        return event;
      }
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
        return {};
      }
    }
  }

  void Kill(int32_t rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    dead_[rank] = true;
    changed_.notify_all();
  }

  void Wake() { changed_.notify_all(); }

 private:
  const int32_t size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int32_t, int32_t>, std::deque<Frame>> queues_;
  std::map<std::pair<int32_t, int32_t>, bool> reported_;
  std::vector<bool> dead_;
};

class WireLink : public PeerLink {
 public:
  WireLink(std::shared_ptr<Wire> wire, int32_t rank)
      : wire_(std::move(wire)), rank_(rank) {}

  Status Write(int32_t peer, const FrameHeader& header, const void* payload,
               LinkClock::time_point) override {
    if (aborted_) return Aborted("link aborted");
    return wire_->Write(rank_, peer, header, payload);
  }
  LinkEvent Poll(std::chrono::milliseconds wait) override {
    return wire_->Poll(rank_, wait, &pending_, &aborted_);
  }
  Status ReadPayload(int32_t, void* payload, int64_t bytes,
                     LinkClock::time_point) override {
    std::this_thread::sleep_for(read_delay);
    if (bytes != static_cast<int64_t>(pending_.size())) {
      return Internal("payload size differs from the header's");
    }
    if (bytes > 0) std::memcpy(payload, pending_.data(), bytes);
    return Status::Ok();
  }
  void Abort() override {
    aborted_ = true;
    wire_->Wake();
  }
  const char* engine() const override { return "wire"; }

  // How long each payload takes to arrive.
  std::chrono::milliseconds read_delay{0};

 private:
  std::shared_ptr<Wire> wire_;
  const int32_t rank_;
  std::vector<char> pending_;  // reader thread only
  std::atomic<bool> aborted_{false};
};

// `size` protocols joined by one wire.
struct Job {
  explicit Job(int32_t size, std::chrono::milliseconds read_delay = 0ms)
      : wire(std::make_shared<Wire>(size)) {
    for (int32_t rank = 0; rank < size; ++rank) {
      PointToPoint::Options options;
      options.rank = rank;
      options.size = size;
      options.timeout = 10s;
      auto link = std::make_unique<WireLink>(wire, rank);
      link->read_delay = read_delay;
      ranks.push_back(
          PointToPoint::Start(options, std::move(link), nullptr).value());
    }
  }
  std::shared_ptr<Wire> wire;
  std::vector<std::unique_ptr<PointToPoint>> ranks;
};

TEST(PointToPointTest, EveryTypeArrivesExactly) {
  Job job(2);
  for (DataType type : AllDataTypes()) {
    const int64_t count = 1000;
    const int64_t bytes = count * DataTypeSize(type);
    std::vector<unsigned char> sent(bytes), received(bytes, 0);
    for (int64_t i = 0; i < bytes; ++i) sent[i] = (i * 7 + 3) % 251;
    Request out = job.ranks[0]->Isend(sent.data(), count, type, 1, 5).value();
    Request in =
        job.ranks[1]->Irecv(received.data(), count, type, 0, 5).value();
    ASSERT_TRUE(in.Wait().ok()) << DataTypeName(type);
    ASSERT_TRUE(out.Wait().ok()) << DataTypeName(type);
    EXPECT_EQ(sent, received) << DataTypeName(type);
  }
}

TEST(PointToPointTest, RingExchangeWithSendsWaitedFirst) {
  const int32_t size = 4;
  Job job(size);
  std::vector<std::vector<int64_t>> received(size, std::vector<int64_t>(64));
  std::vector<std::vector<int64_t>> sent(size, std::vector<int64_t>(64));
  std::vector<std::thread> threads;
  for (int32_t rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      for (int64_t i = 0; i < 64; ++i) sent[rank][i] = rank * 1000 + i;
      const int32_t right = (rank + 1) % size;
      const int32_t left = (rank + size - 1) % size;
      Request out =
          job.ranks[rank]
              ->Isend(sent[rank].data(), 64, DataType::kInt64, right, 0)
              .value();
      Request in =
          job.ranks[rank]
              ->Irecv(received[rank].data(), 64, DataType::kInt64, left, 0)
              .value();
      EXPECT_TRUE(out.Wait().ok());
      EXPECT_TRUE(in.Wait().ok());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int32_t rank = 0; rank < size; ++rank) {
    const int32_t left = (rank + size - 1) % size;
    for (int64_t i = 0; i < 64; ++i) {
      ASSERT_EQ(received[rank][i], left * 1000 + i);
    }
  }
}

TEST(PointToPointTest, TagsMatchOutOfOrderAndOneTagKeepsItsOrder) {
  Job job(2);
  int32_t a = 1, b = 2, c = 3;
  Request s1 = job.ranks[0]->Isend(&a, 1, DataType::kInt32, 1, 10).value();
  Request s2 = job.ranks[0]->Isend(&b, 1, DataType::kInt32, 1, 20).value();
  Request s3 = job.ranks[0]->Isend(&c, 1, DataType::kInt32, 1, 10).value();
  int32_t x = 0, y = 0, z = 0;
  // Tag 20 first, though it was sent second; the two tag-10 messages come
  // in the order they were sent.
  ASSERT_TRUE(job.ranks[1]->Irecv(&y, 1, DataType::kInt32, 0, 20)->Wait().ok());
  ASSERT_TRUE(job.ranks[1]->Irecv(&x, 1, DataType::kInt32, 0, 10)->Wait().ok());
  ASSERT_TRUE(job.ranks[1]->Irecv(&z, 1, DataType::kInt32, 0, 10)->Wait().ok());
  EXPECT_EQ(x, 1);
  EXPECT_EQ(y, 2);
  EXPECT_EQ(z, 3);
  EXPECT_TRUE(s1.Wait().ok());
  EXPECT_TRUE(s2.Wait().ok());
  EXPECT_TRUE(s3.Wait().ok());
}

TEST(PointToPointTest, SendCompletesOnlyOnceReceived) {
  Job job(2);
  float value = 2.5f;
  Request out =
      job.ranks[0]->Isend(&value, 1, DataType::kFloat32, 1, 0).value();
  EXPECT_EQ(out.Wait(100ms).code(), StatusCode::kTimeout);
  // The timed-out send is over; a new one with the same tag is taken.
  Request again =
      job.ranks[0]->Isend(&value, 1, DataType::kFloat32, 1, 0).value();
  float got = 0;
  Request in = job.ranks[1]->Irecv(&got, 1, DataType::kFloat32, 0, 0).value();
  EXPECT_TRUE(in.Wait().ok());
  EXPECT_EQ(got, 2.5f);
}

TEST(PointToPointTest, ATypeOrCountMismatchFailsBothSidesNamingBoth) {
  Job job(2);
  std::vector<float> data(10, 1.0f);
  std::vector<double> wrong(10, 0.0);
  Request out =
      job.ranks[0]->Isend(data.data(), 10, DataType::kFloat32, 1, 3).value();
  Request in =
      job.ranks[1]->Irecv(wrong.data(), 10, DataType::kFloat64, 0, 3).value();
  Status received = in.Wait();
  Status sent = out.Wait();
  EXPECT_EQ(received.code(), StatusCode::kMismatch);
  EXPECT_EQ(sent.code(), StatusCode::kMismatch);
  EXPECT_NE(received.message().find("rank 0 sent float32 x 10"),
            std::string::npos)
      << received.message();
  EXPECT_NE(sent.message().find("expects float64 x 10"), std::string::npos)
      << sent.message();
  EXPECT_NE(sent.message().find("tag 3"), std::string::npos);
  // The pair carries on.
  std::vector<float> right(10, 0.0f);
  Request out2 =
      job.ranks[0]->Isend(data.data(), 10, DataType::kFloat32, 1, 3).value();
  ASSERT_TRUE(job.ranks[1]
                  ->Irecv(right.data(), 10, DataType::kFloat32, 0, 3)
                  ->Wait()
                  .ok());
  EXPECT_TRUE(out2.Wait().ok());
  EXPECT_EQ(right, data);
  // A count mismatch on an early (unexpected) message, too.
  Request out3 =
      job.ranks[0]->Isend(data.data(), 10, DataType::kFloat32, 1, 4).value();
  std::this_thread::sleep_for(20ms);
  Status short_receive =
      job.ranks[1]->Irecv(right.data(), 9, DataType::kFloat32, 0, 4)->Wait();
  EXPECT_EQ(short_receive.code(), StatusCode::kMismatch);
  EXPECT_EQ(out3.Wait().code(), StatusCode::kMismatch);
}

TEST(PointToPointTest, AReceiveThatTimesOutNamesThePeerAndTag) {
  Job job(2);
  int64_t value = 0;
  Request in = job.ranks[1]->Irecv(&value, 1, DataType::kInt64, 0, 9).value();
  Status status = in.Wait(50ms);
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_NE(status.message().find("receive from rank 0 (tag 9"),
            std::string::npos)
      << status.message();
  // A message arriving afterwards does not land in the abandoned buffer.
  int64_t late = 42;
  Request out = job.ranks[0]->Isend(&late, 1, DataType::kInt64, 1, 9).value();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(value, 0);
  int64_t fresh = 0;
  ASSERT_TRUE(
      job.ranks[1]->Irecv(&fresh, 1, DataType::kInt64, 0, 9)->Wait().ok());
  EXPECT_EQ(fresh, 42);
  EXPECT_TRUE(out.Wait().ok());
}

TEST(PointToPointTest, ALostPeerFailsItsTransfersAndNoOthers) {
  Job job(3);
  int32_t a = 0, b = 0;
  Request from_dead =
      job.ranks[0]->Irecv(&a, 1, DataType::kInt32, 1, 0).value();
  job.wire->Kill(1);
  Status status = from_dead.Wait();
  EXPECT_EQ(status.code(), StatusCode::kPeerFailure);
  EXPECT_NE(status.message().find("rank 1"), std::string::npos)
      << status.message();
  // Sticky for that peer.
  EXPECT_EQ(job.ranks[0]->Isend(&a, 1, DataType::kInt32, 1, 0).status().code(),
            StatusCode::kPeerFailure);
  // Rank 2 is still reachable.
  int32_t two = 2;
  Request out = job.ranks[2]->Isend(&two, 1, DataType::kInt32, 0, 0).value();
  ASSERT_TRUE(job.ranks[0]->Irecv(&b, 1, DataType::kInt32, 2, 0)->Wait().ok());
  EXPECT_EQ(b, 2);
  EXPECT_TRUE(out.Wait().ok());
}

TEST(PointToPointTest, ShutdownAbortsWhatIsPendingAndArgumentsAreChecked) {
  auto job = std::make_unique<Job>(2);
  int32_t value = 0;
  Request in = job->ranks[0]->Irecv(&value, 1, DataType::kInt32, 1, 0).value();
  EXPECT_EQ(
      job->ranks[0]->Irecv(&value, 1, DataType::kInt32, 0, 0).status().code(),
      StatusCode::kInvalidArgument);  // itself
  EXPECT_EQ(
      job->ranks[0]->Irecv(&value, 1, DataType::kInt32, 2, 0).status().code(),
      StatusCode::kInvalidArgument);  // out of range
  EXPECT_EQ(
      job->ranks[0]->Irecv(&value, 1, DataType::kInt32, 1, -1).status().code(),
      StatusCode::kInvalidArgument);  // tag
  EXPECT_EQ(
      job->ranks[0]->Irecv(nullptr, 1, DataType::kInt32, 1, 0).status().code(),
      StatusCode::kInvalidArgument);
  job->ranks[0].reset();
  EXPECT_EQ(in.Wait().code(), StatusCode::kAborted);
  EXPECT_TRUE(in.Test());
}

// A receive posted while an unexpected message's payload is still arriving
// takes that message, not the next one of its tag.
TEST(PointToPointTest, AReceivePostedWhileAMessageArrivesTakesIt) {
  Job job(2, /*read_delay=*/100ms);
  int32_t first = 1, second = 2;
  Request s1 = job.ranks[0]->Isend(&first, 1, DataType::kInt32, 1, 5).value();
  Request s2 = job.ranks[0]->Isend(&second, 1, DataType::kInt32, 1, 5).value();
  std::this_thread::sleep_for(30ms);  // the first payload is on its way
  int32_t a = 0, b = 0;
  Request r1 = job.ranks[1]->Irecv(&a, 1, DataType::kInt32, 0, 5).value();
  Request r2 = job.ranks[1]->Irecv(&b, 1, DataType::kInt32, 0, 5).value();
  ASSERT_TRUE(r1.Wait().ok());
  ASSERT_TRUE(r2.Wait().ok());
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_TRUE(s1.Wait().ok());
  EXPECT_TRUE(s2.Wait().ok());
}

TEST(PointToPointTest, EmptyMessagesAndManyInFlight) {
  Job job(2);
  ASSERT_TRUE(job.ranks[0]->Isend(nullptr, 0, DataType::kFloat32, 1, 1).ok());
  ASSERT_TRUE(
      job.ranks[1]->Irecv(nullptr, 0, DataType::kFloat32, 0, 1)->Wait().ok());
  std::vector<int32_t> values(200), got(200, -1);
  std::vector<Request> sends, receives;
  for (int32_t i = 0; i < 200; ++i) {
    values[i] = i * i;
    receives.push_back(
        job.ranks[1]->Irecv(&got[i], 1, DataType::kInt32, 0, i % 7).value());
  }
  for (int32_t i = 0; i < 200; ++i) {
    sends.push_back(
        job.ranks[0]->Isend(&values[i], 1, DataType::kInt32, 1, i % 7).value());
  }
  for (Request& r : receives) ASSERT_TRUE(r.Wait().ok());
  for (Request& r : sends) ASSERT_TRUE(r.Wait().ok());
  EXPECT_EQ(got, values);
}

// Frames crafted by a peer that does not keep to the protocol, over a real
// tcp link: rank 0 runs point-to-point on its link; "rank 1" formed the
// mesh with it and writes raw bytes on its end of the connection.
class CraftedFrameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = std::make_shared<MemoryStore>();
    std::thread raw([&] {
      TcpMesh::Options options;
      options.rank = 1;
      options.size = 2;
      options.timeout = 10s;
      options.job_secret = testing::kTestJobSecret;
      StatusOr<std::unique_ptr<TcpMesh>> mesh =
          TcpMesh::Connect(options, store.get());
      ASSERT_TRUE(mesh.ok()) << mesh.status().message();
      raw_ = std::move(mesh).value();
    });
    PeerLinkOptions link_options;
    link_options.rank = 0;
    link_options.size = 2;
    link_options.timeout = 10s;
    link_options.job_secret = testing::kTestJobSecret;
    StatusOr<std::unique_ptr<PeerLink>> link =
        CreateTcpPeerLink(link_options, store.get());
    raw.join();
    ASSERT_TRUE(link.ok()) << link.status().message();
    ASSERT_NE(raw_, nullptr);
    PointToPoint::Options options;
    options.rank = 0;
    options.size = 2;
    options.timeout = 5s;
    rank0_ =
        PointToPoint::Start(options, std::move(link).value(), nullptr).value();
  }

  // Writes `header` and then `payload` to rank 0, as they are.
  void Send(const FrameHeader& header, const std::vector<char>& payload) {
    TcpMesh::Transfer transfer;
    transfer.to = 0;
    transfer.send = {{&header, sizeof(header)}};
    if (!payload.empty()) {
      transfer.send.push_back(
          {payload.data(), static_cast<int64_t>(payload.size())});
    }
    ASSERT_TRUE(raw_->Run(transfer, "a crafted frame").ok());
  }

  static FrameHeader DataFrame(int32_t tag, int64_t count,
                               int64_t payload_bytes) {
    FrameHeader header;
    header.kind = 1;  // data
    header.tag = tag;
    header.type = static_cast<int32_t>(DataType::kFloat32);
    header.count = count;
    header.payload_bytes = payload_bytes;
    return header;
  }

  std::unique_ptr<TcpMesh> raw_;
  std::unique_ptr<PointToPoint> rank0_;
};

// A frame longer than its count: the payload would have overrun the
// receive's buffer. The bytes after the receive's one float are a guard.
TEST_F(CraftedFrameTest, AFrameLongerThanItsCountFailsThePeerNamingBoth) {
  std::vector<float> buffer(1 << 12, -1.0f);
  Request in =
      rank0_->Irecv(buffer.data(), 1, DataType::kFloat32, 1, 7).value();
  Send(DataFrame(7, 1, 1 << 14), std::vector<char>(1 << 14, 0x11));
  const Status status = in.Wait();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  for (const char* part :
       {"rank 1", "tag 7", "16384 payload bytes", "calls for 4 payload"}) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << part << " in " << status.message();
  }
  for (size_t i = 1; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], -1.0f) << i;
  // The peer's stream is no longer trusted: later transfers fail at once.
  float value = 0;
  EXPECT_EQ(rank0_->Irecv(&value, 1, DataType::kFloat32, 1, 8).status().code(),
            StatusCode::kInvalidArgument);
}

// A negative length used to throw on the reader thread (std::vector's
// resize) and end the process; an absurd one to allocate it.
TEST_F(CraftedFrameTest, NegativeAndHugeLengthsFailWithoutEndingTheProcess) {
  Send(DataFrame(3, -2, -8), {});
  float value = 0;
  Status status = rank0_->Irecv(&value, 1, DataType::kFloat32, 1, 3).status();
  for (int i = 0; i < 200 && status.ok(); ++i) {
    std::this_thread::sleep_for(10ms);
    status = rank0_->Irecv(&value, 1, DataType::kFloat32, 1, 3).status();
  }
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find("-8 payload bytes"), std::string::npos)
      << status.message();
}

TEST_F(CraftedFrameTest, AHugeCountIsRefusedBeforeAnythingIsAllocated) {
  float value = 0;
  Request in = rank0_->Irecv(&value, 1, DataType::kFloat32, 1, 5).value();
  Send(DataFrame(5, int64_t{1} << 61, int64_t{1} << 62), {});
  const Status status = in.Wait();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find("a valid type and count"), std::string::npos)
      << status.message();
}

// An early (unexpected) message whose payload is shorter than its count:
// the receive posted later used to copy count x 4 bytes out of it.
TEST_F(CraftedFrameTest, AShortUnexpectedMessageIsNeverCopiedPastItsEnd) {
  Send(DataFrame(9, 1000, 4), std::vector<char>(4, 0x22));
  std::this_thread::sleep_for(50ms);
  std::vector<float> buffer(1000, -1.0f);
  const Status status =
      rank0_->Irecv(buffer.data(), 1000, DataType::kFloat32, 1, 9)->Wait();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find("4000 payload bytes"), std::string::npos)
      << status.message();
  for (float f : buffer) ASSERT_EQ(f, -1.0f);
}

}  // namespace
}  // namespace kolo
