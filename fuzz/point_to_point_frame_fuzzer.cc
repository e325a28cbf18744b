// Fuzzes the point-to-point protocol's reading of frames from a peer
// (collectives/point_to_point.cc): every header field, payload_bytes
// included, comes from the other rank over the network. The harness is
// rank 0 of two over a PeerLink whose peer is the input: first it posts a
// few receives and a send that the input describes, then each frame is a
// 48-byte FrameHeader followed by the payload bytes the protocol asks the
// link for, taken from the input too (too few: the peer is lost, as when
// its connection closes). Every receive buffer is exactly count x size
// bytes, so ASan sees a payload written past it.
#include <fuzzer/FuzzedDataProvider.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/point_to_point.h"
#include "fuzz/loopback.h"

namespace {

constexpr int32_t kPeer = 1;

// Rank 1, played by the input. Poll and ReadPayload run on the protocol's
// reader thread only, which alone consumes the input after `start`.
class FuzzedPeer : public kolo::PeerLink {
 public:
  FuzzedPeer(FuzzedDataProvider* input, std::atomic<bool>* start)
      : input_(input), start_(start) {}

  kolo::Status Write(int32_t, const kolo::FrameHeader&, const void*,
                     kolo::LinkClock::time_point) override {
    return kolo::Status::Ok();
  }

  kolo::LinkEvent Poll(std::chrono::milliseconds wait) override {
    kolo::LinkEvent event;
    if (aborted_.load() || !start_->load()) {
      std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(1)));
      return event;
    }
    if (lost_) return event;
    if (input_->remaining_bytes() < sizeof(kolo::FrameHeader)) {
      lost_ = true;
      event.kind = kolo::LinkEvent::Kind::kPeerLost;
      event.peer = kPeer;
      event.error = kolo::PeerFailure("the fuzzed peer has no more frames");
      return event;
    }
    input_->ConsumeData(&event.header, sizeof(event.header));
    event.kind = kolo::LinkEvent::Kind::kFrame;
    event.peer = kPeer;
    return event;
  }

  kolo::Status ReadPayload(int32_t, void* payload, int64_t bytes,
                           kolo::LinkClock::time_point) override {
    if (bytes < 0 || static_cast<uint64_t>(bytes) > input_->remaining_bytes())
      return kolo::PeerFailure("the fuzzed peer closed mid-payload");
    input_->ConsumeData(payload, static_cast<size_t>(bytes));
    return kolo::Status::Ok();
  }

  void Abort() override { aborted_.store(true); }
  const char* engine() const override { return "fuzzed"; }

 private:
  FuzzedDataProvider* const input_;
  std::atomic<bool>* const start_;
  std::atomic<bool> aborted_{false};
  bool lost_ = false;
};

struct Posted {
  std::vector<char> buffer;
  kolo::Request request;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  std::atomic<bool> start{false};
  kolo::PointToPoint::Options options;
  options.rank = 0;
  options.size = 2;
  options.timeout = std::chrono::seconds(5);
  auto p2p = kolo::PointToPoint::Start(
      options, std::make_unique<FuzzedPeer>(&input, &start), nullptr);
  if (!p2p.ok()) kolo::fuzz::HarnessFailure("fuzz: start point to point");
  std::vector<Posted> posted(input.ConsumeIntegralInRange<int>(1, 3));
  for (size_t i = 0; i < posted.size(); ++i) {
    const auto type = static_cast<kolo::DataType>(
        input.ConsumeIntegralInRange<int32_t>(0, 7));
    const int64_t count = input.ConsumeIntegralInRange<int64_t>(0, 64);
    const int32_t tag = input.ConsumeIntegralInRange<int32_t>(0, 3);
    const bool send = i == 0 && input.ConsumeBool();
    posted[i].buffer.resize(count * kolo::DataTypeSize(type));
    auto request =
        send ? (*p2p)->Isend(posted[i].buffer.data(), count, type, kPeer, tag)
             : (*p2p)->Irecv(posted[i].buffer.data(), count, type, kPeer, tag);
    if (!request.ok()) kolo::fuzz::HarnessFailure("fuzz: post a transfer");
    posted[i].request = *request;
  }
  start.store(true);
  // The peer is lost once the input ends, so every transfer completes.
  for (Posted& p : posted) (void)p.request.Wait(std::chrono::seconds(10));
  p2p->reset();
  return 0;
}
