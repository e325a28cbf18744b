// Tensor fusion: packs ready allreduces into as few engine calls as
// possible. A training step makes hundreds of small gradient allreduces;
// one call per tensor would pay the engine's latency hundreds of times.
//
// Rules: allreduces of the same data type, reduce op and set of joined
// ranks share a batch while the batch stays within the threshold (one
// tensor larger than the threshold gets a batch of its own). A tensor of at
// least the engine's cutoff runs alone, straight from its own buffers: on a
// CPU the copies into and out of the fusion buffer cost more than the call
// they would save. The members of a group always share one batch whatever
// their sizes. Other collectives, and operations that failed negotiation,
// run alone. Batches run in the order of their first operation, so every
// rank runs them in the same order.
#ifndef KOLO_RUNTIME_FUSION_H_
#define KOLO_RUNTIME_FUSION_H_

#include <cstdint>
#include <vector>

#include "runtime/coordinator.h"

namespace kolo {

struct Batch {
  std::vector<size_t> operations;  // indices into the ready list
  int64_t bytes = 0;
};

std::vector<Batch> PlanFusion(const std::vector<ReadyOperation>& ready,
                              int64_t threshold_bytes, int64_t cutoff_bytes);

}  // namespace kolo

#endif  // KOLO_RUNTIME_FUSION_H_
