#include "common/reduce.h"

#include <algorithm>

namespace kolo {
namespace {

// Storage type and the type arithmetic happens in, per DataType.
template <typename Storage, typename Compute>
struct Plain {
  using StorageType = Storage;
  static Compute Load(Storage v) { return static_cast<Compute>(v); }
  static Storage Store(Compute v) { return static_cast<Storage>(v); }
};
struct Half {
  using StorageType = uint16_t;
  static float Load(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Store(float v) { return FloatToHalf(v); }
};
struct BFloat {
  using StorageType = uint16_t;
  static float Load(uint16_t v) { return BFloat16ToFloat(v); }
  static uint16_t Store(float v) { return FloatToBFloat16(v); }
};

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
      Apply<Traits>(out, a, b, count, [](auto x, auto y) { return x + y; });
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
      Apply<Traits>(out, a, b, count, [](auto x, auto y) { return x * y; });
      return;
  }
}

template <typename Traits>
void DivideTyped(void* out, const void* in, int64_t count, int64_t divisor) {
  using T = typename Traits::StorageType;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(in);
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

void ReduceInto(DataType type, ReduceOp op, void* out, const void* a,
                const void* b, int64_t count) {
  DispatchType(type, [&](auto traits) {
    ReduceTyped<decltype(traits)>(op, out, a, b, count);
  });
}

void DivideInPlace(DataType type, void* data, int64_t count, int64_t divisor) {
  DivideInto(type, data, data, count, divisor);
}

void DivideInto(DataType type, void* out, const void* in, int64_t count,
                int64_t divisor) {
  DispatchType(type, [&](auto traits) {
    DivideTyped<decltype(traits)>(out, in, count, divisor);
  });
}

}  // namespace kolo
