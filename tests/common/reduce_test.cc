#include "common/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "testing/collective_matrix.h"

namespace kolo {
namespace {

using testing::Load;
using testing::StoreValue;

double Reference(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return a * b;
  }
  return 0;
}

TEST(ReduceTest, EveryTypeAndOpMatchesTheScalarReference) {
  constexpr int64_t kCount = 37;
  for (DataType type : AllDataTypes()) {
    for (ReduceOp op : AllReduceOps()) {
      std::vector<char> a(kCount * DataTypeSize(type)), b(a.size()),
          out(a.size());
      for (int64_t i = 0; i < kCount; ++i) {
        // Small values keep every result exact in every type.
        StoreValue(type, a.data(), i, static_cast<double>(i % 9));
        StoreValue(type, b.data(), i, static_cast<double>((i * 5) % 11));
      }
      ReduceInto(type, op, out.data(), a.data(), b.data(), kCount);
      for (int64_t i = 0; i < kCount; ++i) {
        EXPECT_EQ(Load(type, out.data(), i),
                  Reference(op, static_cast<double>(i % 9),
                            static_cast<double>((i * 5) % 11)))
            << DataTypeName(type) << " " << ReduceOpName(op) << " element "
            << i;
      }
      // Aliasing the output with an input is allowed.
      ReduceInto(type, op, a.data(), a.data(), b.data(), kCount);
      EXPECT_EQ(a, out) << DataTypeName(type) << " " << ReduceOpName(op);
    }
  }
}

// `bytes` with every NaN of a floating-point `type` replaced by one
// pattern. Which NaN operand an add or a multiply returns (its sign, its
// payload) is up to the instruction's operand order, which IEEE 754 leaves
// open and which clang commutes in vectorized loops; every other bit must
// match.
std::vector<char> OneNan(DataType type, std::vector<char> bytes) {
  if (!IsFloatingPoint(type)) return bytes;
  const int64_t count = static_cast<int64_t>(bytes.size()) / DataTypeSize(type);
  for (int64_t i = 0; i < count; ++i) {
    if (std::isnan(Load(type, bytes.data(), i))) {
      StoreValue(type, bytes.data(), i,
                 std::numeric_limits<double>::quiet_NaN());
    }
  }
  return bytes;
}

// Every instruction set's kernels give bit-for-bit the portable kernels'
// results, on random bit patterns of every type (so NaNs, infinities and
// wrapping integers too), at lengths around every vector width and tail,
// out of place and in place; NaNs match as NaNs (see OneNan).
TEST(ReduceTest, EveryInstructionSetMatchesThePortableKernels) {
  const std::vector<ReduceIsa> isas = SupportedReduceIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), ReduceIsa::kPortable);
  const ReduceKernels portable = KernelsFor(ReduceIsa::kPortable);
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<char>(state);
  };
  for (ReduceIsa isa : isas) {
    const ReduceKernels kernels = KernelsFor(isa);
    for (DataType type : AllDataTypes()) {
      for (int64_t count : {1, 7, 15, 16, 17, 63, 64, 65, 1000, 4099}) {
        const size_t bytes = static_cast<size_t>(count * DataTypeSize(type));
        std::vector<char> a(bytes), b(bytes);
        for (size_t i = 0; i < bytes; ++i) {
          a[i] = next();
          b[i] = next();
        }
        for (ReduceOp op : AllReduceOps()) {
          std::vector<char> want(bytes), got(bytes), in_place = a;
          portable.reduce(type, op, want.data(), a.data(), b.data(), count);
          kernels.reduce(type, op, got.data(), a.data(), b.data(), count);
          kernels.reduce(type, op, in_place.data(), in_place.data(), b.data(),
                         count);
          EXPECT_EQ(OneNan(type, got), OneNan(type, want))
              << ReduceIsaName(isa) << " " << DataTypeName(type) << " "
              << ReduceOpName(op) << " count " << count;
          EXPECT_EQ(OneNan(type, in_place), OneNan(type, want))
              << ReduceIsaName(isa) << " in place";
        }
        std::vector<char> want(bytes), got(bytes);
        portable.divide(type, want.data(), a.data(), count, 3);
        kernels.divide(type, got.data(), a.data(), count, 3);
        EXPECT_EQ(got, want)
            << ReduceIsaName(isa) << " " << DataTypeName(type) << " divide";
      }
    }
  }
}

// A power-of-two divisor multiplies by its reciprocal: the same bits as
// dividing, on every instruction set, for normal, subnormal, huge and
// special values.
TEST(ReduceTest, PowerOfTwoDivisorsGiveTheBitsOfADivision) {
  std::vector<float> floats = {1.0f,
                               3.0f,
                               -7.25f,
                               1e-38f,
                               std::numeric_limits<float>::denorm_min(),
                               3 * std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity(),
                               -0.0f};
  uint32_t state = 12345;
  for (int i = 0; i < 1000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, sizeof(f));
    if (!std::isnan(f)) floats.push_back(f);
  }
  std::vector<double> doubles(floats.begin(), floats.end());
  doubles.push_back(std::numeric_limits<double>::denorm_min());
  const int64_t floats_count = static_cast<int64_t>(floats.size());
  const int64_t doubles_count = static_cast<int64_t>(doubles.size());
  for (ReduceIsa isa : SupportedReduceIsas()) {
    const ReduceKernels kernels = KernelsFor(isa);
    for (int64_t divisor : {1, 2, 4, 8, 64, 1 << 20}) {
      std::vector<float> got_f(floats.size());
      kernels.divide(DataType::kFloat32, got_f.data(), floats.data(),
                     floats_count, divisor);
      std::vector<double> got_d(doubles.size());
      kernels.divide(DataType::kFloat64, got_d.data(), doubles.data(),
                     doubles_count, divisor);
      for (size_t i = 0; i < floats.size(); ++i) {
        const float want = floats[i] / static_cast<float>(divisor);
        EXPECT_EQ(std::memcmp(&got_f[i], &want, sizeof(want)), 0)
            << ReduceIsaName(isa) << " " << floats[i] << " / " << divisor;
      }
      for (size_t i = 0; i < doubles.size(); ++i) {
        const double want = doubles[i] / static_cast<double>(divisor);
        EXPECT_EQ(std::memcmp(&got_d[i], &want, sizeof(want)), 0)
            << ReduceIsaName(isa) << " " << doubles[i] << " / " << divisor;
      }
    }
  }
}

TEST(ReduceTest, NegativeValuesAndSignedMinMax) {
  int32_t a[3] = {-5, 7, -1};
  int32_t b[3] = {3, -9, -1};
  int32_t out[3];
  ReduceInto(DataType::kInt32, ReduceOp::kMin, out, a, b, 3);
  EXPECT_EQ(out[0], -5);
  EXPECT_EQ(out[1], -9);
  ReduceInto(DataType::kInt32, ReduceOp::kMax, out, a, b, 3);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[1], 7);
}

TEST(ReduceTest, DivideTruncatesIntegersAndDividesFloats) {
  int64_t ints[3] = {7, -7, 9};
  DivideInPlace(DataType::kInt64, ints, 3, 2);
  EXPECT_EQ(ints[0], 3);
  EXPECT_EQ(ints[1], -3);
  EXPECT_EQ(ints[2], 4);
  uint16_t halves[2] = {FloatToHalf(3.0f), FloatToHalf(1.0f)};
  DivideInPlace(DataType::kFloat16, halves, 2, 4);
  EXPECT_EQ(HalfToFloat(halves[0]), 0.75f);
  EXPECT_EQ(HalfToFloat(halves[1]), 0.25f);
}

// Float addition does not associate: 1e8 + 1 rounds back to 1e8 in
// float32, so the fold ((1e8 + 1) - 1e8) + 1 gives exactly 1, while any
// order that meets -1e8 first gives 2. Every rank must get the 1.
TEST(ReduceTest, FoldInRankOrderFoldsStrictlyFromRankZero) {
  const std::vector<float> ranks = {1e8f, 1.0f, -1e8f, 1.0f};
  constexpr int64_t kCount = 3;
  std::vector<std::vector<float>> inputs;
  for (float value : ranks) inputs.emplace_back(kCount, value);
  std::vector<float> out(kCount, -7.0f);
  FoldInRankOrder(DataType::kFloat32, ReduceOp::kSum,
                  static_cast<int32_t>(inputs.size()), out.data(), kCount,
                  [&](int32_t r) { return inputs[r].data(); });
  for (float value : out) EXPECT_EQ(value, 1.0f);

  // kAverage folds as kSum: the caller divides once.
  FoldInRankOrder(DataType::kFloat32, ReduceOp::kAverage, 2, out.data(), kCount,
                  [&](int32_t r) { return inputs[r + 2].data(); });
  for (float value : out) EXPECT_EQ(value, -1e8f);  // -1e8 + 1 rounds
}

TEST(ReduceTest, FoldInRankOrderCopiesOneRankAndSkipsNoElements) {
  const std::vector<int32_t> only = {3, 1, 4};
  std::vector<int32_t> out(3, 0);
  FoldInRankOrder(DataType::kInt32, ReduceOp::kMax, 1, out.data(), 3,
                  [&](int32_t) { return only.data(); });
  EXPECT_EQ(out, only);
  std::vector<int32_t> untouched(3, 9);
  FoldInRankOrder(DataType::kInt32, ReduceOp::kSum, 2, untouched.data(), 0,
                  [&](int32_t) { return only.data(); });
  EXPECT_EQ(untouched, std::vector<int32_t>(3, 9));
}

}  // namespace
}  // namespace kolo
