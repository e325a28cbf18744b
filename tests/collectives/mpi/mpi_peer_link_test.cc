// The mpi PeerLink in real processes: run under `mpirun -np 2` (ctest's
// mpi_peer_link_test). Both ranks write frames to each other at once, each
// from a writer thread while its reader thread takes the other's, payloads
// of 0 bytes to 4 MiB; every header field and payload byte is checked
// against a closed form, then a Poll that finds nothing returns kNone
// within its wait. Exits non-zero, saying what was wrong, on any mismatch.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "collectives/peer_links.h"
#include "transport/peer_link.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;

constexpr int kFrames = 40;
const int64_t kSizes[] = {0, 1, 48, 65536, 3, int64_t{4} << 20};

char ByteOf(int32_t from, int64_t k, int64_t i) {
  return static_cast<char>((from * 41 + k * 7 + i * 13) & 0xff);
}

FrameHeader HeaderOf(int32_t from, int64_t k) {
  FrameHeader header;
  header.kind = 3;
  header.tag = from + 10;
  header.sequence = static_cast<uint64_t>(k);
  header.count = k * k;
  header.payload_bytes = kSizes[k % (sizeof(kSizes) / sizeof(kSizes[0]))];
  return header;
}

LinkClock::time_point In(milliseconds wait) { return LinkClock::now() + wait; }

int errors = 0;  // the reader's and main's (joined before read)

void Fail(int32_t rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  ++errors;
}

Status Write(PeerLink* link, int32_t rank, int32_t peer) {
  for (int64_t k = 0; k < kFrames; ++k) {
    const FrameHeader header = HeaderOf(rank, k);
    std::vector<char> payload(static_cast<size_t>(header.payload_bytes));
    for (int64_t i = 0; i < header.payload_bytes; ++i) {
      payload[i] = ByteOf(rank, k, i);
    }
    KOLO_RETURN_IF_ERROR(
        link->Write(peer, header, payload.data(), In(milliseconds(5000))));
  }
  return Status::Ok();
}

void Read(PeerLink* link, int32_t rank, int32_t peer) {
  const auto deadline = In(milliseconds(8000));
  for (int64_t k = 0; k < kFrames;) {
    if (LinkClock::now() > deadline) {
      return Fail(rank, "frame " + std::to_string(k) + " never came");
    }
    LinkEvent event = link->Poll(milliseconds(100));
    if (event.kind == LinkEvent::Kind::kNone) continue;
    if (event.kind != LinkEvent::Kind::kFrame || event.peer != peer) {
      return Fail(rank, "unexpected event from " + std::to_string(event.peer) +
                            ": " + event.error.ToString());
    }
    const FrameHeader want = HeaderOf(peer, k);
    if (event.header.kind != want.kind || event.header.tag != want.tag ||
        event.header.sequence != want.sequence ||
        event.header.count != want.count ||
        event.header.payload_bytes != want.payload_bytes) {
      return Fail(rank, "header of frame " + std::to_string(k) + " is wrong");
    }
    std::vector<char> payload(static_cast<size_t>(want.payload_bytes));
    Status read = link->ReadPayload(peer, payload.data(), want.payload_bytes,
                                    In(milliseconds(5000)));
    if (!read.ok()) return Fail(rank, read.ToString());
    for (int64_t i = 0; i < want.payload_bytes; ++i) {
      if (payload[i] != ByteOf(peer, k, i)) {
        return Fail(rank, "byte " + std::to_string(i) + " of frame " +
                              std::to_string(k) + " is wrong");
      }
    }
    ++k;
  }
}

int Main() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    std::fprintf(stderr, "run this with mpirun -np 2, not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  PeerLinkOptions options;
  options.rank = rank;
  options.size = size;
  StatusOr<std::unique_ptr<PeerLink>> link = CreateMpiPeerLink(options);
  if (!link.ok()) {
    Fail(rank, link.status().ToString());
  } else {
    const int32_t peer = 1 - rank;
    Status written;
    std::thread writer([&] { written = Write(link->get(), rank, peer); });
    Read(link->get(), rank, peer);
    writer.join();
    if (!written.ok()) Fail(rank, written.ToString());
    // Both ranks are done writing: nothing more comes.
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = LinkClock::now();
    if ((*link)->Poll(milliseconds(50)).kind != LinkEvent::Kind::kNone ||
        LinkClock::now() - start < milliseconds(50)) {
      Fail(rank, "a Poll with nothing to find did not wait and return kNone");
    }
    link->reset();
  }
  int failed = errors > 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed == 0) {
    std::printf("mpi link: %d frames each way correct\n", kFrames);
  }
  MPI_Finalize();
  return any_failed;
}

}  // namespace
}  // namespace kolo

int main() { return kolo::Main(); }
