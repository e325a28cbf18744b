// Element-wise reduction kernels shared by every backend. float16 and
// bfloat16 are widened to float32 for the arithmetic and rounded back once
// per element, so a two-input reduction rounds exactly once.
#ifndef KOLO_COMMON_REDUCE_H_
#define KOLO_COMMON_REDUCE_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "common/reduce_isa.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

// out[i] = a[i] op b[i] for i < count; out may alias a or b. kAverage
// combines as kSum (the division happens once, see DivideInPlace).
void ReduceInto(DataType type, ReduceOp op, void* out, const void* a,
                const void* b, int64_t count);

// data[i] /= divisor; integer types truncate toward zero.
void DivideInPlace(DataType type, void* data, int64_t count, int64_t divisor);
// out[i] = in[i] / divisor, in one pass (out may equal in).
void DivideInto(DataType type, void* out, const void* in, int64_t count,
                int64_t divisor);

// The instruction set ReduceInto and DivideInto use: the best one this CPU
// supports (common/reduce_isa.h), unless KOLO_REDUCE_ISA names another it
// supports.
ReduceIsa ActiveReduceIsa();
// Makes `name` ("portable", "avx2", "avx512"; empty: the best) the active
// set; an error names the sets this CPU supports. Init calls it.
Status SetActiveReduceIsa(const std::string& name);

// out = input(0) op input(1) op ... op input(ranks - 1), `count` elements,
// folded strictly in rank order. Floating-point addition does not
// associate, so every rank that reduces the same elements must fold them
// in the same order to round alike: the shm engine and the runtime's
// direct path both fold through here, and their results are bit-identical.
// kAverage folds as kSum (the caller divides once). `input(r)` returns rank
// r's elements; with more than one rank, out may alias input(0) or
// input(1), never a later rank's.
template <typename Input>
void FoldInRankOrder(DataType type, ReduceOp op, int32_t ranks, void* out,
                     int64_t count, Input input) {
  if (count <= 0) return;
  if (ranks == 1) {
    std::memcpy(out, input(0), static_cast<size_t>(count) * DataTypeSize(type));
    return;
  }
  ReduceInto(type, op, out, input(0), input(1), count);
  for (int32_t r = 2; r < ranks; ++r) {
    ReduceInto(type, op, out, out, input(r), count);
  }
}

}  // namespace kolo

#endif  // KOLO_COMMON_REDUCE_H_
