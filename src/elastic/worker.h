// The worker's side of the elastic protocol (elastic/protocol.h): its
// heartbeat, and waiting for the round it is to join.
//
// Threads: the heartbeat runs on a thread of its own with its own store
// connection, because the training thread blocks in long server-side waits
// for the next round on the other connection; a frozen process (SIGSTOP,
// a debugger) stops both, which is what the driver watches for.
#ifndef KOLO_ELASTIC_WORKER_H_
#define KOLO_ELASTIC_WORKER_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "common/config.h"
#include "common/mutex.h"
#include "kolo/status.h"
#include "store/tcp_store.h"

namespace kolo::elastic {

// This worker's place in a round.
struct RoundAssignment {
  int64_t round = -1;
  int32_t rank = 0;
  int32_t size = 1;
};

// Thread-safety: NextRound, NewerRoundExists and ReportBroken from one
// thread (the training thread); the heartbeat is internal.
class ElasticWorker {
 public:
  // Connects twice to the driver's store and starts beating: the first
  // beat tells the driver this worker is ready to join a round.
  static StatusOr<std::unique_ptr<ElasticWorker>> Connect(
      const ElasticWorkerConfig& config);
  ~ElasticWorker();
  ElasticWorker(const ElasticWorker&) = delete;
  ElasticWorker& operator=(const ElasticWorker&) = delete;

  int64_t id() const { return config_.worker; }

  // Waits for the newest round after `after` that lists this worker. A
  // worker that was a member of an earlier round (`was_member`) and is not
  // listed in the newest one was removed: kNotFound saying so. kTimeout
  // when no such round comes within the round timeout.
  StatusOr<RoundAssignment> NextRound(int64_t after, bool was_member);
  // Whether the driver published a round after `round` (a worker waits to
  // join, or one is being removed).
  StatusOr<bool> NewerRoundExists(int64_t round);
  // Waits at the gate of this worker's round until every member has come
  // (ok), or the driver closed it because the round was replaced
  // (kAborted).
  Status PassGate(const RoundAssignment& assignment);
  // Tells the driver that `round` broke under this worker.
  Status ReportBroken(int64_t round);

 private:
  ElasticWorker(ElasticWorkerConfig config,
                std::unique_ptr<TcpStoreClient> rendezvous,
                std::unique_ptr<TcpStoreClient> heartbeat);
  void BeatUntilStopped();

  const ElasticWorkerConfig config_;
  std::unique_ptr<TcpStoreClient> rendezvous_;
  std::unique_ptr<TcpStoreClient> heartbeat_;
  Mutex mutex_;
  CondVar stop_changed_;
  bool stopping_ KOLO_GUARDED_BY(mutex_) = false;
  std::thread beater_;
};

}  // namespace kolo::elastic

#endif  // KOLO_ELASTIC_WORKER_H_
