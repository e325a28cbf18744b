// MemoryStore: a Store held in this process's memory. It backs the TCP store
// server, and lets tests run ranks as threads without any socket.
#ifndef KOLO_STORE_MEMORY_STORE_H_
#define KOLO_STORE_MEMORY_STORE_H_

#include <condition_variable>
#include <map>
#include <mutex>

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
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;  // guarded by mutex_
  std::string abort_reason_;                   // guarded by mutex_
};

}  // namespace kolo

#endif  // KOLO_STORE_MEMORY_STORE_H_
