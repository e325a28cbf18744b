// The kinds of collective operation kolo runs.
#ifndef KOLO_COLLECTIVES_COLLECTIVE_H_
#define KOLO_COLLECTIVES_COLLECTIVE_H_

#include <cstdint>

namespace kolo {

enum class Collective : int32_t {
  kAllreduce = 1,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter,
  kBarrier,
};

// "allreduce", "allgather", ...
const char* CollectiveName(Collective collective);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_COLLECTIVE_H_
