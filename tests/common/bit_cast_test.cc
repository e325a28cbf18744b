#include "common/bit_cast.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace kolo {
namespace {

TEST(BitCastTest, ReadsTheIeeeBitsBothWays) {
  EXPECT_EQ(BitCast<uint32_t>(1.0f), 0x3f800000u);
  EXPECT_EQ(BitCast<uint32_t>(-2.0f), 0xc0000000u);
  EXPECT_EQ(BitCast<float>(0x40490fdbu), 3.14159274f);
  EXPECT_EQ(BitCast<uint64_t>(1.0), 0x3ff0000000000000ull);
  EXPECT_EQ(BitCast<double>(BitCast<uint64_t>(0.1)), 0.1);
}

}  // namespace
}  // namespace kolo
