// The TCP store: one server (hosted by kolorun, or by rank 0 when a job is
// started by mpirun or Slurm) and one client per process.
//
// Protocol. Every message is a 4-byte little-endian length and a body. A
// client opens with a hello (magic "KOLO-STORE-1", the job's secret, its
// rank); the server compares the secret in constant time and answers ok, or
// answers kUnauthenticated and closes. Afterwards each request (set, get,
// add, wait, goodbye) gets exactly one response carrying a status code, a
// message and a value. Gets and waits block on the server up to the timeout
// the client sends, so no request polls.
//
// Liveness. The server remembers which rank owns each authenticated
// connection. A connection that closes without a goodbye means its process
// died: the server appends the rank to the key kFailedRanksKey, which the
// survivors read to name the dead rank in their errors.
//
// The secret keeps stray or foreign clients out of a job (another job's
// workers, a port scanner); it travels in clear text, so it is not a defence
// against someone who can read loopback or the cluster network.
#ifndef KOLO_STORE_TCP_STORE_H_
#define KOLO_STORE_TCP_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "net/socket.h"
#include "store/memory_store.h"
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
  // Number of connections refused for a wrong secret or a bad hello.
  int64_t rejected_connections() const { return rejected_.load(); }
  // Stops accepting, disconnects every client and joins the threads.
  void Stop();

 private:
  TcpStoreServer(Socket listener, std::string secret);
  void AcceptLoop();
  // One client's whole connection: Authenticate, then Answer each request
  // until a goodbye, a drop (which RecordFailure notes) or Stop().
  void ServeClient(Socket client);
  // Reads the hello and answers it; the rank the client claimed (-1 for a
  // non-rank client), or the reason it was refused.
  StatusOr<int32_t> Authenticate(Socket& client, const std::string& peer);
  // The response to one request other than goodbye.
  std::string Answer(const std::string& request);
  void RecordFailure(int32_t rank) KOLO_EXCLUDES(mutex_);

  Socket listener_;
  const std::string secret_;
  const int port_;
  MemoryStore data_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> rejected_{0};
  std::thread accept_thread_;
  Mutex mutex_;
  std::vector<std::thread> client_threads_ KOLO_GUARDED_BY(mutex_);
  std::vector<int> client_fds_ KOLO_GUARDED_BY(mutex_);
  std::vector<int32_t> failed_ranks_ KOLO_GUARDED_BY(mutex_);
};

// Thread-safety: requests from many threads are serialised on the one
// connection.
class TcpStoreClient : public Store {
 public:
  // Connects, retrying until `timeout` while the server is not up yet, and
  // authenticates as `rank` (-1 for a client that is not a rank).
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
  explicit TcpStoreClient(Socket socket, std::string server);
  StatusOr<std::string> Request(const std::string& body,
                                std::chrono::milliseconds server_wait)
      KOLO_EXCLUDES(mutex_);

  Mutex mutex_;
  Socket socket_ KOLO_GUARDED_BY(mutex_);
  const std::string server_;
};

}  // namespace kolo

#endif  // KOLO_STORE_TCP_STORE_H_
