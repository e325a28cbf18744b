// kolo-bench collectives --peer: the same calls timed straight on kolo's
// engines, and the ceiling a copy sets, beside kolo's own rows.
//
// Peers. Each is one of kolo's backends built by the bench (raw_backend.h)
// and called directly, without the runtime's negotiation, fusion buffer or
// completion handling:
//   mpi   MPI_Allreduce, MPI_Allgatherv, MPI_Bcast, MPI_Alltoallv and
//         MPI_Reduce_scatter_block on a duplicate of MPI_COMM_WORLD; needs
//         ranks started by mpirun (kolorun --launcher mpirun)
//   gloo  Gloo's own algorithms over TCP: ring allreduce, ring allgatherv,
//         tree broadcast, pairwise alltoallv (reducescatter is kolo's
//         alltoall plus a local reduction; Gloo's option API has none)
//   shm   kolo's shared-memory engine, so "raw shm at 4 KiB against MPI"
//         separates the engine from the runtime's overhead
//   tcp   kolo's TCP engine (src/collectives/tcp/), the default between
//         hosts: beside gloo it compares the two network engines alone
// A peer makes the call kolo.h defines with what the runtime's executor
// adds around an engine call and nothing more: an average is a sum divided
// once, and an out-of-place broadcast copies the root's input into its
// output first (engines broadcast in place).
//
// Interleaving. For each row the bench times kolo (out of place, then in
// place), then each peer in --peer order, then, for a size not seen yet, the
// memcpy line; a machine that drifts during the sweep therefore drifts
// under every engine alike. kolo's runtime stays up while the peers run; idle,
// it ticks once per 100 ms with an allgather of a few bytes on its own
// engine, far below any row's time. Peer rows are timed and checked exactly
// as kolo's (same warmup, iterations, slowest rank per iteration, closed-form
// check of every element).
//
// memcpy, 2 threads. Two threads each copy half of a buffer of the row's
// size, again and again until at least kMemcpyBytesMoved have moved, on rank
// 0 alone while the other ranks wait; GB/s = bytes copied / time. A 2-rank
// shm collective on one host is two cores copying, so this is its ceiling:
// cache-resident for small sizes, DRAM for large ones.
//
// Output. After kolo's table comes one table per peer in the same layout,
// then the comparison: per row, kolo's and each peer's in-place time and
// busbw, kolo÷peer, the memcpy rate, kolo÷best peer and kolo's busbw as a
// fraction of the memcpy rate. In place because that is how training moves
// gradients. One ratio per peer suffices: both sides move the same bytes with
// the same bus factor, so kolo busbw ÷ peer busbw equals peer time ÷ kolo
// time (above 1: kolo is faster), whether the row is latency-bound or
// bandwidth-bound.
#ifndef KOLO_TOOLS_KOLO_BENCH_PEERS_H_
#define KOLO_TOOLS_KOLO_BENCH_PEERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives.h"
#include "kolo/kolo.h"
#include "table.h"

namespace kolo::bench {

// "mpi,gloo,shm" in the order given, duplicates dropped; empty text, no
// peers. Errors name --peer and the bad item.
StatusOr<std::vector<BackendKind>> ParsePeerList(const std::string& text);

// Bytes a memcpy measurement moves at least, over as many copies as it takes.
inline constexpr int64_t kMemcpyBytesMoved = int64_t{256} << 20;
// GB/s of two threads each copying half of a `bytes` buffer, repeated until
// at least `bytes_moved` have moved (once at least); 0 for 0 bytes.
double Memcpy2ThreadGbps(int64_t bytes,
                         int64_t bytes_moved = kMemcpyBytesMoved);

// One line of the comparison: a kolo row and what matches it.
struct ComparisonRow {
  std::string collective;
  int64_t bytes = 0;
  DataType type = DataType::kFloat32;
  Measurement kolo;  // in place
  // In --peer order; empty where that peer has no such row.
  std::vector<std::optional<Measurement>> peers;
  std::optional<double> memcpy_gbps;
  // The fastest peer by time; empty without any.
  std::optional<size_t> best_peer;
};

// kolo's busbw over the peer's, as peer time over kolo time (the same
// number; times stay meaningful where a bus factor is 0). Empty when either
// time is not positive.
std::optional<double> KoloRatio(const Measurement& kolo,
                                const Measurement& peer);

// Matches every kolo row with the peers' rows of the same collective, size
// and type, and with the memcpy line of its size.
std::vector<ComparisonRow> Compare(const std::vector<ResultRow>& kolo,
                                   const std::vector<PeerResults>& peers,
                                   const std::vector<MemcpyPoint>& memcpy);

// The comparison's columns for these peers, and one row's cells.
Table ComparisonTable(const std::vector<BackendKind>& peers);
std::vector<std::string> ComparisonCells(const ComparisonRow& row,
                                         const std::vector<BackendKind>& peers);

// Context switches per call beside the comparison, for kolo and each
// peer: where ranks outnumber cores every wait that does not end at once
// ends in a switch, and each costs microseconds, so this count explains a
// small message's time there.
Table SwitchesTable(const std::vector<BackendKind>& peers);
std::vector<std::string> SwitchesCells(const ComparisonRow& row,
                                       const std::vector<BackendKind>& peers);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_PEERS_H_
