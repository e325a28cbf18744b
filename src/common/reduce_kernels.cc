// The element-wise kernels behind common/reduce.h. This file is compiled
// once per instruction set (KOLO_REDUCE_ISA: portable, avx2, avx512; see
// src/CMakeLists.txt), each copy in a namespace of that name and built with
// -O3 and that ISA's -m flags, so that GCC vectorizes the same loops for
// each; reduce.cc picks one at run time. The loops are written for the
// vectorizer: one pass, no branches per element, and a runtime aliasing
// check that GCC adds itself (out may equal an input).
#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "common/bit_cast.h"
#include "common/reduce.h"

#ifndef KOLO_REDUCE_ISA
#error "compile with -DKOLO_REDUCE_ISA=<portable|avx2|avx512>"
#endif

namespace kolo::reduce_kernels::KOLO_REDUCE_ISA {
namespace {

// Storage type and the type arithmetic happens in, per DataType.
template <typename Storage, typename Compute>
struct Plain {
  using StorageType = Storage;
  static Compute Load(Storage v) { return static_cast<Compute>(v); }
  static Storage Store(Compute v) { return static_cast<Storage>(v); }
};
// The conversions are written here, inline, rather than called from
// types.h, so that the loops vectorize; they give the same bits as
// types.h's (the kernels are tested against each other bit for bit).
#if defined(__F16C__)
struct Half {
  using StorageType = uint16_t;
  static float Load(uint16_t v) { return _cvtsh_ss(v); }
  static uint16_t Store(float v) {
    const uint16_t h =
        static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
    // types.h makes every NaN the canonical quiet one; F16C keeps payloads.
    return v != v ? static_cast<uint16_t>((h & 0x8000) | 0x7e00) : h;
  }
};
#else
struct Half {
  using StorageType = uint16_t;
  static float Load(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Store(float v) { return FloatToHalf(v); }
};
#endif
struct BFloat {
  using StorageType = uint16_t;
  static float Load(uint16_t v) {
    return BitCast<float>(static_cast<uint32_t>(v) << 16);
  }
  static uint16_t Store(float v) {
    const uint32_t bits = BitCast<uint32_t>(v);
    const uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
    const uint32_t quiet_nan = (bits >> 16) | 0x40;
    return static_cast<uint16_t>((bits & 0x7fffffff) > 0x7f800000 ? quiet_nan
                                                                  : rounded);
  }
};

// Sums and products of integers wrap around, like the C types they
// reduce. Signed overflow is undefined behaviour (int64 has no wider type
// to compute in), so the arithmetic happens in the unsigned type of the
// same width, which compiles to the same instructions.
template <typename T>
T WrappingAdd(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
  } else {
    return x + y;
  }
}
template <typename T>
T WrappingMultiply(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
  } else {
    return x * y;
  }
}

template <typename Traits, typename Combine>
void Apply(void* out, const void* a, const void* b, int64_t count,
           Combine combine) {
  using T = typename Traits::StorageType;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (int64_t i = 0; i < count; ++i) {
    o[i] = Traits::Store(combine(Traits::Load(x[i]), Traits::Load(y[i])));
  }
}

template <typename Traits>
void ReduceTyped(ReduceOp op, void* out, const void* a, const void* b,
                 int64_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      Apply<Traits>(out, a, b, count,
                    [](auto x, auto y) { return WrappingAdd(x, y); });
      return;
    case ReduceOp::kMin:
      Apply<Traits>(out, a, b, count,
                    [](auto x, auto y) { return std::min(x, y); });
      return;
    case ReduceOp::kMax:
      Apply<Traits>(out, a, b, count,
                    [](auto x, auto y) { return std::max(x, y); });
      return;
    case ReduceOp::kProduct:
      Apply<Traits>(out, a, b, count,
                    [](auto x, auto y) { return WrappingMultiply(x, y); });
      return;
  }
}

template <typename Traits>
void DivideTyped(void* out, const void* in, int64_t count, int64_t divisor) {
  using T = typename Traits::StorageType;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(in);
  using Compute = decltype(Traits::Load(x[0]));
  if constexpr (std::is_floating_point_v<Compute>) {
    // x / 2^k and x * 2^-k are the same exact value, each rounded once, so
    // the same bits, and a multiply is several times cheaper than a divide
    // (an average over 2, 4 or 8 ranks divides by a power of two).
    if (divisor > 0 && (divisor & (divisor - 1)) == 0) {
      const Compute scale = Compute{1} / static_cast<Compute>(divisor);
      for (int64_t i = 0; i < count; ++i) {
        o[i] = Traits::Store(Traits::Load(x[i]) * scale);
      }
      return;
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    auto value = Traits::Load(x[i]);
    o[i] = Traits::Store(value / static_cast<decltype(value)>(divisor));
  }
}

// Calls fn.template operator()<Traits>() for the traits of `type`.
template <typename Fn>
void DispatchType(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32: return fn(Plain<float, float>{});
    case DataType::kFloat64: return fn(Plain<double, double>{});
    case DataType::kFloat16: return fn(Half{});
    case DataType::kBFloat16: return fn(BFloat{});
    // Narrow integers compute in int32 so the combine does not promote
    // oddly; the store wraps like the C type would.
    case DataType::kInt8: return fn(Plain<int8_t, int32_t>{});
    case DataType::kUInt8: return fn(Plain<uint8_t, uint32_t>{});
    case DataType::kInt32: return fn(Plain<int32_t, int64_t>{});
    case DataType::kInt64: return fn(Plain<int64_t, int64_t>{});
  }
}

}  // namespace

void Reduce(DataType type, ReduceOp op, void* out, const void* a, const void* b,
            int64_t count) {
  DispatchType(type, [&](auto traits) {
    ReduceTyped<decltype(traits)>(op, out, a, b, count);
  });
}

void Divide(DataType type, void* out, const void* in, int64_t count,
            int64_t divisor) {
  DispatchType(type, [&](auto traits) {
    DivideTyped<decltype(traits)>(out, in, count, divisor);
  });
}

}  // namespace kolo::reduce_kernels::KOLO_REDUCE_ISA
