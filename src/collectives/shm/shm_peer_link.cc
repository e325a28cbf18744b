// The shm PeerLink: every rank owns an inbox, one POSIX shared-memory
// segment that every other rank maps, holding one single-producer,
// single-consumer byte ring per sender.
//
// Segment of rank r, /kolo-<rank 0's pid>-<random>-link-<r>:
//   page 0         the inbox header: doorbell (a futex word every sender
//                  bumps after it wrote), whether r's reader sleeps on it,
//                  r's `closed` flag, r's pid;
//   control pages  per sender s, the ring's counters: head (bytes s ever
//                  wrote, only s stores it), tail (bytes r ever took, only
//                  r stores it), and `drained`, a futex word r bumps after
//                  it took bytes, on which a writer waiting for room sleeps;
//   rings          per sender, shm_ring_bytes bytes. The segment is sized
//                  with ftruncate and never touched as a whole, so a ring
//                  costs memory only once its sender writes to it.
// Names are drawn, published and unlinked as transport/shm_segments.h
// describes: once every rank mapped every segment each rank unlinks its
// own, so nothing is left in /dev/shm however the job ends.
//
// A frame is a stream of bytes in the ring: the 48-byte header, then the
// payload. The writer copies as much as fits, publishes the new head
// (release) and rings the receiver's doorbell; a frame larger than the ring
// goes through in pieces while the reader drains it. The reader's Poll
// scans the rings in rotation for a complete header, so every sender gets
// its turn; ReadPayload takes the payload's bytes as they come. A waiting
// thread spins for up to 50 us (common/spin_wait.h), then sleeps on its
// futex word in slices of 10 ms (transport/futex.h: a waker that sees no
// sleeper skips the system call).
//
// Ends. A link destroyed cleanly sets `closed` in its own segment and rings
// every peer: a peer's Poll reports kPeerLost for it once it has taken what
// was written before, and Write to it fails with kPeerFailure. A process
// that vanished without that is found between sleep slices by its pid
// (ProcessAlive, as ShmGroup does; not across pid namespaces). Abort rings
// the rank's own doorbell and every ring it writes to, so both of its
// threads wake and return.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "collectives/peer_links.h"
#include "common/spin_wait.h"
#include "transport/futex.h"
#include "transport/peer_link.h"
#include "transport/process_liveness.h"
#include "transport/shm_segments.h"

namespace kolo {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kHeaderBytes = sizeof(FrameHeader);
constexpr auto kSleepSlice = std::chrono::milliseconds(10);
// How often an idle reader looks for peers whose process is gone.
constexpr auto kLivenessPeriod = std::chrono::milliseconds(50);

struct InboxHeader {
  SharedFutex doorbell;          // rung by every sender; the owner reads
  std::atomic<uint32_t> closed;  // the owner destroyed its link
  int32_t pid;
  uint64_t pid_namespace;
};

struct alignas(64) RingControl {
  std::atomic<uint64_t> head;  // the sender's; a cache line of its own
  char padding[56];
  std::atomic<uint64_t> tail;  // the receiver's
  SharedFutex drained;         // rung when tail moves; the sender waits
};
static_assert(sizeof(InboxHeader) <= kPageBytes, "the header fits its page");
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "shared counters are plain words");

// Sleeps on `futex` while its word still reads `seen`, for at most `span`
// (and never longer than a slice, so that callers look at their peers).
void Sleep(SharedFutex& futex, uint32_t seen, std::chrono::nanoseconds span) {
  span = std::max(std::chrono::nanoseconds(0),
                  std::min<std::chrono::nanoseconds>(span, kSleepSlice));
  futex.Sleep(span, [seen](uint32_t word) { return word != seen; });
}

class ShmPeerLink : public PeerLink {
 public:
  explicit ShmPeerLink(const PeerLinkOptions& options)
      : rank_(options.rank),
        size_(options.size),
        ring_bytes_(static_cast<uint64_t>(options.shm_ring_bytes)),
        control_bytes_(
            (static_cast<size_t>(options.size) * sizeof(RingControl) +
             kPageBytes - 1) /
            kPageBytes * kPageBytes),
        segment_bytes_(kPageBytes + control_bytes_ +
                       static_cast<size_t>(options.size) * ring_bytes_),
        same_pid_namespace_(static_cast<size_t>(options.size), false),
        gone_(new std::atomic<bool>[options.size]()),
        lost_(static_cast<size_t>(options.size), false),
        broken_(static_cast<size_t>(options.size), false),
        payload_left_(static_cast<size_t>(options.size), 0),
        spin_style_(RanksOutnumberCores(options.size) ? SpinStyle::kYield
                                                      : SpinStyle::kPause) {}

  ~ShmPeerLink() override {
    if (segments_ && segments_->peers_mapped()) {
      // Peers learn of the end now rather than at their timeout: their
      // readers (Poll) and their writers to this inbox wake and look.
      Inbox(rank_)->closed.store(1, std::memory_order_seq_cst);
      for (int32_t p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        Inbox(p)->doorbell.Ring();
        Control(rank_, p)->drained.Ring();
      }
    }
  }

  Status Join(const PeerLinkOptions& options, Store* store);

  Status Write(int32_t peer, const FrameHeader& header, const void* payload,
               LinkClock::time_point deadline) override;
  LinkEvent Poll(std::chrono::milliseconds wait) override;
  Status ReadPayload(int32_t peer, void* payload, int64_t bytes,
                     LinkClock::time_point deadline) override;

  void Abort() override {
    aborted_.store(true, std::memory_order_seq_cst);
    Inbox(rank_)->doorbell.Ring();
    for (int32_t p = 0; p < size_; ++p) {
      if (p != rank_) Control(p, rank_)->drained.Ring();
    }
  }

  const char* engine() const override { return "shm"; }

 private:
  InboxHeader* Inbox(int32_t owner) const {
    return static_cast<InboxHeader*>(segments_->of(owner));
  }
  // The ring in `owner`'s inbox that `sender` writes.
  RingControl* Control(int32_t owner, int32_t sender) const {
    return reinterpret_cast<RingControl*>(
               static_cast<char*>(segments_->of(owner)) + kPageBytes) +
           sender;
  }
  char* RingData(int32_t owner, int32_t sender) const {
    return static_cast<char*>(segments_->of(owner)) + kPageBytes +
           control_bytes_ + static_cast<size_t>(sender) * ring_bytes_;
  }

  std::string Name(int32_t rank) const {
    std::string name = "rank " + std::to_string(rank);
    if (segments_ && segments_->of(rank) != nullptr)
      name += " (pid " + std::to_string(Inbox(rank)->pid) + ")";
    return name;
  }
  Status CheckPeer(int32_t peer, const char* what) const;
  // kPeerFailure when `peer` destroyed its link or its process is gone.
  // `doing` finishes "while rank 0 ..."; the pid is looked at only with
  // `check_pid`.
  Status CheckPeerAlive(int32_t peer, const char* doing,
                        bool check_pid = true) const;
  // Copies `bytes` of the ring from `sender` into `out` and frees them.
  void Take(int32_t sender, void* out, uint64_t bytes);
  LinkEvent Lost(int32_t peer, Status why);
  // The reader's wait for its doorbell to move on from `seen`: a spin on
  // the first wait of a call that began at `began`, then a sleep slice.
  void AwaitDoorbell(uint32_t seen, LinkClock::time_point began,
                     LinkClock::time_point until, bool* spun);
  // Whether a thread whose last look was at `*last` is due to look for
  // peers whose process is gone; a look costs a read of /proc.
  static bool LivenessDue(LinkClock::time_point* last);

  const int32_t rank_;
  const int32_t size_;
  const uint64_t ring_bytes_;
  const size_t control_bytes_;
  const size_t segment_bytes_;
  std::unique_ptr<ShmSegments> segments_;  // the inboxes; set in Join
  std::vector<bool> same_pid_namespace_;   // set in Join
  std::atomic<bool> aborted_{false};
  // Raised by the reader when it finds a peer gone, for the writer, which
  // could otherwise go on filling a dead peer's ring while it has room.
  const std::unique_ptr<std::atomic<bool>[]> gone_;
  // The reader's.
  std::vector<bool> lost_;             // kPeerLost was returned
  std::vector<bool> broken_;           // gone mid-frame; Poll reports it
  std::vector<int64_t> payload_left_;  // of the frame Poll returned
  int32_t next_ = 0;                   // where the next scan starts
  LinkClock::time_point reader_liveness_check_ = LinkClock::now();
  AdaptiveSpin reader_spin_;
  // The writer's.
  LinkClock::time_point writer_liveness_check_ = LinkClock::now();
  AdaptiveSpin writer_spin_;
  const SpinStyle spin_style_;
};

Status ShmPeerLink::Join(const PeerLinkOptions& options, Store* store) {
  ShmSegments::Options segment_options;
  segment_options.rank = rank_;
  segment_options.size = size_;
  segment_options.bytes = segment_bytes_;
  segment_options.timeout = options.timeout;
  segment_options.name_tag = "-link-";
  segment_options.what = "shm link of rank " + std::to_string(rank_);
  // Sparse: zero is every ring's initial state.
  segment_options.populate = false;
  KOLO_ASSIGN_OR_RETURN(segments_,
                        ShmSegments::Create(segment_options, *store));
  InboxHeader* inbox = new (segments_->own()) InboxHeader();
  inbox->pid = static_cast<int32_t>(getpid());
  inbox->pid_namespace = PidNamespace();
  for (int32_t s = 0; s < size_; ++s) new (Control(rank_, s)) RingControl();
  Status mapped = segments_->MapPeers(*store);
  if (!segments_->peers_mapped()) return mapped;
  for (int32_t r = 0; r < size_; ++r) {
    same_pid_namespace_[r] = r != rank_ && inbox->pid_namespace != 0 &&
                             Inbox(r)->pid_namespace == inbox->pid_namespace;
  }
  return mapped;
}

Status ShmPeerLink::CheckPeer(int32_t peer, const char* what) const {
  if (peer >= 0 && peer < size_ && peer != rank_) return Status::Ok();
  return InvalidArgument("shm: rank " + std::to_string(rank_) + " cannot " +
                         what + " rank " + std::to_string(peer) + " of " +
                         std::to_string(size_));
}

Status ShmPeerLink::CheckPeerAlive(int32_t peer, const char* doing,
                                   bool check_pid) const {
  const std::string when = " while rank " + std::to_string(rank_) + " " + doing;
  if (Inbox(peer)->closed.load(std::memory_order_acquire) != 0)
    return PeerFailure("shm: " + Name(peer) + " closed its link" + when);
  if (check_pid && same_pid_namespace_[peer] && !ProcessAlive(Inbox(peer)->pid))
    return PeerFailure("shm: " + Name(peer) + " exited" + when);
  return Status::Ok();
}

Status ShmPeerLink::Write(int32_t peer, const FrameHeader& header,
                          const void* payload, LinkClock::time_point deadline) {
  KOLO_RETURN_IF_ERROR(CheckPeer(peer, "write to"));
  if (aborted_.load()) {
    return Aborted("shm: rank " + std::to_string(rank_) +
                   "'s link was aborted before a write to rank " +
                   std::to_string(peer));
  }
  KOLO_RETURN_IF_ERROR(CheckPayloadSize("shm", rank_, peer, header));
  if (gone_[peer].load(std::memory_order_acquire) ||
      Inbox(peer)->closed.load(std::memory_order_acquire) != 0) {
    return CheckPeerAlive(peer, "was about to write to it");
  }
  RingControl* control = Control(peer, rank_);
  char* ring = RingData(peer, rank_);
  InboxHeader* inbox = Inbox(peer);
  // The stream: the header, then the payload.
  struct Span {
    const char* data;
    uint64_t bytes;
  } spans[2] = {{reinterpret_cast<const char*>(&header), kHeaderBytes},
                {static_cast<const char*>(payload),
                 static_cast<uint64_t>(header.payload_bytes)}};
  int span = 0;
  uint64_t offset = 0;
  uint64_t head = control->head.load(std::memory_order_relaxed);
  while (true) {
    // Copy as much as fits, then publish it at once.
    uint64_t free =
        ring_bytes_ - (head - control->tail.load(std::memory_order_acquire));
    const uint64_t before = head;
    while (free > 0 && span < 2) {
      if (offset == spans[span].bytes) {
        ++span;
        offset = 0;
        continue;
      }
      const uint64_t at = head % ring_bytes_;
      const uint64_t n =
          std::min({free, spans[span].bytes - offset, ring_bytes_ - at});
      std::memcpy(ring + at, spans[span].data + offset, n);
      head += n;
      offset += n;
      free -= n;
    }
    while (span < 2 && offset == spans[span].bytes) {
      ++span;
      offset = 0;
    }
    if (head != before) {
      control->head.store(head, std::memory_order_release);
      inbox->doorbell.Ring();
    }
    if (span == 2) return Status::Ok();

    // The ring is full: wait until the reader takes some.
    const LinkClock::time_point began = LinkClock::now();
    auto has_room = [&] {
      return head - control->tail.load(std::memory_order_acquire) < ring_bytes_;
    };
    if (writer_spin_.Spin(has_room, spin_style_, began)) {
      writer_spin_.Finished(began);
      continue;
    }
    while (true) {
      const uint32_t seen =
          control->drained.word.load(std::memory_order_seq_cst);
      if (head - control->tail.load(std::memory_order_acquire) < ring_bytes_)
        break;
      if (aborted_.load()) {
        return Aborted("shm: rank " + std::to_string(rank_) +
                       "'s link was aborted during a write to rank " +
                       std::to_string(peer));
      }
      KOLO_RETURN_IF_ERROR(CheckPeerAlive(
          peer, "wrote to it", LivenessDue(&writer_liveness_check_)));
      const LinkClock::time_point now = LinkClock::now();
      if (now >= deadline) {
        return Timeout("shm: rank " + std::to_string(peer) +
                       " took no more of a frame from rank " +
                       std::to_string(rank_) + " (" +
                       std::to_string(header.payload_bytes) +
                       " payload bytes) before the deadline: its ring of " +
                       std::to_string(ring_bytes_) + " bytes is full");
      }
      Sleep(control->drained, seen, deadline - now);
    }
    writer_spin_.Finished(began);
  }
}

void ShmPeerLink::Take(int32_t sender, void* out, uint64_t bytes) {
  RingControl* control = Control(rank_, sender);
  const char* ring = RingData(rank_, sender);
  uint64_t tail = control->tail.load(std::memory_order_relaxed);
  char* to = static_cast<char*>(out);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t at = tail % ring_bytes_;
    const uint64_t n = std::min(bytes - done, ring_bytes_ - at);
    std::memcpy(to + done, ring + at, n);
    done += n;
    tail += n;
  }
  control->tail.store(tail, std::memory_order_release);
  control->drained.Ring();
}

LinkEvent ShmPeerLink::Lost(int32_t peer, Status why) {
  lost_[peer] = true;
  gone_[peer].store(true, std::memory_order_release);
  LinkEvent event;
  event.kind = LinkEvent::Kind::kPeerLost;
  event.peer = peer;
  event.error = std::move(why);
  return event;
}

void ShmPeerLink::AwaitDoorbell(uint32_t seen, LinkClock::time_point began,
                                LinkClock::time_point until, bool* spun) {
  InboxHeader* inbox = Inbox(rank_);
  if (!*spun) {
    *spun = true;
    if (reader_spin_.Spin(
            [&] {
              return inbox->doorbell.word.load(std::memory_order_acquire) !=
                     seen;
            },
            spin_style_, began)) {
      return;
    }
  }
  Sleep(inbox->doorbell, seen, until - LinkClock::now());
}

bool ShmPeerLink::LivenessDue(LinkClock::time_point* last) {
  const LinkClock::time_point now = LinkClock::now();
  if (now - *last < kLivenessPeriod) return false;
  *last = now;
  return true;
}

LinkEvent ShmPeerLink::Poll(std::chrono::milliseconds wait) {
  const LinkClock::time_point until = LinkClock::now() + wait;
  InboxHeader* inbox = Inbox(rank_);
  const LinkClock::time_point began = LinkClock::now();
  bool spun = false;
  while (!aborted_.load()) {
    const uint32_t seen = inbox->doorbell.word.load(std::memory_order_seq_cst);
    for (int32_t k = 0; k < size_; ++k) {
      const int32_t s = (next_ + k) % size_;
      if (s == rank_ || lost_[s]) continue;
      if (broken_[s]) return Lost(s, CheckPeerAlive(s, "read from it"));
      // `closed` before `head`: what was written before the close is seen.
      const bool closed = Inbox(s)->closed.load(std::memory_order_acquire) != 0;
      RingControl* control = Control(rank_, s);
      const uint64_t ready = control->head.load(std::memory_order_acquire) -
                             control->tail.load(std::memory_order_relaxed);
      if (ready >= kHeaderBytes) {
        LinkEvent event;
        event.kind = LinkEvent::Kind::kFrame;
        event.peer = s;
        Take(s, &event.header, kHeaderBytes);
        payload_left_[s] = event.header.payload_bytes;
        next_ = (s + 1) % size_;
        reader_spin_.Finished(began);
        return event;
      }
      if (closed) {
        return Lost(s, CheckPeerAlive(s, "read from it"));
      }
    }
    const LinkClock::time_point now = LinkClock::now();
    if (LivenessDue(&reader_liveness_check_)) {
      for (int32_t s = 0; s < size_; ++s) {
        if (s == rank_ || lost_[s] || !same_pid_namespace_[s]) continue;
        if (ProcessAlive(Inbox(s)->pid)) continue;
        // Whatever it wrote in full is still taken first.
        RingControl* control = Control(rank_, s);
        if (control->head.load(std::memory_order_acquire) -
                control->tail.load(std::memory_order_relaxed) >=
            kHeaderBytes) {
          continue;
        }
        return Lost(s, CheckPeerAlive(s, "read from it"));
      }
    }
    if (now >= until) break;
    AwaitDoorbell(seen, began, until, &spun);
  }
  reader_spin_.Finished(began);
  return LinkEvent();
}

Status ShmPeerLink::ReadPayload(int32_t peer, void* payload, int64_t bytes,
                                LinkClock::time_point deadline) {
  KOLO_RETURN_IF_ERROR(CheckPeer(peer, "read from"));
  KOLO_RETURN_IF_ERROR(
      CheckReadSize("shm", rank_, peer, bytes, payload_left_[peer]));
  InboxHeader* inbox = Inbox(rank_);
  RingControl* control = Control(rank_, peer);
  char* out = static_cast<char*>(payload);
  uint64_t left = static_cast<uint64_t>(std::max<int64_t>(bytes, 0));
  const LinkClock::time_point began = LinkClock::now();
  bool spun = false;
  while (left > 0) {
    const uint32_t seen = inbox->doorbell.word.load(std::memory_order_seq_cst);
    const uint64_t ready = control->head.load(std::memory_order_acquire) -
                           control->tail.load(std::memory_order_relaxed);
    if (ready > 0) {
      const uint64_t n = std::min(ready, left);
      Take(peer, out, n);
      out += n;
      left -= n;
      payload_left_[peer] -= static_cast<int64_t>(n);
      continue;
    }
    if (aborted_.load()) {
      return Aborted("shm: rank " + std::to_string(rank_) +
                     "'s link was aborted while it read from rank " +
                     std::to_string(peer));
    }
    Status alive = CheckPeerAlive(peer, "read from it",
                                  LivenessDue(&reader_liveness_check_));
    // What it wrote before it closed still counts.
    if (!alive.ok() && control->head.load(std::memory_order_acquire) ==
                           control->tail.load(std::memory_order_relaxed)) {
      broken_[peer] = true;
      return alive;
    }
    const LinkClock::time_point now = LinkClock::now();
    if (now >= deadline) {
      return Timeout("shm: rank " + std::to_string(peer) + " sent " +
                     std::to_string(static_cast<uint64_t>(bytes) - left) +
                     " of the " + std::to_string(bytes) +
                     " payload bytes of its frame to rank " +
                     std::to_string(rank_) + " before the deadline");
    }
    AwaitDoorbell(seen, began, deadline, &spun);
  }
  reader_spin_.Finished(began);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<PeerLink>> CreateShmPeerLink(
    const PeerLinkOptions& options, Store* store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("shm link: rank " + std::to_string(options.rank) +
                           " of " + std::to_string(options.size));
  }
  if (options.shm_ring_bytes < static_cast<int64_t>(kPageBytes) ||
      options.shm_ring_bytes % kPageBytes != 0) {
    return InvalidArgument(
        "shm link: a ring must be a positive multiple of 4096 bytes, got " +
        std::to_string(options.shm_ring_bytes));
  }
  std::unique_ptr<ShmPeerLink> link(new ShmPeerLink(options));
  KOLO_RETURN_IF_ERROR(link->Join(options, store));
  return std::unique_ptr<PeerLink>(std::move(link));
}

}  // namespace kolo
