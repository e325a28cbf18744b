#include "runtime/response_cache.h"

namespace kolo {

ResponseCache::ResponseCache(int32_t capacity)
    : slots_(static_cast<size_t>(capacity < 0 ? 0 : capacity)) {}

int32_t ResponseCache::Lookup(const TensorSpec& spec, int32_t rank) const {
  auto it = bit_by_name_.find(spec.name);
  if (it == bit_by_name_.end()) return -1;
  const std::vector<TensorSpec>& specs = slots_[it->second].specs;
  if (rank >= static_cast<int32_t>(specs.size()) || specs[rank] != spec)
    return -1;
  return it->second;
}

const std::vector<TensorSpec>& ResponseCache::SpecsAt(int32_t bit) const {
  return slots_[bit].specs;
}

void ResponseCache::Put(const std::vector<TensorSpec>& specs_by_rank) {
  if (slots_.empty() || specs_by_rank.empty()) return;
  const std::string& name = specs_by_rank.front().name;
  int32_t bit = -1;
  auto it = bit_by_name_.find(name);
  if (it != bit_by_name_.end()) {
    bit = it->second;
  } else {
    // A free slot, else the least recently used one.
    for (int32_t i = 0; i < capacity(); ++i) {
      if (!slots_[i].used) {
        bit = i;
        break;
      }
      if (bit < 0 || slots_[i].last_used < slots_[bit].last_used) bit = i;
    }
    if (slots_[bit].used) bit_by_name_.erase(slots_[bit].specs.front().name);
    bit_by_name_[name] = bit;
  }
  slots_[bit].used = true;
  slots_[bit].last_used = ++clock_;
  slots_[bit].specs = specs_by_rank;
}

void ResponseCache::Erase(const std::string& name) {
  auto it = bit_by_name_.find(name);
  if (it == bit_by_name_.end()) return;
  slots_[it->second] = Slot();
  bit_by_name_.erase(it);
}

}  // namespace kolo
