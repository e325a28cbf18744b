// kolo's internal interface for its own tools: the element-wise reduction
// kernels (ReduceInto, DivideInPlace, the instruction-set choice), which
// kolo-bench uses to compute expected values and time the kernels alone.
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_REDUCE_H_
#define KOLO_INTERNAL_REDUCE_H_

#include "common/reduce.h"

#endif  // KOLO_INTERNAL_REDUCE_H_
