// Element-wise reduction kernels shared by every backend. float16 and
// bfloat16 are widened to float32 for the arithmetic and rounded back once
// per element, so a two-input reduction rounds exactly once.
#ifndef KOLO_COMMON_REDUCE_H_
#define KOLO_COMMON_REDUCE_H_

#include <cstdint>
#include <string>
#include <vector>

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

// The instruction sets the kernels are built for. ReduceInto and
// DivideInto use the best one this CPU supports (AVX-512 needs F and BW),
// unless KOLO_REDUCE_ISA=portable|avx2|avx512 names another it supports.
enum class ReduceIsa { kPortable, kAvx2, kAvx512 };
const char* ReduceIsaName(ReduceIsa isa);
std::vector<ReduceIsa> SupportedReduceIsas();  // portable first
ReduceIsa ActiveReduceIsa();
// Makes `name` ("portable", "avx2", "avx512"; empty: the best) the active
// set; an error names the sets this CPU supports. Init calls it.
Status SetActiveReduceIsa(const std::string& name);

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

#endif  // KOLO_COMMON_REDUCE_H_
