// ResponseCache: gives every operation that completed on all ranks a bit
// position, so the next time a rank has the same operation ready it
// announces it with one bit instead of its full TensorSpec. In a steady
// training loop every gradient is cached after the first step, and the
// negotiation of a step shrinks to one fixed-size bit-vector exchange.
//
// Every rank holds an identical copy: entries are added, touched and
// evicted only by Put/Erase, which the runtime calls in the same order on
// every rank with the same arguments (the outcome of a negotiation all of
// them saw). A bit therefore means the same operation everywhere. When the
// cache is full, the least recently used entry gives its bit to the new one.
//
// Thread-safety: none; owned by the runtime's thread.
#ifndef KOLO_RUNTIME_RESPONSE_CACHE_H_
#define KOLO_RUNTIME_RESPONSE_CACHE_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tensor_spec.h"

namespace kolo {

class ResponseCache {
 public:
  // capacity 0 disables the cache (Lookup always misses).
  explicit ResponseCache(int32_t capacity);

  int32_t capacity() const { return static_cast<int32_t>(slots_.size()); }
  // The bit of the entry for spec.name whose spec for `rank` equals `spec`,
  // or -1.
  int32_t Lookup(const TensorSpec& spec, int32_t rank) const;
  // Every rank's spec stored at `bit` (which Lookup returned).
  const std::vector<TensorSpec>& SpecsAt(int32_t bit) const;
  // Records an operation that completed with these per-rank specs, as the
  // most recently used entry (replacing an entry of the same name).
  void Put(const std::vector<TensorSpec>& specs_by_rank);
  // Forgets the entry named `name`, if any (its shape or type changed).
  void Erase(const std::string& name);
  int32_t size() const { return static_cast<int32_t>(bit_by_name_.size()); }

 private:
  struct Slot {
    bool used = false;
    uint64_t last_used = 0;
    std::vector<TensorSpec> specs;
  };
  std::vector<Slot> slots_;
  std::unordered_map<std::string, int32_t> bit_by_name_;
  uint64_t clock_ = 0;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_RESPONSE_CACHE_H_
