#include "store/memory_store.h"

#include "common/config.h"

namespace kolo {
namespace {

using SteadyClock = std::chrono::steady_clock;

// now + timeout, saturating instead of overflowing for a huge timeout.
SteadyClock::time_point DeadlineIn(std::chrono::milliseconds timeout) {
  const SteadyClock::time_point now = SteadyClock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
      SteadyClock::time_point::max() - now);
  return timeout >= room ? SteadyClock::time_point::max() : now + timeout;
}

}  // namespace

Status MemoryStore::Set(const std::string& key, const std::string& value) {
  {
    MutexLock lock(&mutex_);
    if (!abort_reason_.empty()) return Aborted(abort_reason_);
    values_[key] = value;
  }
  changed_.NotifyAll();
  return Status::Ok();
}

StatusOr<std::string> MemoryStore::Get(const std::string& key,
                                       std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = DeadlineIn(timeout);
  MutexLock lock(&mutex_);
  while (abort_reason_.empty() && values_.count(key) == 0) {
    if (!changed_.WaitUntil(&mutex_, deadline)) break;
  }
  if (!abort_reason_.empty()) return Aborted(abort_reason_);
  auto it = values_.find(key);
  if (it == values_.end()) {
    return Timeout("key '" + key + "' was not set within " +
                   std::to_string(timeout.count()) + " ms");
  }
  return it->second;
}

StatusOr<int64_t> MemoryStore::Add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    MutexLock lock(&mutex_);
    if (!abort_reason_.empty()) return Aborted(abort_reason_);
    auto it = values_.find(key);
    int64_t current = 0;
    if (it != values_.end()) {
      StatusOr<int64_t> parsed =
          ParseInt(it->second, INT64_MIN, INT64_MAX, "counter '" + key + "'");
      if (!parsed.ok()) return parsed.status();
      current = *parsed;
    }
    // A client's delta is untrusted: a sum past int64 is refused, and the
    // counter keeps its value.
    if (__builtin_add_overflow(current, delta, &result)) {
      return InvalidArgument("counter '" + key + "' at " +
                             std::to_string(current) + " cannot add " +
                             std::to_string(delta) + ": the sum overflows");
    }
    values_[key] = std::to_string(result);
  }
  changed_.NotifyAll();
  return result;
}

const std::string* MemoryStore::FirstMissing(
    const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    if (values_.count(key) == 0) return &key;
  }
  return nullptr;
}

Status MemoryStore::Wait(const std::vector<std::string>& keys,
                         std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = DeadlineIn(timeout);
  MutexLock lock(&mutex_);
  while (abort_reason_.empty() && FirstMissing(keys) != nullptr) {
    if (!changed_.WaitUntil(&mutex_, deadline)) break;
  }
  if (!abort_reason_.empty()) return Aborted(abort_reason_);
  if (const std::string* missing = FirstMissing(keys)) {
    return Timeout("key '" + *missing + "' was not set within " +
                   std::to_string(timeout.count()) + " ms");
  }
  return Status::Ok();
}

void MemoryStore::Abort(const std::string& reason) {
  {
    MutexLock lock(&mutex_);
    abort_reason_ = reason;
  }
  changed_.NotifyAll();
}

}  // namespace kolo
