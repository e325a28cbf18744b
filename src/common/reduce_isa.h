// The instruction sets the reduction kernels (reduce_kernels.cc) are built
// for, and which of them this CPU runs. Nothing here reads the environment:
// common/config validates KOLO_REDUCE_ISA against SupportedReduceIsas, and
// common/reduce picks the active set from it.
#ifndef KOLO_COMMON_REDUCE_ISA_H_
#define KOLO_COMMON_REDUCE_ISA_H_

#include <cstdint>
#include <vector>

#include "kolo/types.h"

namespace kolo {

// AVX-512 needs F and BW; AVX2 needs FMA.
enum class ReduceIsa { kPortable, kAvx2, kAvx512 };
const char* ReduceIsaName(ReduceIsa isa);
std::vector<ReduceIsa> SupportedReduceIsas();  // portable first

// One instruction set's kernels, for tests and benchmarks that compare
// them; the isa must be supported.
using ReduceKernel = void (*)(DataType, ReduceOp, void*, const void*,
                              const void*, int64_t);
using DivideKernel = void (*)(DataType, void*, const void*, int64_t, int64_t);
struct ReduceKernels {
  ReduceKernel reduce;
  DivideKernel divide;
};
ReduceKernels KernelsFor(ReduceIsa isa);

}  // namespace kolo

#endif  // KOLO_COMMON_REDUCE_ISA_H_
