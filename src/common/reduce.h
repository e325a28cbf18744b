// Element-wise reduction kernels shared by every backend. float16 and
// bfloat16 are widened to float32 for the arithmetic and rounded back once
// per element, so a two-input reduction rounds exactly once.
#ifndef KOLO_COMMON_REDUCE_H_
#define KOLO_COMMON_REDUCE_H_

#include <cstdint>

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

}  // namespace kolo

#endif  // KOLO_COMMON_REDUCE_H_
