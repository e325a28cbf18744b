#include "kolo/types.h"

#include <string>

#include "common/bit_cast.h"
#include "common/enum_names.h"
#include "kolo/options.h"

#include <cstring>

namespace kolo {

const std::vector<DataType>& AllDataTypes() {
  static const std::vector<DataType> kAll = {
      DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
      DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
      DataType::kInt32,    DataType::kInt64};
  return kAll;
}

int64_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
  }
  return 0;
}

namespace {

constexpr EnumName<DataType> kDataTypeNames[] = {
    {"float32", DataType::kFloat32}, {"float64", DataType::kFloat64},
    {"float16", DataType::kFloat16}, {"bfloat16", DataType::kBFloat16},
    {"int8", DataType::kInt8},       {"uint8", DataType::kUInt8},
    {"int32", DataType::kInt32},     {"int64", DataType::kInt64},
    {"float", DataType::kFloat32},   {"fp32", DataType::kFloat32},
    {"double", DataType::kFloat64},  {"fp64", DataType::kFloat64},
    {"half", DataType::kFloat16},    {"fp16", DataType::kFloat16},
    {"bf16", DataType::kBFloat16}};

constexpr EnumName<ReduceOp> kReduceOpNames[] = {
    {"sum", ReduceOp::kSum},        {"avg", ReduceOp::kAverage},
    {"min", ReduceOp::kMin},        {"max", ReduceOp::kMax},
    {"prod", ReduceOp::kProduct},   {"average", ReduceOp::kAverage},
    {"product", ReduceOp::kProduct}};

// The value `name` names in `names`; kInvalidArgument naming `what` and the
// names `expected` otherwise.
template <typename T, size_t N>
StatusOr<T> ParseNamed(const EnumName<T> (&names)[N], const std::string& name,
                       const char* what, const char* expected) {
  if (std::optional<T> value = ValueOf(names, name)) return *value;
  return InvalidArgument("unknown " + std::string(what) + " '" + name +
                         "' (expected " + expected + ")");
}

}  // namespace

const char* DataTypeName(DataType type) { return NameOf(kDataTypeNames, type); }

StatusOr<DataType> ParseDataType(const std::string& name) {
  return ParseNamed(
      kDataTypeNames, name, "data type",
      "float32, float64, float16, bfloat16, int8, uint8, int32 or "
      "int64");
}

bool IsFloatingPoint(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kFloat16 || type == DataType::kBFloat16;
}

const std::vector<ReduceOp>& AllReduceOps() {
  static const std::vector<ReduceOp> kAll = {ReduceOp::kSum, ReduceOp::kAverage,
                                             ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kProduct};
  return kAll;
}

const char* ReduceOpName(ReduceOp op) { return NameOf(kReduceOpNames, op); }

StatusOr<ReduceOp> ParseReduceOp(const std::string& name) {
  return ParseNamed(kReduceOpNames, name, "reduce op",
                    "sum, avg, min, max or prod");
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) {  // inf or nan
    return BitCast<float>(sign | 0x7f800000 | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return BitCast<float>(sign);
    // Subnormal half: a normal float once the mantissa is shifted up.
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ff;
    const uint32_t float_exponent = 127 - 15 + 1 - shift;
    return BitCast<float>(sign | (float_exponent << 23) | (mantissa << 13));
  }
  return BitCast<float>(sign | ((exponent + 127 - 15) << 23) |
                        (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = BitCast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or nan; keep nan quiet
    return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);
  }
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504: inf
  if (abs < 0x38800000) {
    // Below the smallest normal half: round to a subnormal (or zero).
    if (abs < 0x33000000) return sign;
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  // Normal: rebias the exponent and round the mantissa to nearest even.
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t remainder = abs & 0x1fff;
  if (remainder > 0x1000 || (remainder == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t bits) {
  return BitCast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = BitCast<uint32_t>(value);
  if ((bits & 0x7fffffff) > 0x7f800000) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet nan
  }
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

namespace {

constexpr EnumName<BackendKind> kBackendNames[] = {{"gloo", BackendKind::kGloo},
                                                   {"mpi", BackendKind::kMpi},
                                                   {"shm", BackendKind::kShm},
                                                   {"tcp", BackendKind::kTcp}};

// The backends a build may leave out: each with the CMake option that
// builds it, and whether this build did.
struct OptionalBackend {
  BackendKind kind;
  const char* option;
  bool built;
};
constexpr OptionalBackend kOptionalBackends[] = {
#ifdef KOLO_WITH_GLOO
    {BackendKind::kGloo, "KOLO_WITH_GLOO", true},
#else
    {BackendKind::kGloo, "KOLO_WITH_GLOO", false},
#endif
#ifdef KOLO_WITH_MPI
    {BackendKind::kMpi, "KOLO_WITH_MPI", true},
#else
    {BackendKind::kMpi, "KOLO_WITH_MPI", false},
#endif
};

}  // namespace

const char* BackendName(BackendKind kind) {
  return NameOf(kBackendNames, kind);
}

StatusOr<BackendKind> ParseBackend(const std::string& name) {
  KOLO_ASSIGN_OR_RETURN(
      BackendKind kind,
      ParseNamed(kBackendNames, name, "backend", "gloo, mpi, shm or tcp"));
  for (const OptionalBackend& b : kOptionalBackends) {
    if (b.kind == kind && !b.built) {
      return InvalidArgument("backend '" + name +
                             "' was not built (configure with -D" + b.option +
                             "=ON)");
    }
  }
  return kind;
}

}  // namespace kolo
