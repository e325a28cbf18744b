#include "collectives/collective.h"

namespace kolo {

const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kReducescatter: return "reducescatter";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown collective";
}

}  // namespace kolo
