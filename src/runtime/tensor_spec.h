// TensorSpec: what one rank says about one named operation when it
// announces it to the others. It travels in the negotiation, so it holds
// values only (no pointers), and it is what the ranks compare to catch a
// mismatched call before any data moves.
#ifndef KOLO_RUNTIME_TENSOR_SPEC_H_
#define KOLO_RUNTIME_TENSOR_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/collective.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

struct TensorSpec {
  std::string name;
  Collective collective = Collective::kAllreduce;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce, reducescatter
  int32_t root = -1;             // broadcast
  int64_t count = 0;             // elements this rank contributes
  // alltoall: elements to each rank. allgather: the per-rank counts the
  // caller expects (empty when it does not say).
  std::vector<int64_t> splits;
  // alltoall: elements the caller expects from each rank (may be empty).
  std::vector<int64_t> expected;
  // Grouped allreduce: the group's name and number of tensors.
  std::string group;
  int32_t group_size = 0;

  bool operator==(const TensorSpec& other) const;
  bool operator!=(const TensorSpec& other) const { return !(*this == other); }
  int64_t bytes() const { return count * DataTypeSize(type); }
};

// A spec with the fields every collective has; name and the per-rank
// vectors are left for the caller.
TensorSpec MakeSpec(Collective collective, DataType type, int64_t count,
                    ReduceOp op = ReduceOp::kSum, int32_t root = -1);

// Appends `spec` to `out` / reads one back from data[*offset...]; Parse
// returns kInternal on a malformed record instead of reading past the end.
void SerializeSpec(const TensorSpec& spec, std::string* out);
StatusOr<TensorSpec> ParseSpec(const std::string& data, size_t* offset);

// Checks that the specs every rank gave for one name agree (by_rank[r] is
// rank r's; joined ranks are absent from `ranks`). The error names the
// tensor, the field and which ranks gave which value, e.g.
//   tensor 'fc.weight': ranks disagree on the element count: ranks 0,2 have
//   10; rank 1 has 12
Status CheckSpecsAgree(const std::vector<const TensorSpec*>& by_rank,
                       int32_t world_size);

}  // namespace kolo

#endif  // KOLO_RUNTIME_TENSOR_SPEC_H_
