#include "kolo/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace kolo {
namespace {

TEST(TypesTest, NamesParseBack) {
  for (DataType type : AllDataTypes()) {
    StatusOr<DataType> parsed = ParseDataType(DataTypeName(type));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, type);
  }
  for (ReduceOp op : AllReduceOps()) {
    StatusOr<ReduceOp> parsed = ParseReduceOp(ReduceOpName(op));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(ParseDataType("float128").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(ParseReduceOp("xor").status().message().find("'xor'"),
            std::string::npos);
}

TEST(TypesTest, SizesMatchCTypes) {
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4);
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8);
  EXPECT_EQ(DataTypeSize(DataType::kFloat16), 2);
  EXPECT_EQ(DataTypeSize(DataType::kBFloat16), 2);
  EXPECT_EQ(DataTypeSize(DataType::kInt8), 1);
  EXPECT_EQ(DataTypeSize(DataType::kUInt8), 1);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8);
}

TEST(TypesTest, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << "half bits " << bits;
  }
}

TEST(TypesTest, HalfRoundsToNearestEven) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 1.0f / 2048)), 1.0f);  // tie -> even
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.0f))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(5.96046448e-8f)),
            5.96046448e-8f);  // smallest subnormal
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(TypesTest, BFloat16RoundTripsAndRounds) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = BFloat16ToFloat(b);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBFloat16(f), b);
  }
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + 1.0f / 256)),
            1.0f);  // tie -> even
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(257.0f)), 256.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(259.0f)), 260.0f);
}

}  // namespace
}  // namespace kolo
