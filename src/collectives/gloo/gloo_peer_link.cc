// The gloo PeerLink: frames over a Gloo TCP context of the link's own (full
// mesh, rendezvous under the caller's prefixed store), moved with Gloo's
// unbound buffers.
//
// A frame travels as two unbound-buffer messages on the pair to its peer:
// the 48-byte header on slot kHeaderSlot, then, when payload_bytes > 0, the
// payload on slot kPayloadSlot (an empty payload sends nothing: both ends
// know its size from the header). Gloo's TCP transport is a rendezvous: a
// send moves bytes only once the receiver has posted a matching receive, and
// messages of one slot on one pair match in the order they were posted. So:
//
//   writer                               peer's reader
//   send header (slot 1) ───────────────▶ posted header receive (always)
//   send payload (slot 2) ──┐            Poll hands the header out
//   waitSend both           └──────────▶ ReadPayload posts the payload
//                                        receive of exactly that size
//
// A Write therefore blocks until the peer's reader has taken the frame,
// and the reader never writes: two ranks writing to each other at once
// cannot deadlock. It also makes ReadPayload a round trip (the receive's
// notice to the sender, then the bytes from the sender's Gloo thread), so
// a payload read lasts milliseconds on a busy host where shm's is a copy:
// whatever the caller's other threads do meanwhile must not assume the
// frame is still unread or already done.
//
// The header receives are kept posted by one receiver thread per peer
// rather than one any-source receive, for two reasons found in this Gloo
// (0.0~git20220518): an any-source receive waits in the context, not in a
// pair, so a pair that breaks never wakes it, whereas a receive posted on
// the pair fails with the pair and names the peer it lost; and a wait
// that times out by itself (waitRecv/waitSend with a timeout) calls
// signalException on the whole context, closing every pair. The receiver
// threads therefore wait without a practical limit and are woken only by
// abortWaitRecv (Abort), which leaves a posted receive in place; Poll
// waits on the queue they fill, so a Poll that returns kNone cancels
// nothing. Each thread hands one header at a time to the queue and posts
// the next receive only once Poll has taken it.
//
// Writes and payload reads do wait with the caller's deadline. A transfer
// that expires cannot be taken back out of its pair's stream (the peer
// would read a message cut short or out of step), so its pair must close,
// and Gloo closes every pair of the context when one of its waits expires.
// The link is then broken: every later call reports that first error.
// Abort closes every pair too, so that peers hear at once that this rank
// left; destroying a buffer keeps Gloo from touching the caller's memory
// after a call returns.
//
// Thread-safety: as PeerLink (one writer thread, one reader thread, Abort
// from any thread).
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "collectives/gloo/gloo_store_adapter.h"
#include "collectives/peer_links.h"
#include "common/mutex.h"
#include "transport/peer_link.h"

namespace kolo {
namespace {

constexpr uint64_t kHeaderSlot = 1;
constexpr uint64_t kPayloadSlot = 2;
// The receiver threads' wait: unbounded in practice, ended by Abort (see
// the essay: a wait that expires would close every pair).
constexpr std::chrono::milliseconds kReceiverWait =
    std::chrono::hours(24 * 365);

bool IsGlooTimeout(const std::exception& e) {
  return std::strstr(e.what(), "Timed out") != nullptr;
}

// What is left to `deadline`, at least 1 ms: Gloo treats 0 as "now".
std::chrono::milliseconds Remaining(LinkClock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - LinkClock::now()));
}

class GlooPeerLink : public PeerLink {
 public:
  GlooPeerLink(int32_t rank, int32_t size,
               std::shared_ptr<gloo::rendezvous::Context> context)
      : rank_(rank),
        size_(size),
        context_(std::move(context)),
        inboxes_(size),
        expected_payload_(size, -1) {}

  ~GlooPeerLink() override {
    Abort();
    for (Inbox& inbox : inboxes_) {
      if (inbox.thread.joinable()) inbox.thread.join();
    }
  }

  // Posts the first header receive from every peer.
  void Start() {
    for (int32_t peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      Inbox& inbox = inboxes_[peer];
      inbox.buffer =
          context_->createUnboundBuffer(&inbox.header, sizeof(FrameHeader));
      inbox.thread = std::thread([this, peer] { Receive(peer); });
    }
  }

  Status Write(int32_t peer, const FrameHeader& header, const void* payload,
               LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "write to"));
    KOLO_RETURN_IF_ERROR(CheckPayloadSize("gloo link", rank_, peer, header));
    if (LinkClock::now() >= deadline) {
      return Timeout("gloo link: write to peer " + std::to_string(peer) +
                     " had no time left before its deadline");
    }
    // Fresh buffers per frame: a Gloo buffer keeps the first error it sees
    // forever, and one pair's failure must not stick to writes to others.
    FrameHeader sent = header;
    std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer =
        context_->createUnboundBuffer(&sent, sizeof(FrameHeader));
    std::unique_ptr<gloo::transport::UnboundBuffer> payload_buffer;
    if (header.payload_bytes > 0) {
      payload_buffer = context_->createUnboundBuffer(
          const_cast<void*>(payload),
          static_cast<size_t>(header.payload_bytes));
    }
    {
      MutexLock lock(&mutex_);
      if (aborted_) return Aborted("gloo link was aborted");
      writing_[0] = header_buffer.get();
      writing_[1] = payload_buffer.get();
    }
    Status status = Status::Ok();
    try {
      header_buffer->send(peer, kHeaderSlot, 0, sizeof(FrameHeader));
      if (payload_buffer) {
        payload_buffer->send(peer, kPayloadSlot, 0,
                             static_cast<size_t>(header.payload_bytes));
      }
      bool done = header_buffer->waitSend(nullptr, Remaining(deadline));
      if (done && payload_buffer) {
        done = payload_buffer->waitSend(nullptr, Remaining(deadline));
      }
      if (!done) status = Aborted("gloo link was aborted");
    } catch (const std::exception& e) {
      status = Failed("write to", peer, e);
    }
    MutexLock lock(&mutex_);
    writing_[0] = writing_[1] = nullptr;
    return status;
  }

  LinkEvent Poll(std::chrono::milliseconds wait) override {
    const auto until = LinkClock::now() + wait;
    LinkEvent event;
    MutexLock lock(&mutex_);
    while (!aborted_ && events_.empty()) {
      if (!arrived_.WaitUntil(&mutex_, until)) break;
    }
    if (aborted_ || events_.empty()) return event;
    event = std::move(events_.front());
    events_.pop_front();
    if (event.kind == LinkEvent::Kind::kFrame) {
      expected_payload_[event.peer] = event.header.payload_bytes;
      inboxes_[event.peer].handed_out = true;
      taken_.NotifyAll();
    }
    return event;
  }

  Status ReadPayload(int32_t peer, void* payload, int64_t bytes,
                     LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "read from"));
    // Gloo checks a message's size against the receive on its own thread,
    // where a mismatch would end the process: check it here instead.
    KOLO_RETURN_IF_ERROR(CheckReadSize("gloo link", rank_, peer, bytes,
                                       expected_payload_[peer]));
    expected_payload_[peer] = -1;
    if (bytes == 0) return Status::Ok();
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
        context_->createUnboundBuffer(payload, static_cast<size_t>(bytes));
    {
      MutexLock lock(&mutex_);
      if (aborted_) return Aborted("gloo link was aborted");
      reading_ = buffer.get();
    }
    Status status = Status::Ok();
    try {
      buffer->recv(peer, kPayloadSlot, 0, static_cast<size_t>(bytes));
      if (!buffer->waitRecv(nullptr, Remaining(deadline))) {
        status = Aborted("gloo link was aborted");
      }
    } catch (const std::exception& e) {
      status = Failed("read from", peer, e);
    }
    MutexLock lock(&mutex_);
    reading_ = nullptr;
    return status;
  }

  void Abort() override {
    {
      MutexLock lock(&mutex_);
      if (aborted_) return;
      aborted_ = true;
      arrived_.NotifyAll();
      taken_.NotifyAll();
      // The flags these set persist until the next wait on the buffer, so
      // a thread that has not reached its wait yet still returns at once.
      for (Inbox& inbox : inboxes_) {
        if (inbox.buffer) inbox.buffer->abortWaitRecv();
      }
      for (gloo::transport::UnboundBuffer* buffer : writing_) {
        if (buffer != nullptr) buffer->abortWaitSend();
      }
      if (reading_ != nullptr) reading_->abortWaitRecv();
    }
    // Peers see the pairs close and report this rank lost; transfers cut
    // short here never resume.
    try {
      context_->closeConnections();
    } catch (const std::exception&) {
      // A pair that failed to close is closed by the context's destructor.
    }
  }

  const char* engine() const override { return "gloo"; }

 private:
  // One peer's header receive and the thread that keeps it posted.
  struct Inbox {
    FrameHeader header;  // written by Gloo, read by the thread
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    std::thread thread;
    // Poll has taken the last header this thread queued.
    bool handed_out = true;
  };

  // The receiver thread of `peer`: post, wait, queue, until Abort or the
  // pair fails (then one kPeerLost).
  void Receive(int32_t peer) {
    pthread_setname_np(pthread_self(), "kolo-gloo-rx");
    Inbox& inbox = inboxes_[peer];
    for (;;) {
      try {
        inbox.buffer->recv(peer, kHeaderSlot, 0, sizeof(FrameHeader));
        if (!inbox.buffer->waitRecv(nullptr, kReceiverWait)) return;
      } catch (const std::exception& e) {
        MutexLock lock(&mutex_);
        if (aborted_) return;
        LinkEvent lost;
        lost.kind = LinkEvent::Kind::kPeerLost;
        lost.peer = peer;
        lost.error =
            PeerFailure("gloo link: rank " + std::to_string(rank_) +
                        " lost peer " + std::to_string(peer) + ": " + e.what());
        events_.push_back(std::move(lost));
        arrived_.NotifyAll();
        return;
      }
      MutexLock lock(&mutex_);
      if (aborted_) return;
      LinkEvent frame;
      frame.kind = LinkEvent::Kind::kFrame;
      frame.peer = peer;
      frame.header = inbox.header;
      events_.push_back(std::move(frame));
      inbox.handed_out = false;
      arrived_.NotifyAll();
      while (!aborted_ && !inbox.handed_out) taken_.Wait(&mutex_);
      if (aborted_) return;
    }
  }

  Status CheckPeer(int32_t peer, const char* what) {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return InvalidArgument("gloo link: rank " + std::to_string(rank_) +
                             " cannot " + what + " peer " +
                             std::to_string(peer) + " (ranks 0.." +
                             std::to_string(size_ - 1) + ")");
    }
    MutexLock lock(&mutex_);
    if (aborted_) return Aborted("gloo link was aborted");
    return broken_;
  }

  // The Status for a Gloo exception of a transfer with `peer`. A timeout
  // closed every pair (see the essay), so it sticks to the link.
  Status Failed(const char* what, int32_t peer, const std::exception& e) {
    MutexLock lock(&mutex_);
    if (aborted_) return Aborted("gloo link was aborted");
    const std::string where = std::string("gloo link: ") + what + " peer " +
                              std::to_string(peer) + " (rank " +
                              std::to_string(rank_) + ")";
    if (IsGlooTimeout(e)) {
      if (broken_.ok()) {
        broken_ = PeerFailure(where +
                              " timed out earlier, which closed every "
                              "pair of the link");
      }
      return Timeout(where + " timed out: " + e.what());
    }
    return PeerFailure(where + " failed: " + e.what());
  }

  const int32_t rank_;
  const int32_t size_;
  const std::shared_ptr<gloo::rendezvous::Context> context_;
  // Indexed by peer; each Inbox's fields are set before its thread starts,
  // but handed_out, which mutex_ guards.
  std::vector<Inbox> inboxes_;
  // The reader thread's: payload_bytes of the frame Poll last handed out
  // per peer, -1 once read.
  std::vector<int64_t> expected_payload_;

  Mutex mutex_;
  CondVar arrived_;  // events_ grew or aborted_
  CondVar taken_;    // an Inbox was handed out or aborted_
  bool aborted_ KOLO_GUARDED_BY(mutex_) = false;
  Status broken_ KOLO_GUARDED_BY(mutex_);
  std::deque<LinkEvent> events_ KOLO_GUARDED_BY(mutex_);
  // The transfers in flight, for Abort to wake.
  gloo::transport::UnboundBuffer* writing_[2] KOLO_GUARDED_BY(mutex_) = {};
  gloo::transport::UnboundBuffer* reading_ KOLO_GUARDED_BY(mutex_) = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<PeerLink>> CreateGlooPeerLink(
    const PeerLinkOptions& options, std::shared_ptr<Store> store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("gloo link: rank " + std::to_string(options.rank) +
                           " is not in a world of " +
                           std::to_string(options.size));
  }
  GlooStoreAdapter adapter(std::move(store), options.timeout);
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    context =
        std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(adapter, device);
  } catch (const std::exception& e) {
    const std::string message =
        "gloo link: rank " + std::to_string(options.rank) +
        " could not connect to its " + std::to_string(options.size - 1) +
        " peers: " + e.what();
    if (IsGlooTimeout(e) || std::strstr(e.what(), "was not set within")) {
      return Timeout(message);
    }
    return PeerFailure(message);
  }
  auto link = std::make_unique<GlooPeerLink>(options.rank, options.size,
                                             std::move(context));
  link->Start();
  return std::unique_ptr<PeerLink>(std::move(link));
}

}  // namespace kolo
