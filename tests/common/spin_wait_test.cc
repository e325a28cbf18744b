// AdaptiveSpin (src/common/spin_wait.h): a spin that answers at once when
// the condition holds, gives up within its window otherwise, and after a
// wait that ran long does not spin at all until a wait ends quickly again.
#include "common/spin_wait.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kolo {
namespace {

using Clock = AdaptiveSpin::Clock;

TEST(AdaptiveSpinTest, AConditionAlreadyTrueEndsTheSpinAtOnce) {
  AdaptiveSpin spin;
  int polls = 0;
  for (SpinStyle style :
       {SpinStyle::kPause, SpinStyle::kYield, SpinStyle::kYieldEveryWait}) {
    polls = 0;
    EXPECT_TRUE(spin.Spin([&] { return ++polls > 0; }, style, Clock::now()));
    EXPECT_EQ(polls, 1);
  }
}

TEST(AdaptiveSpinTest, TheConditionIsSeenWhenItTurnsTrueWithinTheWindow) {
  AdaptiveSpin spin;
  int polls = 0;
  EXPECT_TRUE(spin.Spin([&] { return ++polls == 10; }, SpinStyle::kPause,
                        Clock::now()));
  EXPECT_EQ(polls, 10);
}

TEST(AdaptiveSpinTest, ASpinGivesUpSoonAfterItsWindow) {
  AdaptiveSpin spin;
  for (SpinStyle style : {SpinStyle::kPause, SpinStyle::kYield}) {
    const auto start = Clock::now();
    EXPECT_FALSE(spin.Spin([] { return false; }, style, start));
    const auto spun = Clock::now() - start;
    EXPECT_GE(spun, AdaptiveSpin::kSpinWindow);
    EXPECT_LT(spun,
              std::chrono::milliseconds(500));  // generous for a loaded machine
  }
}

TEST(AdaptiveSpinTest, AfterALongWaitTheNextDoesNotSpinUnlessEveryWaitMust) {
  AdaptiveSpin spin;
  spin.Finished(Clock::now() -
                std::chrono::milliseconds(10));  // the last wait ran long
  int polls = 0;
  EXPECT_FALSE(
      spin.Spin([&] { return ++polls > 0; }, SpinStyle::kPause, Clock::now()));
  EXPECT_EQ(polls, 0);
  // kYieldEveryWait spins regardless.
  EXPECT_TRUE(spin.Spin([&] { return ++polls > 0; }, SpinStyle::kYieldEveryWait,
                        Clock::now()));
  EXPECT_EQ(polls, 1);
  // A quick wait turns spinning back on; FinishOnExit records it too.
  { AdaptiveSpin::FinishOnExit finish{&spin, Clock::now()}; }
  EXPECT_TRUE(
      spin.Spin([&] { return ++polls > 0; }, SpinStyle::kPause, Clock::now()));
  EXPECT_EQ(polls, 2);
}

TEST(AdaptiveSpinTest, RanksOutnumberCoresOnlyBeyondTheCoreCount) {
  EXPECT_FALSE(RanksOutnumberCores(1));
  EXPECT_TRUE(RanksOutnumberCores(100000));
}

}  // namespace
}  // namespace kolo
