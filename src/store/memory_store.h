// MemoryStore: a Store held in this process's memory. It backs the TCP store
// server, and lets tests run ranks as threads without any socket.
//
// Thread-safety: every method may be called from any thread; Get and Wait
// block only the calling thread, and Abort wakes them all.
#ifndef KOLO_STORE_MEMORY_STORE_H_
#define KOLO_STORE_MEMORY_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "store/store.h"

namespace kolo {

class MemoryStore : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key,
                            std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys,
              std::chrono::milliseconds timeout) override;

  // Wakes every waiter with kAborted and makes later waits fail at once;
  // used when the server hosting this store shuts down.
  void Abort(const std::string& reason);

 private:
  // The first of `keys` that is not set yet, or null when all are.
  const std::string* FirstMissing(const std::vector<std::string>& keys) const
      KOLO_REQUIRES(mutex_);

  Mutex mutex_;
  CondVar changed_;  // notified on every Set, Add and Abort
  std::map<std::string, std::string> values_ KOLO_GUARDED_BY(mutex_);
  std::string abort_reason_ KOLO_GUARDED_BY(mutex_);
};

}  // namespace kolo

#endif  // KOLO_STORE_MEMORY_STORE_H_
