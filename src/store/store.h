// Store: the key-value rendezvous that ranks use to find each other, in the
// manner of c10d's Store. Keys are written once or counted with Add; readers
// block until a key appears or their timeout expires.
//
// Thread-safety: every implementation is safe to call from many threads.
#ifndef KOLO_STORE_STORE_H_
#define KOLO_STORE_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

class Store {
 public:
  virtual ~Store() = default;

  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for `key` to be set, then returns its value.
  virtual StatusOr<std::string> Get(const std::string& key,
                                    std::chrono::milliseconds timeout) = 0;
  // Adds `delta` to the integer stored at `key` (0 when absent) and returns
  // the new value.
  virtual StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Waits up to `timeout` until every key in `keys` is set.
  virtual Status Wait(const std::vector<std::string>& keys,
                      std::chrono::milliseconds timeout) = 0;
};

// Prepends a prefix to every key, so that each rendezvous round or each
// communicator gets a namespace of its own over one shared store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  Status Set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key,
                            std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys,
              std::chrono::milliseconds timeout) override;

 private:
  std::string Prefixed(const std::string& key) const;

  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace kolo

#endif  // KOLO_STORE_STORE_H_
