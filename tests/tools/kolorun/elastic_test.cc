// The pure pieces of kolorun --elastic: who the next round's members are,
// and what a discovery script's output means.
#include "elastic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

namespace kolo {
namespace kolorun {
namespace {

using ::testing::HasSubstr;

TEST(NextRoundMembersTest, SurvivorsKeepTheirOrderAndNewcomersComeLast) {
  EXPECT_EQ(NextRoundMembers({4, 0, 2}, {0, 2, 4, 7, 5}, 8),
            (std::vector<int64_t>{4, 0, 2, 5, 7}));
  // Rank 0 died: the next survivor is rank 0 now.
  EXPECT_EQ(NextRoundMembers({4, 0, 2}, {0, 2}, 8),
            (std::vector<int64_t>{0, 2}));
}

TEST(NextRoundMembersTest, NeverMoreThanTheMaximum) {
  EXPECT_EQ(NextRoundMembers({1, 2}, {1, 2, 3, 4}, 3),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(NextRoundMembers({1}, {1}, 0).empty());
}

TEST(ParseDiscoveredHostsTest, ReadsHostsAndSlotsInBothForms) {
  StatusOr<std::vector<HostSlots>> hosts =
      ParseDiscoveredHosts("h1:2\n# gone: h9\nh2 slots=4\n\nh3\n", "s.sh");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].name, "h1");
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[1].slots, 4);
  EXPECT_EQ((*hosts)[2].slots, 1);
}

TEST(ParseDiscoveredHostsTest, NoOutputIsNoHostsAndABadLineIsNamed) {
  StatusOr<std::vector<HostSlots>> none = ParseDiscoveredHosts(" \n", "s.sh");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  StatusOr<std::vector<HostSlots>> bad =
      ParseDiscoveredHosts("h1:2\nh2:zero\n", "s.sh");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("s.sh"));
  EXPECT_THAT(bad.status().message(), HasSubstr("'s.sh':2: 'h2:zero'"));
}

TEST(RunDiscoveryScriptTest, ReturnsWhatItPrints) {
  StatusOr<std::string> out =
      RunDiscoveryScript("echo h1:2; echo h2:1", std::chrono::seconds(10));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "h1:2\nh2:1\n");
}

TEST(RunDiscoveryScriptTest, AFailingScriptIsNamedWithItsStatus) {
  StatusOr<std::string> out =
      RunDiscoveryScript("echo h1:2; exit 3", std::chrono::seconds(10));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("exit 3"));
  EXPECT_THAT(out.status().message(), HasSubstr("exited with code 3"));
}

TEST(RunDiscoveryScriptTest, AHangingScriptIsKilledAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::string> out =
      RunDiscoveryScript("sleep 30", std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(out.status().message(), HasSubstr("did not finish within"));
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
