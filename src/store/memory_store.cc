#include "store/memory_store.h"

#include "common/config.h"

namespace kolo {

Status MemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!abort_reason_.empty()) return Aborted(abort_reason_);
    values_[key] = value;
  }
  changed_.notify_all();
  return Status::Ok();
}

StatusOr<std::string> MemoryStore::Get(const std::string& key,
                                       std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool ready = changed_.wait_for(lock, timeout, [&] {
    return !abort_reason_.empty() || values_.count(key) > 0;
  });
  if (!abort_reason_.empty()) return Aborted(abort_reason_);
  if (!ready) {
    return Timeout("key '" + key + "' was not set within " +
                   std::to_string(timeout.count()) + " ms");
  }
  return values_[key];
}

StatusOr<int64_t> MemoryStore::Add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!abort_reason_.empty()) return Aborted(abort_reason_);
    auto it = values_.find(key);
    int64_t current = 0;
    if (it != values_.end()) {
      StatusOr<int64_t> parsed =
          ParseInt(it->second, INT64_MIN, INT64_MAX, "counter '" + key + "'");
      if (!parsed.ok()) return parsed.status();
      current = *parsed;
    }
    result = current + delta;
    values_[key] = std::to_string(result);
  }
  changed_.notify_all();
  return result;
}

Status MemoryStore::Wait(const std::vector<std::string>& keys,
                         std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto missing = [&]() -> const std::string* {
    for (const std::string& key : keys) {
      if (values_.count(key) == 0) return &key;
    }
    return nullptr;
  };
  const bool ready = changed_.wait_for(lock, timeout, [&] {
    return !abort_reason_.empty() || missing() == nullptr;
  });
  if (!abort_reason_.empty()) return Aborted(abort_reason_);
  if (!ready) {
    return Timeout("key '" + *missing() + "' was not set within " +
                   std::to_string(timeout.count()) + " ms");
  }
  return Status::Ok();
}

void MemoryStore::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_reason_ = reason;
  }
  changed_.notify_all();
}

}  // namespace kolo
