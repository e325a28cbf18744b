#include "common/reduce_isa.h"

namespace kolo {

// One set of kernels per ISA, each the same source (reduce_kernels.cc)
// compiled with that ISA's flags.
#define KOLO_DECLARE_KERNELS(isa)                                      \
  namespace reduce_kernels::isa {                                      \
  void Reduce(DataType type, ReduceOp op, void* out, const void* a,    \
              const void* b, int64_t count);                           \
  void Divide(DataType type, void* out, const void* in, int64_t count, \
              int64_t divisor);                                        \
  }
KOLO_DECLARE_KERNELS(portable)
#ifdef KOLO_HAVE_X86_KERNELS
KOLO_DECLARE_KERNELS(avx2)
KOLO_DECLARE_KERNELS(avx512)
#endif
#undef KOLO_DECLARE_KERNELS

namespace {

bool Supported(ReduceIsa isa) {
#ifdef KOLO_HAVE_X86_KERNELS
  __builtin_cpu_init();
  switch (isa) {
    case ReduceIsa::kPortable: return true;
    case ReduceIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ReduceIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw");
  }
  return false;
#else
  return isa == ReduceIsa::kPortable;
#endif
}

}  // namespace

const char* ReduceIsaName(ReduceIsa isa) {
  switch (isa) {
    case ReduceIsa::kAvx2: return "avx2";
    case ReduceIsa::kAvx512: return "avx512";
    default: return "portable";
  }
}

std::vector<ReduceIsa> SupportedReduceIsas() {
  std::vector<ReduceIsa> out;
  for (ReduceIsa isa :
       {ReduceIsa::kPortable, ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
    if (Supported(isa)) out.push_back(isa);
  }
  return out;
}

ReduceKernels KernelsFor(ReduceIsa isa) {
  switch (isa) {
#ifdef KOLO_HAVE_X86_KERNELS
    case ReduceIsa::kAvx2:
      return {reduce_kernels::avx2::Reduce, reduce_kernels::avx2::Divide};
    case ReduceIsa::kAvx512:
      return {reduce_kernels::avx512::Reduce, reduce_kernels::avx512::Divide};
#endif
    default:
      return {reduce_kernels::portable::Reduce,
              reduce_kernels::portable::Divide};
  }
}

}  // namespace kolo
