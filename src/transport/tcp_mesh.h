// TcpMesh: one TCP connection between every pair of ranks, and the one loop
// that moves bytes over them. kolo's TCP engine (collectives/tcp/) runs its
// algorithms on it.
//
// Forming the mesh. Every rank listens on its host address, port 0, and
// publishes "ADDR:PORT" in the store under addr/<rank>; rank 0 first draws
// a random round id and publishes it under round. For each pair i < j,
// rank j connects to rank i and the two prove to each other that they hold
// the job secret, the way the store's handshake does (store/
// message_auth.h), never sending it:
//
//   j -> i  hello: magic, j, i, round, j's nonce
//   i -> j  challenge: magic, i, j, round, i's nonce, i's proof
//   j -> i  j's proof
//   i -> j  admitted (one byte)
//
// Both proofs are MACs under the secret of one transcript (the round, both
// ranks, both nonces), so a proof is good for one connection only. The
// store is public here: whoever reads every key in it (addresses, round)
// and every byte on the wire still cannot be admitted, nor pose as rank i
// to rank j. Rank i refuses (logs, counts and closes) a hello of another
// round, for another rank, from a rank already admitted, and a wrong
// proof; a port scanner, a rank of an older round still retrying, or a
// connection that says nothing never holds up the real peers: rank i
// serves every pending connection at once under poll. It holds at most 64
// pending connections (a new one displaces the oldest), gives each 5 s to
// finish its handshake, and when the process is out of descriptors accepts one to close
// it on a descriptor kept in reserve, so that poll does not spin on a
// listener it cannot drain. Every rank finishes its handshakes with its
// lower peers before it accepts from its higher ones; rank 0 accepts at
// once, so by induction every rank reaches its accept loop and no rank
// waits on one that waits on it. Every wait is bounded by the timeout;
// errors name the peer's rank and address.
//
// Moving bytes. A Transfer sends one stream of bytes to one peer while it
// receives another stream from a peer (the same or another) on non-blocking
// sockets: one thread, one loop, poll on both sockets when neither can
// move (after a spin of up to 50 us, common/spin_wait.h, while waits keep
// ending that soon). That is what makes a ring step full-duplex. The streams are lists
// of spans so that an algorithm can send the blocks of a whole ring in one
// Transfer; its progress callback, called whenever bytes moved, reduces what
// has arrived and tells the loop how far the send may go (only as far as
// has been reduced) and how far the receive may go (no further than the
// scratch it has consumed), so sending block k overlaps receiving block k+1
// and reducing block k-1, in bounded memory. The callback runs before the
// receive moves into the next span.
//
// Socket buffers are left to the kernel's autotuning: setting SO_SNDBUF or
// SO_RCVBUF turns it off and caps the buffer at net.core.[rw]mem_max, which
// is smaller than what autotuning reaches on its own on most systems.
//
// Errors are sticky: the first failed transfer (a peer that closed or reset
// its connection: kPeerFailure; one that stayed silent for the timeout:
// kTimeout) leaves the streams at an unknown position, so every later call
// returns that same error without touching a socket. The failure shuts down
// every connection at once: peers waiting on this rank learn at once that
// it is out, instead of at their timeout.
//
// Thread-safety: one call at a time.
#ifndef KOLO_TRANSPORT_TCP_MESH_H_
#define KOLO_TRANSPORT_TCP_MESH_H_

#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/spin_wait.h"
#include "kolo/options.h"
#include "kolo/status.h"
#include "net/socket.h"
#include "store/store.h"

namespace kolo {

class TcpMesh {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t size = 1;
    // The address this rank listens on and that its peers connect to: a
    // name or a numeric address of this host, never a wildcard unless that
    // is what the job asked for.
    std::string hostname = "127.0.0.1";
    std::chrono::milliseconds timeout = kDefaultTimeout;
    // The job's secret (KOLO_STORE_SECRET), which every rank proves to the
    // others before it is admitted; at least kMinJobSecretBytes when the
    // mesh has more than one rank.
    std::string job_secret;
  };

  struct SendSpan {
    const void* data;
    int64_t bytes;
  };
  struct RecvSpan {
    void* data;
    int64_t bytes;
  };

  // How far into each stream the transfer may go for now, in bytes from
  // its start; more than the stream holds means all of it.
  struct Limits {
    int64_t send = INT64_MAX;
    int64_t recv = INT64_MAX;
  };
  // Called with the bytes sent and received so far whenever either grew.
  // A receive limit must never depend on what was sent: the peer's send
  // may wait for this rank's receive, and a cycle of such waits around a
  // ring would never end.
  using Progress = std::function<Limits(int64_t sent, int64_t received)>;

  // `send` to rank `to` and `recv` from rank `from` at once; a rank of -1
  // (or no spans) leaves that direction out. Without `progress` both
  // streams run unlimited.
  struct Transfer {
    int32_t to = -1;
    std::vector<SendSpan> send;
    int32_t from = -1;
    std::vector<RecvSpan> recv;
    Progress progress;
  };

  // Collective over the ranks of `options`, all with stores that share
  // their keys (the caller prefixes them for the round).
  static StatusOr<std::unique_ptr<TcpMesh>> Connect(const Options& options,
                                                    Store* store);

  // Returns once both streams are complete. `what` names the collective in
  // errors ("rank 3 (10.1.0.2:41234) closed the connection during
  // allreduce"). Silence is measured from the last byte that moved.
  Status Run(const Transfer& transfer, const char* what);

  // The connection to each rank (this rank's entry empty), for a caller
  // that moves bytes its own way over the mesh this formed
  // (transport/tcp_streams.h). Every later Run fails.
  struct Connection {
    Socket socket;
    std::string address;  // "10.1.0.2:41234", for errors
  };
  std::vector<Connection> ReleaseConnections();

  // The sticky error; ok while the mesh works.
  const Status& error() const { return error_; }
  // Connections dropped while the mesh formed: another round, unexpected
  // rank, a duplicate, a wrong proof, a handshake that never completed, or
  // one over the limit of pending connections.
  int32_t refused_connections() const { return refused_; }
  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }

 private:
  TcpMesh(const Options& options, std::vector<Connection> peers,
          int32_t refused);

  std::string Describe(int32_t peer) const;
  Status Fail(Status status);

  // Run's steps (tcp_mesh.cc): each stream moves what its socket takes
  // now; when neither moved, the mesh waits for a socket.
  struct Cursor;
  StatusOr<bool> SendWhatFits(const Transfer& transfer, int fd, Cursor* send,
                              const char* what);
  StatusOr<bool> ReceiveWhatArrived(const Transfer& transfer, int fd,
                                    Cursor* recv, const char* what);
  Status AwaitSockets(const Transfer& transfer, int out, int in,
                      const Cursor& send, const Cursor& recv,
                      Clock::time_point last_moved, const char* what);

  const int32_t rank_;
  const int32_t size_;
  const std::chrono::milliseconds timeout_;
  // Indexed by rank; this rank's entry is empty.
  std::vector<Connection> peers_;
  const int32_t refused_;
  Status error_;
  AdaptiveSpin spin_;
};

}  // namespace kolo

#endif  // KOLO_TRANSPORT_TCP_MESH_H_
