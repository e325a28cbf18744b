#include "store/store.h"

namespace kolo {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {}

std::string PrefixStore::Prefixed(const std::string& key) const {
  return prefix_ + "/" + key;
}

Status PrefixStore::Set(const std::string& key, const std::string& value) {
  return base_->Set(Prefixed(key), value);
}

StatusOr<std::string> PrefixStore::Get(const std::string& key,
                                       std::chrono::milliseconds timeout) {
  return base_->Get(Prefixed(key), timeout);
}

StatusOr<int64_t> PrefixStore::Add(const std::string& key, int64_t delta) {
  return base_->Add(Prefixed(key), delta);
}

Status PrefixStore::Wait(const std::vector<std::string>& keys,
                         std::chrono::milliseconds timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) prefixed.push_back(Prefixed(key));
  return base_->Wait(prefixed, timeout);
}

}  // namespace kolo
