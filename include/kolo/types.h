// Element types and reduction operators of kolo's collectives.
#ifndef KOLO_TYPES_H_
#define KOLO_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

enum class DataType : int32_t {
  kFloat32 = 0,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
};

// Every data type, in declaration order; handy for tests and benchmarks.
const std::vector<DataType>& AllDataTypes();
int64_t DataTypeSize(DataType type);
// "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32",
// "int64"
const char* DataTypeName(DataType type);
StatusOr<DataType> ParseDataType(const std::string& name);
bool IsFloatingPoint(DataType type);

// kAverage sums and then divides by the number of contributing ranks; for
// integer types the division truncates toward zero.
enum class ReduceOp : int32_t {
  kSum = 0,
  kAverage,
  kMin,
  kMax,
  kProduct,
};

const std::vector<ReduceOp>& AllReduceOps();
// "sum", "avg", "min", "max", "prod" (the names nccl-tests prints)
const char* ReduceOpName(ReduceOp op);
StatusOr<ReduceOp> ParseReduceOp(const std::string& name);

// IEEE binary16 and bfloat16 conversions (round to nearest even).
float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);

}  // namespace kolo

#endif  // KOLO_TYPES_H_
