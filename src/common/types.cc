#include "kolo/types.h"

#include <string>

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

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
  }
  return "unknown";
}

StatusOr<DataType> ParseDataType(const std::string& name) {
  for (DataType type : AllDataTypes()) {
    if (name == DataTypeName(type)) return type;
  }
  if (name == "float" || name == "fp32") return DataType::kFloat32;
  if (name == "double" || name == "fp64") return DataType::kFloat64;
  if (name == "half" || name == "fp16") return DataType::kFloat16;
  if (name == "bf16") return DataType::kBFloat16;
  return InvalidArgument("unknown data type '" + name +
                         "' (expected float32, float64, float16, bfloat16, "
                         "int8, uint8, int32 or int64)");
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

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "avg";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "prod";
  }
  return "unknown";
}

StatusOr<ReduceOp> ParseReduceOp(const std::string& name) {
  for (ReduceOp op : AllReduceOps()) {
    if (name == ReduceOpName(op)) return op;
  }
  if (name == "average") return ReduceOp::kAverage;
  if (name == "product") return ReduceOp::kProduct;
  return InvalidArgument("unknown reduce op '" + name +
                         "' (expected sum, avg, min, max or prod)");
}

namespace {

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) {  // inf or nan
    return BitsToFloat(sign | 0x7f800000 | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal half: a normal float once the mantissa is shifted up.
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ff;
    const uint32_t float_exponent = 127 - 15 + 1 - shift;
    return BitsToFloat(sign | (float_exponent << 23) | (mantissa << 13));
  }
  return BitsToFloat(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatBits(value);
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
  return BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet nan
  }
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

const char* BackendName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kShm: return "shm";
    case BackendKind::kTcp: return "tcp";
    default: return "gloo";
  }
}

StatusOr<BackendKind> ParseBackend(const std::string& name) {
  if (name == "gloo") {
#ifdef KOLO_WITH_GLOO
    return BackendKind::kGloo;
#else
    return InvalidArgument(
        "backend 'gloo' was not built (configure with -DKOLO_WITH_GLOO=ON)");
#endif
  }
  if (name == "shm") return BackendKind::kShm;
  if (name == "tcp") return BackendKind::kTcp;
  if (name == "mpi") {
#ifdef KOLO_WITH_MPI
    return BackendKind::kMpi;
#else
    return InvalidArgument(
        "backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
#endif
  }
  return InvalidArgument("unknown backend '" + name +
                         "' (expected gloo, mpi, shm or tcp)");
}

}  // namespace kolo
