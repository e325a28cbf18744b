#include "common/hex.h"

#include <gtest/gtest.h>

#include <array>

namespace kolo {
namespace {

TEST(HexTest, EveryByteValueGoesThereAndBack) {
  std::array<unsigned char, 256> bytes;
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<unsigned char>(i);
  const std::string text = HexEncode(bytes.data(), bytes.size());
  ASSERT_EQ(text.size(), 512u);
  EXPECT_EQ(text.substr(0, 8), "00010203");
  EXPECT_EQ(text.substr(504), "fcfdfeff");
  std::array<unsigned char, 256> back{};
  ASSERT_TRUE(HexDecode(text, back.data(), back.size()));
  EXPECT_EQ(back, bytes);
}

TEST(HexTest, OnlyExactLowerCaseTextDecodes) {
  unsigned char out[2];
  EXPECT_TRUE(HexDecode("a0ff", out, 2));
  EXPECT_EQ(out[0], 0xa0);
  EXPECT_EQ(out[1], 0xff);
  EXPECT_FALSE(HexDecode("A0FF", out, 2));  // upper case
  EXPECT_FALSE(HexDecode("a0f", out, 2));   // too short
  EXPECT_FALSE(HexDecode("a0ff00", out, 2));
  EXPECT_FALSE(HexDecode("a0fg", out, 2));
  EXPECT_EQ(HexEncode(out, 0), "");
}

}  // namespace
}  // namespace kolo
