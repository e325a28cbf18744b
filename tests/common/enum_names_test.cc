#include "common/enum_names.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

enum class Color { kRed, kGreen, kBlue };

// Each value's own name first, then an alias; kBlue has no name.
constexpr EnumName<Color> kColorNames[] = {
    {"red", Color::kRed}, {"green", Color::kGreen}, {"crimson", Color::kRed}};

TEST(EnumNamesTest, AValueIsNamedByItsFirstEntry) {
  EXPECT_STREQ(NameOf(kColorNames, Color::kRed), "red");
  EXPECT_STREQ(NameOf(kColorNames, Color::kGreen), "green");
  EXPECT_STREQ(NameOf(kColorNames, Color::kBlue), "unknown");
  EXPECT_STREQ(NameOf(kColorNames, Color::kBlue, "none"), "none");
}

TEST(EnumNamesTest, EveryEntryNamesItsValueExactly) {
  EXPECT_EQ(ValueOf(kColorNames, "red"), Color::kRed);
  EXPECT_EQ(ValueOf(kColorNames, "crimson"), Color::kRed);
  EXPECT_EQ(ValueOf(kColorNames, "green"), Color::kGreen);
  EXPECT_EQ(ValueOf(kColorNames, "Red"), std::nullopt);
  EXPECT_EQ(ValueOf(kColorNames, "blue"), std::nullopt);
}

}  // namespace
}  // namespace kolo
