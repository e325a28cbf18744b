// The mpi PeerLink: frames over a duplicate of MPI_COMM_WORLD, so that they
// never match the user's or the MPI backend's messages.
//
// A frame is one message of 48 bytes on kHeaderTag, then its payload on
// kPayloadTag in messages of at most kChunkBytes (MPI counts are int). MPI
// keeps the messages of one (source, tag, communicator) in order, so the
// n-th payload from a peer is the payload of its n-th header.
//
//   Write:       Isend header, Isend each chunk, test until all complete
//   Poll:        Improbe(any source, header tag) with short sleeps, Mrecv
//   ReadPayload: Irecv each chunk from the peer, test until all complete
//
// Nothing blocks inside MPI: every wait is a test loop that checks the
// deadline and the abort flag, with a backoff from spinning to sleeps so
// that idle links leave the cores to the computation. Writer and reader
// call MPI at once, which needs MPI_THREAD_MULTIPLE.
//
// A send that times out cannot be relied on to be withdrawn (cancelling a
// send is deprecated in MPI 4 and may do nothing), and a receive that times
// out leaves its payload unmatched, out of step with the next header: after
// a timeout or abort, writes to that peer (or reads from it) report that
// first error.
//
// Thread-safety: as PeerLink (one writer thread, one reader thread, Abort
// from any thread).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <thread>
#include <vector>

#include "collectives/mpi/mpi_bootstrap.h"
#include "collectives/peer_links.h"
#include "common/mutex.h"
#include "transport/peer_link.h"

namespace kolo {
namespace {

constexpr int kHeaderTag = 1;
constexpr int kPayloadTag = 2;
constexpr int64_t kChunkBytes = int64_t{1} << 30;

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text, length);
}

// Spins first (a frame in flight completes in microseconds), then sleeps
// a little longer each time, up to 200 us.
class Backoff {
 public:
  void Pause() {
    if (++rounds_ < 64) return;
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::min<int64_t>(200, (rounds_ - 63) * 10)));
  }

 private:
  int64_t rounds_ = 0;
};

// Starts MPI when nobody has and checks that writer and reader may call it
// at once.
Status InitializeMpiForLink() {
  StatusOr<int> provided = StartMpi();
  if (!provided.ok()) return provided.status().WithContext("mpi link");
  if (*provided < MPI_THREAD_MULTIPLE) {
    return FailedPrecondition(
        "mpi link: MPI was started without MPI_THREAD_MULTIPLE (level " +
        std::to_string(*provided) +
        "), which the link's writer and reader threads need");
  }
  return Status::Ok();
}

class MpiPeerLink : public PeerLink {
 public:
  MpiPeerLink(int32_t rank, int32_t size, MPI_Comm comm)
      : rank_(rank),
        size_(size),
        comm_(comm),
        write_broken_(size),
        read_broken_(size),
        expected_payload_(size, -1),
        write_headers_(size) {}

  ~MpiPeerLink() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // Requests left by timed-out or aborted transfers would make
    // MPI_Comm_free wait for them: free them first (MPI completes them in
    // the background).
    for (MPI_Request& request : abandoned_) MPI_Request_free(&request);
    MPI_Comm_free(&comm_);
  }

  Status Write(int32_t peer, const FrameHeader& header, const void* payload,
               LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "write to"));
    KOLO_RETURN_IF_ERROR(CheckPayloadSize("mpi link", rank_, peer, header));
    KOLO_RETURN_IF_ERROR(write_broken_[peer]);
    if (LinkClock::now() >= deadline) {
      return Timeout("mpi link: write to peer " + std::to_string(peer) +
                     " had no time left before its deadline");
    }
    write_headers_[peer] = header;
    std::vector<MPI_Request> requests(1);
    int code = MPI_Isend(&write_headers_[peer], sizeof(FrameHeader), MPI_BYTE,
                         peer, kHeaderTag, comm_, &requests[0]);
    const char* bytes = static_cast<const char*>(payload);
    for (int64_t offset = 0;
         code == MPI_SUCCESS && offset < header.payload_bytes;
         offset += kChunkBytes) {
      requests.emplace_back();
      code = MPI_Isend(bytes + offset,
                       static_cast<int>(std::min(
                           kChunkBytes, header.payload_bytes - offset)),
                       MPI_BYTE, peer, kPayloadTag, comm_, &requests.back());
    }
    Status status = code == MPI_SUCCESS
                        ? Complete(&requests, deadline)
                        : PeerFailure("MPI_Isend failed: " + MpiError(code));
    if (!status.ok()) {
      status =
          status.WithContext("mpi link: write to peer " + std::to_string(peer) +
                             " (rank " + std::to_string(rank_) + ")");
      write_broken_[peer] = status;
    }
    return status;
  }

  LinkEvent Poll(std::chrono::milliseconds wait) override {
    const auto until = LinkClock::now() + wait;
    LinkEvent event;
    Backoff backoff;
    while (!aborted_.load()) {
      int found = 0;
      MPI_Message message;
      MPI_Status probed;
      int code = MPI_Improbe(MPI_ANY_SOURCE, kHeaderTag, comm_, &found,
                             &message, &probed);
      if (code == MPI_SUCCESS && found) {
        code = MPI_Mrecv(&event.header, sizeof(FrameHeader), MPI_BYTE, &message,
                         MPI_STATUS_IGNORE);
        event.peer = probed.MPI_SOURCE;
        event.kind = code == MPI_SUCCESS ? LinkEvent::Kind::kFrame
                                         : LinkEvent::Kind::kPeerLost;
        if (code == MPI_SUCCESS)
          expected_payload_[event.peer] = event.header.payload_bytes;
      }
      if (code != MPI_SUCCESS) {
        // MPI does not say which peer failed a probe of any source.
        event.kind = LinkEvent::Kind::kPeerLost;
        event.error =
            PeerFailure("mpi link: rank " + std::to_string(rank_) +
                        " could not receive a frame header: " + MpiError(code));
      }
      if (event.kind != LinkEvent::Kind::kNone || LinkClock::now() >= until) {
        return event;
      }
      backoff.Pause();
    }
    return LinkEvent();
  }

  Status ReadPayload(int32_t peer, void* payload, int64_t bytes,
                     LinkClock::time_point deadline) override {
    KOLO_RETURN_IF_ERROR(CheckPeer(peer, "read from"));
    KOLO_RETURN_IF_ERROR(read_broken_[peer]);
    KOLO_RETURN_IF_ERROR(
        CheckReadSize("mpi link", rank_, peer, bytes, expected_payload_[peer]));
    expected_payload_[peer] = -1;
    std::vector<MPI_Request> requests;
    char* out = static_cast<char*>(payload);
    int code = MPI_SUCCESS;
    for (int64_t offset = 0; code == MPI_SUCCESS && offset < bytes;
         offset += kChunkBytes) {
      requests.emplace_back();
      code = MPI_Irecv(out + offset,
                       static_cast<int>(std::min(kChunkBytes, bytes - offset)),
                       MPI_BYTE, peer, kPayloadTag, comm_, &requests.back());
    }
    Status status = code == MPI_SUCCESS
                        ? Complete(&requests, deadline)
                        : PeerFailure("MPI_Irecv failed: " + MpiError(code));
    if (!status.ok()) {
      status = status.WithContext("mpi link: read of " + std::to_string(bytes) +
                                  " payload bytes from peer " +
                                  std::to_string(peer) + " (rank " +
                                  std::to_string(rank_) + ")");
      read_broken_[peer] = status;
    }
    return status;
  }

  void Abort() override { aborted_.store(true); }

  const char* engine() const override { return "mpi"; }

 private:
  Status CheckPeer(int32_t peer, const char* what) const {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return InvalidArgument("mpi link: rank " + std::to_string(rank_) +
                             " cannot " + what + " peer " +
                             std::to_string(peer) + " (ranks 0.." +
                             std::to_string(size_ - 1) + ")");
    }
    if (aborted_.load()) return Aborted("mpi link was aborted");
    return Status::Ok();
  }

  // Tests `requests` until all complete, the deadline passes or the link
  // is aborted; what is left then is abandoned (see the essay).
  Status Complete(std::vector<MPI_Request>* requests,
                  LinkClock::time_point deadline) {
    Backoff backoff;
    for (;;) {
      int done = 0;
      const int code =
          MPI_Testall(static_cast<int>(requests->size()), requests->data(),
                      &done, MPI_STATUSES_IGNORE);
      if (code != MPI_SUCCESS) return PeerFailure(MpiError(code));
      if (done) return Status::Ok();
      Status stopped = Status::Ok();
      if (aborted_.load()) {
        stopped = Aborted("the link was aborted");
      } else if (LinkClock::now() >= deadline) {
        stopped = Timeout("the deadline passed");
      }
      if (!stopped.ok()) {
        MutexLock lock(&abandoned_mutex_);
        for (MPI_Request& request : *requests) {
          if (request == MPI_REQUEST_NULL) continue;
          MPI_Cancel(&request);
          abandoned_.push_back(request);
        }
        return stopped;
      }
      backoff.Pause();
    }
  }

  const int32_t rank_;
  const int32_t size_;
  MPI_Comm comm_;
  std::atomic<bool> aborted_{false};
  // The writer's and the reader's own: the first error per peer, sticky.
  std::vector<Status> write_broken_;
  std::vector<Status> read_broken_;
  std::vector<int64_t> expected_payload_;  // reader: of the frame Poll gave
  // The writer's: each peer's header is sent from here, where it stays
  // while an abandoned send to that peer may still read it.
  std::vector<FrameHeader> write_headers_;
  Mutex abandoned_mutex_;
  std::vector<MPI_Request> abandoned_ KOLO_GUARDED_BY(abandoned_mutex_);
};

}  // namespace

StatusOr<std::unique_ptr<PeerLink>> CreateMpiPeerLink(
    const PeerLinkOptions& options) {
  KOLO_RETURN_IF_ERROR(InitializeMpiForLink());
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != options.rank || size != options.size) {
    return InvalidArgument(
        "mpi link: MPI_COMM_WORLD has rank " + std::to_string(rank) + " of " +
        std::to_string(size) + " but the link was asked for rank " +
        std::to_string(options.rank) + " of " + std::to_string(options.size) +
        ": start MPI jobs with mpirun or kolorun --backend mpi");
  }
  // Collective over the world, like the link.
  MPI_Comm comm;
  const int code = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (code != MPI_SUCCESS) {
    return PeerFailure("mpi link: MPI_Comm_dup on rank " +
                       std::to_string(rank) + " failed: " + MpiError(code));
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<PeerLink>(new MpiPeerLink(rank, size, comm));
}

}  // namespace kolo
