// The argument check every collective runs before any data moves.
//
// Each rank describes its call in a fixed-size CallDescriptor and the ranks
// allgather them (one small message). Every rank then runs the same pure
// comparison on the same table, so all of them return the same kMismatch
// error, naming the ranks and the field that differed, instead of letting
// the engine hang or read the wrong number of bytes. A rank whose own
// arguments are invalid (say a negative count) still takes part in the
// exchange, marks its descriptor invalid and so fails every rank at once.
// The variable-count collectives exchange their count vectors in a second
// step, run only when every header agreed.
#ifndef KOLO_COLLECTIVES_DESCRIPTOR_H_
#define KOLO_COLLECTIVES_DESCRIPTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

enum class Collective : int32_t {
  kAllreduce = 1,
  kAllgather,
  kAllgatherv,
  kBroadcast,
  kAlltoall,
  kAlltoallv,
  kReducescatter,
  kBarrier,
};

const char* CollectiveName(Collective collective);

// Plain bytes on the wire: fixed size, no pointers.
struct CallDescriptor {
  uint64_t sequence = 0;
  int32_t collective = 0;
  int32_t data_type = -1;  // -1 when the collective has no data (barrier)
  int32_t reduce_op = -1;  // -1 when it does not reduce
  int32_t root = -1;       // -1 when it has no root
  int64_t count = 0;       // per-rank element count (see kolo.h per op)
  int32_t invalid = 0;     // 1: this rank's own arguments were bad
  char problem[92] = {};   // why, when invalid (truncated)
};
static_assert(sizeof(CallDescriptor) == 128, "descriptor is wire format");

CallDescriptor MakeDescriptor(uint64_t sequence, Collective collective,
                              int64_t count, int32_t data_type = -1,
                              int32_t reduce_op = -1, int32_t root = -1);
// Marks `descriptor` invalid with `problem` as the reason.
void MarkInvalid(CallDescriptor* descriptor, const std::string& problem);

// kMismatch when the ranks' descriptors differ (or kInvalidArgument when a
// rank marked itself invalid); the message names the collective, its
// sequence number, the field and which ranks had which value. Fields the
// collective does not use (count of allgatherv, whose counts are checked
// separately) are ignored.
Status CompareDescriptors(const std::vector<CallDescriptor>& by_rank);

// recv_counts[r] is rank r's recv_counts vector, send_counts[r] rank r's own
// send count. All ranks must list the same counts, and rank r must send
// what everyone expects from it.
Status CheckAllgathervCounts(const std::vector<std::vector<int64_t>>& recv_counts,
                             const std::vector<int64_t>& send_counts);
// Rank i's send_counts[j] must equal rank j's recv_counts[i].
Status CheckAlltoallvCounts(const std::vector<std::vector<int64_t>>& send_counts,
                            const std::vector<std::vector<int64_t>>& recv_counts);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_DESCRIPTOR_H_
