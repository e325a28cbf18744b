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

// Thread-safety: Start/Stop from one thread; the accessors from any.
class TcpStoreServer {
 public:
  // Binds `host`:`port` (port 0 lets the OS choose) and starts serving.
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
  void AcceptLoop();
  // An authenticated connection: whose it is and how its messages are
  // sealed.
  struct Session {
    int32_t rank;  // -1 for a client that is not a rank
    MessageAuthenticator auth;
  };

  // One client's whole connection: Authenticate, then Answer each request
  // until a goodbye, a drop (which RecordFailure notes), a message that
  // fails its tag, or Stop().
  void ServeClient(Socket client);
  // Challenges the client and checks its hello; the session, or the reason
  // it was refused (already answered, counted and logged).
  StatusOr<Session> Authenticate(Socket& client, const std::string& peer);
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
  std::atomic<int32_t> open_ranks_{0};
  std::thread accept_thread_;
  Mutex mutex_;
  std::vector<std::thread> client_threads_ KOLO_GUARDED_BY(mutex_);
  std::vector<int> client_fds_ KOLO_GUARDED_BY(mutex_);
  std::vector<int32_t> failed_ranks_ KOLO_GUARDED_BY(mutex_);
  // Hosts (addresses without the port) whose refusal was logged: a client
  // retrying with the wrong secret, or a scanner, would flood the log.
  std::set<std::string> refused_hosts_ KOLO_GUARDED_BY(mutex_);
};

// Thread-safety: requests from many threads are serialised on the one
// connection.
class TcpStoreClient : public Store {
 public:
  // Connects, retrying until `timeout` while the server is not up yet, and
  // authenticates as `rank` (-1 for a client that is not a rank).
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
