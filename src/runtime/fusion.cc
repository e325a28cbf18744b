#include "runtime/fusion.h"

namespace kolo {
namespace {

bool Fusible(const ReadyOperation& op, int64_t cutoff_bytes) {
  if (!op.error.ok() || op.specs[0].collective != Collective::kAllreduce)
    return false;
  return !op.specs[0].group.empty() || op.specs[0].bytes() < cutoff_bytes;
}

bool SameKind(const ReadyOperation& a, const ReadyOperation& b) {
  return a.specs[0].type == b.specs[0].type && a.specs[0].op == b.specs[0].op &&
         a.joined == b.joined;
}

}  // namespace

std::vector<Batch> PlanFusion(const std::vector<ReadyOperation>& ready,
                              int64_t threshold_bytes, int64_t cutoff_bytes) {
  std::vector<Batch> batches;
  std::vector<bool> planned(ready.size(), false);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (planned[i]) continue;
    planned[i] = true;
    Batch batch;
    batch.operations.push_back(i);
    if (!Fusible(ready[i], cutoff_bytes)) {
      batches.push_back(std::move(batch));
      continue;
    }
    const TensorSpec& first = ready[i].specs[0];
    batch.bytes = first.bytes();
    for (size_t j = i + 1; j < ready.size(); ++j) {
      if (planned[j] || !Fusible(ready[j], cutoff_bytes) ||
          !SameKind(ready[i], ready[j])) {
        continue;
      }
      const TensorSpec& candidate = ready[j].specs[0];
      const bool same_group =
          !first.group.empty() && candidate.group == first.group;
      const bool fits = first.group.empty() && candidate.group.empty() &&
                        batch.bytes + candidate.bytes() <= threshold_bytes;
      if (!same_group && !fits) continue;
      planned[j] = true;
      batch.operations.push_back(j);
      batch.bytes += candidate.bytes();
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace kolo
