#include "collectives/point_to_point.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/peer_failure.h"
#include "collectives/peer_links.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "metrics/process_arena.h"

namespace kolo {

enum class FrameKind : int32_t { kData = 1, kAck = 2 };
enum class AckVerdict : int32_t { kTaken = 0, kMismatch = 1 };

namespace internal {

// One posted transfer. Every field below `core` is guarded by the core's
// mutex.
struct TransferState {
  enum class Kind { kSend, kRecv };
  // kQueued: in the writer's queue (send) or among the posted receives;
  // kBusy: the writer or reader is moving its bytes; kWritten: a send whose
  // frame is out, awaiting its ack; kDone: finished, `status` says how.
  enum class Phase { kQueued, kBusy, kWritten, kDone };

  Kind kind = Kind::kSend;
  int32_t peer = 0;
  int32_t tag = 0;
  DataType type = DataType::kFloat32;
  int64_t count = 0;
  const void* send_data = nullptr;
  void* recv_data = nullptr;
  uint64_t sequence = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::shared_ptr<PointToPoint::Core> core;

  Phase phase = Phase::kQueued;
  bool written = false;
  bool acked = false;
  Status ack_status;
  Status status;
};

}  // namespace internal

namespace {

using internal::TransferState;
using TransferPtr = std::shared_ptr<TransferState>;

std::string Describe(DataType type, int64_t count) {
  return std::string(DataTypeName(type)) + " x " + std::to_string(count);
}

std::string DescribeTransfer(const TransferState& t) {
  return std::string(t.kind == TransferState::Kind::kSend
                         ? "send to rank "
                         : "receive from rank ") +
         std::to_string(t.peer) + " (tag " + std::to_string(t.tag) + ", " +
         Describe(t.type, t.count) + ")";
}

std::string Seconds(std::chrono::milliseconds timeout) {
  const double seconds = static_cast<double>(timeout.count()) / 1000.0;
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", seconds);
  return text;
}

// An unexpected message: arrived before any receive matched it. It is
// listed as soon as its header is in, before its payload: a receive posted
// while the payload still moves claims it then and completes when the
// reader has all of it, so no receive can slip past a message that is
// arriving and take a later one of the same tag.
struct Unexpected {
  int32_t tag;
  DataType type;
  int64_t count;
  uint64_t sequence;
  std::vector<char> bytes;
  bool complete = false;
  TransferPtr claimed;  // a receive that matched it before it was complete
};

// kolo_p2p_bytes_total{direction}: payload bytes of completed transfers.
const metrics::Counter& TransferBytes(TransferState::Kind kind) {
  static const metrics::Counter sent = metrics::KoloCounter(
      "kolo_p2p_bytes_total",
      "Payload bytes of point-to-point transfers that completed.",
      {{"direction", "sent"}});
  static const metrics::Counter received = metrics::KoloCounter(
      "kolo_p2p_bytes_total",
      "Payload bytes of point-to-point transfers that completed.",
      {{"direction", "received"}});
  return kind == TransferState::Kind::kSend ? sent : received;
}

struct QueuedAck {
  int32_t peer;
  FrameHeader header;
};

}  // namespace

class PointToPoint::Core : public std::enable_shared_from_this<Core> {
 public:
  Core(const Options& options, std::unique_ptr<PeerLink> link,
       std::shared_ptr<Store> news)
      : options_(options),
        link_(std::move(link)),
        engine_(link_->engine()),
        news_(std::move(news)),
        next_sequence_(options.size, 0),
        posted_(options.size),
        unexpected_(options.size),
        peer_error_(options.size) {}

  // The threads start with this rank's first transfer, so a job that never
  // uses point to point leaves its engine to the runtime alone (an MPI
  // job's reader would otherwise poll MPI beside every collective).
  void StartThreadsLocked() KOLO_REQUIRES(mutex_) {
    if (started_) return;
    started_ = true;
    writer_ = std::thread([this] { WriterLoop(); });
    reader_ = std::thread([this] { ReaderLoop(); });
  }

  // The acks this rank owes go out first (for up to half a second): a
  // sender whose message this rank took must not see it fail because the
  // receiver shut down right after.
  void Stop() {
    {
      MutexLock lock(&mutex_);
      stopping_ = true;
      work_.NotifyAll();
      const auto deadline = LinkClock::now() + std::chrono::milliseconds(500);
      while (started_ && !writer_done_ && work_.WaitUntil(&mutex_, deadline)) {
      }
    }
    link_->Abort();
    if (writer_.joinable()) writer_.join();
    if (reader_.joinable()) reader_.join();
    link_.reset();
    MutexLock lock(&mutex_);
    FailAllLocked(Aborted("kolo::Shutdown() ended the transfer"));
  }

  const char* engine() const { return engine_.c_str(); }
  int32_t rank() const { return options_.rank; }
  int32_t size() const { return options_.size; }

  StatusOr<Request> Post(TransferPtr transfer) {
    transfer->core = shared_from_this();
    transfer->timeout = options_.timeout;
    const int32_t peer = transfer->peer;
    MutexLock lock(&mutex_);
    if (stopping_) return Aborted("kolo is shutting down");
    if (!peer_error_[peer].ok()) return peer_error_[peer];
    StartThreadsLocked();
    if (transfer->kind == TransferState::Kind::kSend) {
      transfer->sequence = next_sequence_[peer]++;
      sends_.push_back(transfer);
      work_.NotifyAll();
      return Request(transfer);
    }
    for (auto it = unexpected_[peer].begin(); it != unexpected_[peer].end();
         ++it) {
      if (it->tag != transfer->tag || it->claimed) continue;
      if (!it->complete) {
        it->claimed = transfer;
        transfer->phase = TransferState::Phase::kBusy;
        return Request(transfer);
      }
      Unexpected message = std::move(*it);
      unexpected_[peer].erase(it);
      TakeLocked(transfer, message.type, message.count, message.sequence,
                 message.bytes);
      return Request(transfer);
    }
    posted_[peer].push_back(transfer);
    return Request(transfer);
  }

  // Request::Wait.
  Status Wait(const TransferPtr& transfer, std::chrono::milliseconds timeout) {
    const auto deadline = LinkClock::now() + timeout;
    MutexLock lock(&mutex_);
    while (transfer->phase != TransferState::Phase::kDone) {
      if (done_.WaitUntil(&mutex_, deadline)) continue;
      if (LinkClock::now() < deadline) continue;
      if (transfer->phase == TransferState::Phase::kBusy) {
        // The link call moving its bytes ends by its own deadline.
        done_.WaitFor(&mutex_, std::chrono::milliseconds(100));
        continue;
      }
      if (transfer->phase != TransferState::Phase::kDone) {
        CancelLocked(transfer, timeout);
      }
    }
    return transfer->status;
  }

  bool Test(const TransferPtr& transfer) {
    MutexLock lock(&mutex_);
    return transfer->phase == TransferState::Phase::kDone;
  }

 private:
  void CompleteLocked(const TransferPtr& transfer, Status status)
      KOLO_REQUIRES(mutex_) {
    if (transfer->phase == TransferState::Phase::kDone) return;
    transfer->phase = TransferState::Phase::kDone;
    if (status.ok()) {
      TransferBytes(transfer->kind)
          .Increment(transfer->count * DataTypeSize(transfer->type));
    }
    transfer->status = std::move(status);
    done_.NotifyAll();
  }

  // A receive meets a message of `type` x `count`: copies it in when they
  // agree (`held` holds it) and queues the sender's ack either way. Never
  // copies more than `held` has: HandleFrame already refused a frame whose
  // length differs from its type and count, and this keeps that true here.
  void TakeLocked(const TransferPtr& receive, DataType type, int64_t count,
                  uint64_t sequence, const std::vector<char>& held)
      KOLO_REQUIRES(mutex_) {
    const bool agree = type == receive->type && count == receive->count;
    const int64_t wanted = count * DataTypeSize(type);
    if (agree && wanted > static_cast<int64_t>(held.size())) {
      QueueAckLocked(*receive, sequence, false);
      CompleteLocked(
          receive, Internal(DescribeTransfer(*receive) + " needs " +
                            std::to_string(wanted) + " bytes; rank " +
                            std::to_string(receive->peer) +
                            "'s message holds " + std::to_string(held.size())));
      return;
    }
    if (agree && count > 0) {
      std::memcpy(receive->recv_data, held.data(), wanted);
    }
    QueueAckLocked(*receive, sequence, agree);
    CompleteLocked(receive, agree ? Status::Ok()
                                  : MismatchForReceiver(*receive, type, count));
  }

  void QueueAckLocked(const TransferState& receive, uint64_t sequence,
                      bool agree) KOLO_REQUIRES(mutex_) {
    FrameHeader ack;
    ack.kind = static_cast<int32_t>(FrameKind::kAck);
    ack.tag = receive.tag;
    ack.type = static_cast<int32_t>(receive.type);
    ack.count = receive.count;
    ack.sequence = sequence;
    ack.result = static_cast<int32_t>(agree ? AckVerdict::kTaken
                                            : AckVerdict::kMismatch);
    acks_.push_back({receive.peer, ack});
    work_.NotifyAll();
  }

  static Status MismatchForReceiver(const TransferState& receive, DataType type,
                                    int64_t count) {
    return Mismatch(DescribeTransfer(receive) + ": rank " +
                    std::to_string(receive.peer) + " sent " +
                    Describe(type, count) + " with that tag");
  }

  void CancelLocked(const TransferPtr& transfer,
                    std::chrono::milliseconds timeout) KOLO_REQUIRES(mutex_) {
    const int32_t peer = transfer->peer;
    if (transfer->kind == TransferState::Kind::kSend) {
      for (auto it = sends_.begin(); it != sends_.end(); ++it) {
        if (*it == transfer) {
          sends_.erase(it);
          break;
        }
      }
      awaiting_ack_.erase({peer, transfer->sequence});
      // The frame may be out: the pair's sequence of sends is broken for
      // good only when it is not, but a peer that takes nothing for the
      // whole timeout is treated as frozen either way.
      CompleteLocked(transfer,
                     Timeout(DescribeTransfer(*transfer) + " timed out after " +
                             Seconds(timeout) + ": rank " +
                             std::to_string(peer) + " did not receive it"));
      return;
    }
    posted_[peer].remove(transfer);
    CompleteLocked(transfer,
                   Timeout(DescribeTransfer(*transfer) + " timed out after " +
                           Seconds(timeout) + ": rank " + std::to_string(peer) +
                           " sent nothing with that tag"));
  }

  void FailPeerLocked(int32_t peer, const Status& error) KOLO_REQUIRES(mutex_) {
    for (int32_t p = 0; p < options_.size; ++p) {
      if (peer >= 0 && p != peer) continue;
      if (p == options_.rank) continue;
      if (peer_error_[p].ok()) peer_error_[p] = error;
      for (const TransferPtr& t : posted_[p]) CompleteLocked(t, peer_error_[p]);
      posted_[p].clear();
      // A message still arriving is the reader's to finish and fail.
      unexpected_[p].remove_if([](const Unexpected& u) { return u.complete; });
    }
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (peer < 0 || (*it)->peer == peer) {
        CompleteLocked(*it, peer_error_[(*it)->peer]);
        it = sends_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = awaiting_ack_.begin(); it != awaiting_ack_.end();) {
      if (peer < 0 || it->first.first == peer) {
        if (it->second->phase != TransferState::Phase::kBusy) {
          CompleteLocked(it->second, peer_error_[it->first.first]);
        }
        it = awaiting_ack_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void FailAllLocked(const Status& error) KOLO_REQUIRES(mutex_) {
    for (int32_t p = 0; p < options_.size; ++p) {
      if (p != options_.rank && peer_error_[p].ok()) peer_error_[p] = error;
    }
    FailPeerLocked(-1, error);
  }

  // A link that knows which peer it lost names it; only a loss of unknown
  // origin waits (up to a few seconds) for the job's failure news, because
  // the reader must not stall every other peer's traffic for it.
  Status Explain(const Status& error, int32_t peer) {
    if (peer >= 0) {
      return error.WithContext("point-to-point link to rank " +
                               std::to_string(peer) + " (" + engine_ + ")");
    }
    return ExplainPeerFailure(error, news_.get(),
                              "point-to-point link (" + engine_ + ")");
  }

  void WriterLoop() {
    pthread_setname_np(pthread_self(), "kolo-p2p-write");
    for (;;) {
      QueuedAck ack;
      TransferPtr send;
      {
        MutexLock lock(&mutex_);
        while (!stopping_ && acks_.empty() && sends_.empty()) {
          work_.Wait(&mutex_);
        }
        if (stopping_ && acks_.empty()) {
          writer_done_ = true;
          work_.NotifyAll();
          return;
        }
        if (!acks_.empty()) {
          ack = acks_.front();
          acks_.pop_front();
        } else {
          send = sends_.front();
          sends_.pop_front();
          send->phase = TransferState::Phase::kBusy;
          awaiting_ack_[{send->peer, send->sequence}] = send;
        }
      }
      if (!send) {
        if (!peer_ok(ack.peer)) continue;
        Status written = link_->Write(ack.peer, ack.header, nullptr,
                                      LinkClock::now() + options_.timeout);
        if (!written.ok()) LoseWriter(ack.peer, written);
        continue;
      }
      FrameHeader header;
      header.kind = static_cast<int32_t>(FrameKind::kData);
      header.tag = send->tag;
      header.type = static_cast<int32_t>(send->type);
      header.count = send->count;
      header.sequence = send->sequence;
      header.payload_bytes = send->count * DataTypeSize(send->type);
      Status written = link_->Write(send->peer, header, send->send_data,
                                    LinkClock::now() + options_.timeout);
      if (!written.ok() && written.code() != StatusCode::kTimeout) {
        written = Explain(written, send->peer);
      }
      MutexLock lock(&mutex_);
      if (!written.ok()) awaiting_ack_.erase({send->peer, send->sequence});
      if (!written.ok()) {
        const Status error =
            written.code() == StatusCode::kTimeout
                ? Timeout(DescribeTransfer(*send) + ": rank " +
                          std::to_string(send->peer) + " took nothing for " +
                          Seconds(options_.timeout) + ": " + written.message())
                : written;
        CompleteLocked(send, error);
        FailPeerLocked(send->peer, error);
        continue;
      }
      send->written = true;
      if (!peer_error_[send->peer].ok() && !send->acked) {
        // The peer was lost while the frame went out.
        CompleteLocked(send, peer_error_[send->peer]);
      } else if (send->acked) {
        CompleteLocked(send, send->ack_status);
      } else if (send->phase != TransferState::Phase::kDone) {
        send->phase = TransferState::Phase::kWritten;
      }
    }
  }

  bool peer_ok(int32_t peer) {
    MutexLock lock(&mutex_);
    return peer_error_[peer].ok();
  }

  void LoseWriter(int32_t peer, const Status& error) {
    const Status explained = Explain(error, peer);
    MutexLock lock(&mutex_);
    FailPeerLocked(peer, explained);
  }

  void ReaderLoop() {
    pthread_setname_np(pthread_self(), "kolo-p2p-read");
    for (;;) {
      {
        MutexLock lock(&mutex_);
        if (stopping_) return;
      }
      LinkEvent event = link_->Poll(std::chrono::milliseconds(200));
      switch (event.kind) {
        case LinkEvent::Kind::kNone: break;
        case LinkEvent::Kind::kPeerLost: {
          const Status explained = Explain(event.error, event.peer);
          MutexLock lock(&mutex_);
          if (!stopping_) FailPeerLocked(event.peer, explained);
          break;
        }
        case LinkEvent::Kind::kFrame:
          HandleFrame(event.peer, event.header);
          break;
      }
    }
  }

  // The payload bytes a frame's own kind, type and count call for; -1 when
  // they describe none (an unknown kind or type, a negative count, or one
  // whose bytes would pass the bound or overflow).
  static int64_t ExpectedPayload(const FrameHeader& header) {
    if (header.kind == static_cast<int32_t>(FrameKind::kAck)) return 0;
    if (header.kind != static_cast<int32_t>(FrameKind::kData)) return -1;
    const int64_t element = DataTypeSize(static_cast<DataType>(header.type));
    if (element <= 0 || header.count < 0 ||
        header.count > kMaxFramePayloadBytes / element) {
      return -1;
    }
    return header.count * element;
  }

  // Every frame's length is checked against its header before a byte of
  // its payload is read or a buffer sized for it. A frame that fails the
  // check leaves the peer's stream unframed for good: the peer fails with
  // the check's error (its transfers, and every later one, report it) and
  // nothing more it sends is read. The reader thread goes on serving the
  // other peers.
  void HandleFrame(int32_t peer, const FrameHeader& header) {
    {
      MutexLock lock(&mutex_);
      if (!peer_error_[peer].ok()) return;
    }
    Status checked = CheckArrivingPayload(
        std::string("point-to-point (") + engine_ + ")", options_.rank, peer,
        header, ExpectedPayload(header));
    if (!checked.ok()) {
      MutexLock lock(&mutex_);
      FailPeerLocked(peer, checked);
      return;
    }
    if (header.kind == static_cast<int32_t>(FrameKind::kAck)) {
      HandleAck(peer, header);
    } else {
      HandleData(peer, header);
    }
  }

  void HandleAck(int32_t peer, const FrameHeader& ack) {
    MutexLock lock(&mutex_);
    auto it = awaiting_ack_.find({peer, ack.sequence});
    if (it == awaiting_ack_.end()) return;  // its send timed out meanwhile
    TransferPtr send = it->second;
    awaiting_ack_.erase(it);
    send->acked = true;
    if (ack.result == static_cast<int32_t>(AckVerdict::kMismatch)) {
      send->ack_status =
          Mismatch(DescribeTransfer(*send) + ": rank " + std::to_string(peer) +
                   "'s receive with that tag expects " +
                   Describe(static_cast<DataType>(ack.type), ack.count));
    }
    if (send->written) CompleteLocked(send, send->ack_status);
  }

  // kInvalidArgument when holding `header`'s payload would take what is
  // held for `peer`'s unclaimed messages past max_unexpected_bytes.
  Status RoomForUnexpectedLocked(int32_t peer, const FrameHeader& header)
      KOLO_REQUIRES(mutex_) {
    int64_t held = 0;
    for (const Unexpected& u : unexpected_[peer]) {
      held += static_cast<int64_t>(u.bytes.size());
    }
    if (header.payload_bytes <= options_.max_unexpected_bytes - held) {
      return Status::Ok();
    }
    return InvalidArgument(
        "point-to-point (" + engine_ + "): rank " + std::to_string(peer) +
        " sent " + std::to_string(header.payload_bytes) + " bytes with tag " +
        std::to_string(header.tag) + " before any receive for them, while " +
        std::to_string(held) + " bytes of its messages wait unclaimed; at " +
        "most " + std::to_string(options_.max_unexpected_bytes) +
        " are held for one peer");
  }

  void HandleData(int32_t peer, const FrameHeader& header) {
    const DataType type = static_cast<DataType>(header.type);
    const auto deadline = LinkClock::now() + options_.timeout;
    TransferPtr receive;
    std::list<Unexpected>::iterator arriving;
    {
      MutexLock lock(&mutex_);
      for (auto it = posted_[peer].begin(); it != posted_[peer].end(); ++it) {
        if ((*it)->tag != header.tag) continue;
        receive = *it;
        posted_[peer].erase(it);
        break;
      }
      if (receive) {
        receive->phase = TransferState::Phase::kBusy;
      } else {
        Status room = RoomForUnexpectedLocked(peer, header);
        if (!room.ok()) {
          FailPeerLocked(peer, room);
          return;
        }
        arriving = unexpected_[peer].insert(unexpected_[peer].end(),
                                            Unexpected{header.tag,
                                                       type,
                                                       header.count,
                                                       header.sequence,
                                                       {},
                                                       false,
                                                       nullptr});
      }
    }
    const bool agree =
        receive && receive->type == type && receive->count == header.count;
    Status read;
    std::vector<char> held;
    if (agree) {
      read = link_->ReadPayload(peer, receive->recv_data, header.payload_bytes,
                                deadline);
    } else {
      held.resize(header.payload_bytes);
      read =
          link_->ReadPayload(peer, held.data(), header.payload_bytes, deadline);
    }
    const Status explained = read.ok() ? read : Explain(read, peer);
    MutexLock lock(&mutex_);
    if (!receive) {
      // A receive may have claimed the message while it arrived.
      receive = arriving->claimed;
      if (!explained.ok()) {
        unexpected_[peer].erase(arriving);
        if (receive) CompleteLocked(receive, explained);
        FailPeerLocked(peer, explained);
      } else if (receive) {
        unexpected_[peer].erase(arriving);
        TakeLocked(receive, type, header.count, header.sequence, held);
      } else {
        arriving->bytes = std::move(held);
        arriving->complete = true;
      }
      return;
    }
    if (!explained.ok()) {
      CompleteLocked(receive, explained);
      FailPeerLocked(peer, explained);
      return;
    }
    QueueAckLocked(*receive, header.sequence, agree);
    CompleteLocked(receive,
                   agree ? Status::Ok()
                         : MismatchForReceiver(*receive, type, header.count));
  }

  const Options options_;
  // Owned until Stop; requests may keep the core alive longer.
  std::unique_ptr<PeerLink> link_;
  const std::string engine_;
  const std::shared_ptr<Store> news_;
  std::thread writer_;
  std::thread reader_;

  Mutex mutex_;
  CondVar work_;  // acks or sends queued, stopping, or the writer done
  CondVar done_;  // a transfer completed
  bool started_ KOLO_GUARDED_BY(mutex_) = false;
  bool stopping_ KOLO_GUARDED_BY(mutex_) = false;
  bool writer_done_ KOLO_GUARDED_BY(mutex_) = false;
  std::deque<QueuedAck> acks_ KOLO_GUARDED_BY(mutex_);
  std::deque<TransferPtr> sends_ KOLO_GUARDED_BY(mutex_);
  std::map<std::pair<int32_t, uint64_t>, TransferPtr> awaiting_ack_
      KOLO_GUARDED_BY(mutex_);
  std::vector<uint64_t> next_sequence_ KOLO_GUARDED_BY(mutex_);
  std::vector<std::list<TransferPtr>> posted_ KOLO_GUARDED_BY(mutex_);
  std::vector<std::list<Unexpected>> unexpected_ KOLO_GUARDED_BY(mutex_);
  std::vector<Status> peer_error_ KOLO_GUARDED_BY(mutex_);
};

Request::Request(std::shared_ptr<internal::TransferState> state)
    : state_(std::move(state)) {}

bool Request::Test() const {
  if (!state_) return true;
  return state_->core->Test(state_);
}

Status Request::Wait() const {
  if (!state_) return FailedPrecondition("waiting on an empty kolo::Request");
  return state_->core->Wait(state_, state_->timeout);
}

Status Request::Wait(std::chrono::milliseconds timeout) const {
  if (!state_) return FailedPrecondition("waiting on an empty kolo::Request");
  return state_->core->Wait(state_, timeout);
}

PointToPoint::PointToPoint(std::shared_ptr<Core> core)
    : core_(std::move(core)) {}

PointToPoint::~PointToPoint() { core_->Stop(); }

StatusOr<std::unique_ptr<PointToPoint>> PointToPoint::Start(
    const Options& options, std::unique_ptr<PeerLink> link,
    std::shared_ptr<Store> news) {
  if (!link) return InvalidArgument("point-to-point needs a link");
  auto core = std::make_shared<Core>(options, std::move(link), std::move(news));
  return std::unique_ptr<PointToPoint>(new PointToPoint(std::move(core)));
}

const char* PointToPoint::engine() const { return core_->engine(); }

namespace {

Status CheckTransfer(const char* what, const void* data, int64_t count,
                     int32_t peer, int32_t tag, int32_t rank, int32_t size) {
  const std::string call = std::string(what) + " with rank " +
                           std::to_string(peer) + " and tag " +
                           std::to_string(tag);
  if (peer < 0 || peer >= size) {
    return InvalidArgument(call + ": rank " + std::to_string(peer) +
                           " is not in the world of " + std::to_string(size) +
                           " ranks");
  }
  if (peer == rank) {
    return InvalidArgument(call + ": a rank cannot " + what + " itself");
  }
  if (tag < 0 || tag >= kMaxTag) {
    return InvalidArgument(call + ": tags are in [0, 2^30)");
  }
  if (count < 0) {
    return InvalidArgument(call + ": count " + std::to_string(count) +
                           " is negative");
  }
  if (count > 0 && data == nullptr) {
    return InvalidArgument(call + ": null buffer for " + std::to_string(count) +
                           " elements");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Request> PointToPoint::Isend(const void* data, int64_t count,
                                      DataType type, int32_t peer,
                                      int32_t tag) {
  KOLO_RETURN_IF_ERROR(CheckTransfer("send to", data, count, peer, tag,
                                     core_->rank(), core_->size()));
  return Post(/*is_send=*/true, data, nullptr, count, type, peer, tag);
}

StatusOr<Request> PointToPoint::Irecv(void* data, int64_t count, DataType type,
                                      int32_t peer, int32_t tag) {
  KOLO_RETURN_IF_ERROR(CheckTransfer("receive from", data, count, peer, tag,
                                     core_->rank(), core_->size()));
  return Post(/*is_send=*/false, nullptr, data, count, type, peer, tag);
}

StatusOr<Request> PointToPoint::Post(bool is_send, const void* send_data,
                                     void* recv_data, int64_t count,
                                     DataType type, int32_t peer, int32_t tag) {
  auto transfer = std::make_shared<TransferState>();
  transfer->kind =
      is_send ? TransferState::Kind::kSend : TransferState::Kind::kRecv;
  transfer->peer = peer;
  transfer->tag = tag;
  transfer->type = type;
  transfer->count = count;
  transfer->send_data = send_data;
  transfer->recv_data = recv_data;
  return core_->Post(std::move(transfer));
}

StatusOr<std::unique_ptr<PeerLink>> CreatePeerLinkFor(
    BackendKind backend, const PeerLinkOptions& options,
    std::shared_ptr<Store> store) {
  switch (backend) {
    case BackendKind::kShm: return CreateShmPeerLink(options, store.get());
    case BackendKind::kTcp: return CreateTcpPeerLink(options, store.get());
    case BackendKind::kGloo:
      return CreateGlooPeerLink(options, std::move(store));
    case BackendKind::kMpi: return CreateMpiPeerLink(options);
  }
  return InvalidArgument("point-to-point: unknown engine");
}

}  // namespace kolo
