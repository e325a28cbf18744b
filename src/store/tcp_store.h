// The TCP store: one server (hosted by kolorun, or by rank 0 when a job is
// started by mpirun or Slurm) and one client per process.
//
// Protocol. Every message is a 4-byte little-endian length and a body; a
// string field is a 4-byte length and bytes. The job secret never travels:
// both ends prove they hold it with HMAC-SHA256 (store/message_auth.h has
// the formulas).
//
//   server: challenge (magic "KOLO-STORE-2", a fresh 32-byte nonce)
//   client: hello (magic, its own nonce, its rank, the client proof)
//   server: ok and the server proof, or kUnauthenticated and close
//
// The server checks the client proof in constant time before it reads
// anything else from the connection, so a client without the secret never
// reaches the data (each refusal is counted, and logged once per address);
// the client checks the server proof, so it never hands its requests to an
// impostor store either. Afterwards
// each request (set, get, add, wait, goodbye) gets exactly one response
// carrying a status code, a message and a value, and every request and
// response ends with a tag over its direction, its sequence number in that
// direction and its body, under a key derived from the secret and both
// nonces. A message that fails its tag closes the connection with
// kUnauthenticated. Gets and waits block on the server up to the timeout
// the client sends, so no request polls.
//
// Liveness. The server remembers which rank owns each authenticated
// connection. A connection that closes without a goodbye means its process
// died: the server appends the rank to the key kFailedRanksKey, which the
// survivors read to name the dead rank in their errors.
//
// Before authentication. Anyone who can reach the port can connect, so a
// connection that has not proved the secret yet costs the server a bounded
// slot and a few hundred bytes, and never for long:
//
//   - the hello is read into a buffer of at most kStoreMaxHandshakeBytes,
//     checked against its length prefix before anything is allocated (a
//     real hello is 97 bytes; later messages, from authenticated peers,
//     may be up to 64 MiB);
//   - at most kStoreMaxHandshakes connections are in their handshake at
//     once, and at most kStoreMaxHandshakesPerHost from one address; a
//     connection over either cap is closed at once, counted, and logged at
//     most once per 10 s. An honest client that finds the door closed
//     before its challenge retries until its own timeout;
//   - the whole handshake must be done within kStoreHandshakeTimeout;
//   - a connection's thread and descriptor are reclaimed within 100 ms of
//     its end (refused, dropped or closed), not kept until Stop(); Stop()
//     shuts down only descriptors the server still owns.
//
// What this protects. Only holders of the secret can read or write keys,
// and nobody on the network can alter, inject, reorder or replay a message
// (within its connection or into another) without the connection failing.
// It does not encrypt: keys and values (addresses, ranks, the job's
// rendezvous data) travel in clear and can be read by anyone who can see
// loopback or the cluster network; only the secret stays hidden. Nor can it
// stop someone on the path from cutting a connection, which the server
// then reports like a dead rank.
#ifndef KOLO_STORE_TCP_STORE_H_
#define KOLO_STORE_TCP_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "net/socket.h"
#include "store/memory_store.h"
#include "store/message_auth.h"
#include "store/store.h"

namespace kolo {

// Comma-separated ranks whose store connection dropped without a goodbye.
inline constexpr const char* kFailedRanksKey = "kolo/failed_ranks";

// The caps on connections that have not authenticated yet (see above). A
// handshake takes one round trip and three HMACs, well under a millisecond
// on a cluster network, so 16 from one host is a host's ranks all starting
// at once (those over the cap retry), and 128 in all lets a 1,000-rank job
// start in a few rounds of retries while holding at most 128 threads for a
// scan or a flood. Like sshd's MaxStartups, they bound what a peer without
// the secret can hold, not what the job's own ranks can do once in.
inline constexpr uint32_t kStoreMaxHandshakeBytes = 512;
inline constexpr int32_t kStoreMaxHandshakes = 128;
inline constexpr int32_t kStoreMaxHandshakesPerHost = 16;
inline constexpr std::chrono::seconds kStoreHandshakeTimeout{5};

// Thread-safety: Start/Stop from one thread; the accessors from any.
class TcpStoreServer {
 public:
  // Binds `host`:`port` (port 0 lets the OS choose) and starts serving.
  // kInvalidArgument for a secret shorter than kMinJobSecretBytes.
  static StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const std::string& host, int port, std::string secret);
  ~TcpStoreServer();

  int port() const { return port_; }
  // Ranks whose connection closed without a goodbye, in the order noticed.
  std::vector<int32_t> FailedRanks() KOLO_EXCLUDES(mutex_);
  // Connections refused during the handshake (a wrong secret, a bad or
  // missing hello). A connection closed later because a message failed its
  // tag is logged but not counted here.
  int64_t rejected_connections() const { return rejected_.load(); }
  // Connections closed unread because kStoreMaxHandshakes or
  // kStoreMaxHandshakesPerHost handshakes were already in progress.
  int64_t turned_away_connections() const { return turned_away_.load(); }
  // Ranks connected now (authenticated, not yet gone): a store that must
  // outlive its job waits for this to reach 0 before it stops.
  int32_t connected_ranks() const { return open_ranks_.load(); }
  // Stops accepting, disconnects every client and joins the threads.
  void Stop();
  // The keys themselves, for the process that hosts the server (kolorun's
  // elastic driver reads heartbeats and writes rounds without a socket).
  Store& local() { return data_; }

 private:
  TcpStoreServer(Socket listener, std::string secret);
  // An accepted connection. The server owns its socket until the thread
  // has ended and been joined, so a descriptor number that Stop() shuts
  // down is never one the kernel has handed out again.
  struct Connection {
    Socket socket;
    std::string peer;  // "10.1.0.3:51234"
    std::thread thread;
    // Set by the thread as its last act; guarded by TcpStoreServer::mutex_.
    bool finished = false;
  };
  // An authenticated connection: whose it is and how its messages are
  // sealed.
  struct Session {
    int32_t rank;  // -1 for a client that is not a rank
    MessageAuthenticator auth;
  };

  // Accepts until Stop(), reaping finished connections between accepts.
  void AcceptLoop();
  // Starts a thread for `client`, or closes it at once when the caps on
  // handshakes in progress are reached.
  void Admit(Socket client) KOLO_EXCLUDES(mutex_);
  // Joins the threads of finished connections and closes their sockets.
  void ReapFinished() KOLO_EXCLUDES(mutex_);
  // Counts a connection closed unread, and logs the count at most once per
  // kTurnAwayLogInterval.
  void TurnAway(const std::string& peer, const std::string& why)
      KOLO_REQUIRES(mutex_);
  // One client's whole connection: Authenticate, then Serve.
  void ServeClient(Connection* connection) KOLO_EXCLUDES(mutex_);
  // Challenges the client and checks its hello; the session, or the reason
  // it was refused (already answered, counted and logged).
  StatusOr<Session> Authenticate(Socket& client, const std::string& peer);
  // Answers each request until a goodbye, a drop (which RecordFailure
  // notes), a message that fails its tag, or Stop().
  void Serve(Socket& client, const std::string& peer, Session& session);
  // Counts a refused connection, logs it if it is the first from its
  // address, and tells the client why.
  void Refuse(Socket& client, const std::string& peer,
              const std::string& reason) KOLO_EXCLUDES(mutex_);
  // The response to one request other than goodbye.
  std::string Answer(const std::string& request);
  void RecordFailure(int32_t rank) KOLO_EXCLUDES(mutex_);

  Socket listener_;
  const std::string secret_;
  const int port_;
  MemoryStore data_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> turned_away_{0};
  std::atomic<int32_t> open_ranks_{0};
  std::thread accept_thread_;
  Mutex mutex_;
  // A list, so that a Connection stays where its thread found it while
  // others come and go.
  std::list<Connection> connections_ KOLO_GUARDED_BY(mutex_);
  int32_t handshakes_ KOLO_GUARDED_BY(mutex_) = 0;
  // Handshakes in progress by address (without the port); an address
  // leaves the map when its count returns to 0.
  std::map<std::string, int32_t> handshakes_by_host_ KOLO_GUARDED_BY(mutex_);
  int64_t turned_away_unlogged_ KOLO_GUARDED_BY(mutex_) = 0;
  Clock::time_point next_turn_away_log_ KOLO_GUARDED_BY(mutex_){};
  std::vector<int32_t> failed_ranks_ KOLO_GUARDED_BY(mutex_);
  // Hosts (addresses without the port) whose refusal was logged: a client
  // retrying with the wrong secret, or a scanner, would flood the log.
  std::set<std::string> refused_hosts_ KOLO_GUARDED_BY(mutex_);
};

// Thread-safety: requests from many threads are serialised on the one
// connection.
class TcpStoreClient : public Store {
 public:
  // Connects, retrying until `timeout` while the server is not up yet or
  // turns the connection away (too many handshakes in progress), and
  // authenticates as `rank` (-1 for a client that is not a rank).
  // kInvalidArgument for a secret shorter than kMinJobSecretBytes;
  // kUnauthenticated when the store refuses this process's secret, or when
  // it cannot prove that it holds the same secret.
  static StatusOr<std::unique_ptr<TcpStoreClient>> Connect(
      const std::string& host, int port, const std::string& secret,
      int32_t rank, std::chrono::milliseconds timeout);
  ~TcpStoreClient() override;

  Status Set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key,
                            std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys,
              std::chrono::milliseconds timeout) override;
  // Tells the server this rank leaves on purpose, then disconnects.
  Status Close();

 private:
  TcpStoreClient(Socket socket, std::string server, MessageAuthenticator auth);
  // Runs the client's side of the handshake on a fresh connection.
  static StatusOr<std::unique_ptr<TcpStoreClient>> Handshake(
      Socket socket, const std::string& server, const std::string& secret,
      int32_t rank, Deadline deadline);
  StatusOr<std::string> Request(const std::string& body,
                                std::chrono::milliseconds server_wait)
      KOLO_EXCLUDES(mutex_);

  Mutex mutex_;
  Socket socket_ KOLO_GUARDED_BY(mutex_);
  MessageAuthenticator auth_ KOLO_GUARDED_BY(mutex_);
  const std::string server_;
};

}  // namespace kolo

#endif  // KOLO_STORE_TCP_STORE_H_
