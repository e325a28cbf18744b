// Presents kolo's Store to Gloo's rendezvous (gloo::rendezvous::Store),
// shared by the Gloo backend and the Gloo peer link. Gloo reports errors by
// throwing, so the adapter turns a failed Status into gloo::IoException
// carrying the store's own words; each user catches it where it calls
// connectFullMesh.
#ifndef KOLO_COLLECTIVES_GLOO_GLOO_STORE_ADAPTER_H_
#define KOLO_COLLECTIVES_GLOO_GLOO_STORE_ADAPTER_H_

#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace kolo {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<kolo::Store> store,
                   std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Throw(store_->Set(key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    StatusOr<std::string> value = store_->Get(key, timeout_);
    Throw(value.status());
    return std::vector<char>(value->begin(), value->end());
  }
  void wait(const std::vector<std::string>& keys) override {
    Throw(store_->Wait(keys, timeout_));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Throw(store_->Wait(keys, timeout));
  }

 private:
  static void Throw(const Status& status) {
    if (!status.ok()) throw gloo::IoException(status.ToString());
  }
  std::shared_ptr<kolo::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_GLOO_GLOO_STORE_ADAPTER_H_
