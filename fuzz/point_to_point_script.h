// A script of what a peer sends rank 0 of a two-rank point-to-point job
// (collectives/point_to_point.cc), read from bytes: the fuzzer's inputs and
// the unit tests that replay the inputs it found (fuzz/regressions/).
//
// Layout. Byte 0: how many transfers rank 0 posts (1 + byte % 3). Then 4
// bytes per transfer: data type (byte % 8), count (byte % 65), tag
// (byte % 4), and for the first only, send (odd) or receive. Then frames
// from rank 1: a 48-byte FrameHeader, then whatever payload bytes the
// protocol asks the link for, taken from the bytes that follow. Missing
// bytes read as 0; when the frames run out, rank 1 is lost (as when its
// connection closes). Every buffer is exactly count x size bytes, so ASan
// sees a payload written or read past it.
#ifndef KOLO_FUZZ_POINT_TO_POINT_SCRIPT_H_
#define KOLO_FUZZ_POINT_TO_POINT_SCRIPT_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/point_to_point.h"

namespace kolo::fuzz {

// Rank 1, played by the script's frames. Poll and ReadPayload run on the
// protocol's reader thread only, which alone reads the frames once
// `start` is set.
class ScriptedPeer : public PeerLink {
 public:
  ScriptedPeer(std::string frames, const std::atomic<bool>* start)
      : frames_(std::move(frames)), start_(start) {}

  Status Write(int32_t, const FrameHeader&, const void*,
               LinkClock::time_point) override {
    return Status::Ok();
  }

  LinkEvent Poll(std::chrono::milliseconds wait) override {
    LinkEvent event;
    if (aborted_.load() || !start_->load() || lost_) {
      std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(1)));
      return event;
    }
    if (frames_.size() - at_ < sizeof(FrameHeader)) {
      lost_ = true;
      event.kind = LinkEvent::Kind::kPeerLost;
      event.peer = 1;
      event.error = PeerFailure("rank 1's script has no more frames");
      return event;
    }
    std::memcpy(&event.header, frames_.data() + at_, sizeof(FrameHeader));
    at_ += sizeof(FrameHeader);
    event.kind = LinkEvent::Kind::kFrame;
    event.peer = 1;
    return event;
  }

  Status ReadPayload(int32_t, void* payload, int64_t bytes,
                     LinkClock::time_point) override {
    if (bytes < 0 || static_cast<uint64_t>(bytes) > frames_.size() - at_)
      return PeerFailure("rank 1 closed its connection mid-payload");
    if (bytes == 0) return Status::Ok();  // an empty receive has no buffer
    std::memcpy(payload, frames_.data() + at_, static_cast<size_t>(bytes));
    at_ += static_cast<size_t>(bytes);
    return Status::Ok();
  }

  void Abort() override { aborted_.store(true); }
  const char* engine() const override { return "scripted"; }

 private:
  const std::string frames_;
  const std::atomic<bool>* const start_;
  std::atomic<bool> aborted_{false};
  size_t at_ = 0;
  bool lost_ = false;
};

// Runs the script in `bytes`; the final status of each posted transfer.
inline std::vector<Status> RunPointToPointScript(const std::string& bytes) {
  size_t at = 0;
  const auto next = [&]() -> uint8_t {
    return at < bytes.size() ? static_cast<uint8_t>(bytes[at++]) : 0;
  };
  struct Posted {
    std::vector<char> buffer;
    Request request;
  };
  std::vector<Posted> posted(1 + next() % 3);
  struct Transfer {
    DataType type;
    int64_t count;
    int32_t tag;
    bool send;
  };
  std::vector<Transfer> transfers;
  for (size_t i = 0; i < posted.size(); ++i) {
    const auto type = static_cast<DataType>(next() % 8);
    const int64_t count = next() % 65;
    const int32_t tag = next() % 4;
    const bool send = (next() & 1) != 0 && i == 0;
    transfers.push_back({type, count, tag, send});
  }
  std::atomic<bool> start{false};
  PointToPoint::Options options;
  options.rank = 0;
  options.size = 2;
  options.timeout = std::chrono::seconds(5);
  // Below the fuzzer's malloc limit, so that the cap, not the allocator,
  // answers a frame claiming more than a process should hold.
  options.max_unexpected_bytes = int64_t{1} << 20;
  auto p2p =
      PointToPoint::Start(options,
                          std::make_unique<ScriptedPeer>(
                              bytes.substr(std::min(at, bytes.size())), &start),
                          nullptr);
  if (!p2p.ok()) std::abort();  // a harness failure: no link to start
  for (size_t i = 0; i < posted.size(); ++i) {
    const Transfer& t = transfers[i];
    posted[i].buffer.resize(t.count * DataTypeSize(t.type));
    void* data = posted[i].buffer.data();
    auto request = t.send ? (*p2p)->Isend(data, t.count, t.type, 1, t.tag)
                          : (*p2p)->Irecv(data, t.count, t.type, 1, t.tag);
    if (!request.ok()) std::abort();  // arguments the script keeps in range
    posted[i].request = *request;
  }
  start.store(true);
  // Rank 1 is lost once the frames end, so every transfer completes.
  std::vector<Status> statuses;
  for (Posted& p : posted)
    statuses.push_back(p.request.Wait(std::chrono::seconds(10)));
  p2p->reset();
  return statuses;
}

}  // namespace kolo::fuzz

#endif  // KOLO_FUZZ_POINT_TO_POINT_SCRIPT_H_
