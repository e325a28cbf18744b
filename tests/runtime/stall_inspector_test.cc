// Tests the stall inspector on values alone: the operations waiting, with
// the ranks they wait for and for how long, at explicit clock values.
#include "runtime/stall_inspector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace kolo {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

SteadyTime At(int s) { return SteadyTime() + seconds(s); }

WaitingOperation Waiting(const std::string& name, std::vector<int32_t> missing,
                         int waited_s) {
  return WaitingOperation{name, std::move(missing), seconds(waited_s)};
}

std::string Warning(const std::string& tail) {
  return "stall: " + tail +
         " (the other ranks announced it; a rank that never does hangs the "
         "job)";
}

TEST(StallInspectorTest, WarnsAfterTheWarningTimeNamingTheMissingRanks) {
  StallInspector inspector(seconds(5), seconds(0));
  EXPECT_THAT(
      inspector.Inspect({Waiting("x", {1, 3}, 6), Waiting("y", {2}, 5)}, At(6)),
      ElementsAre(Warning("tensor 'x' has waited 6 s for ranks 1,3"),
                  Warning("tensor 'y' has waited 5 s for rank 2")));
}

TEST(StallInspectorTest, NoWarningBeforeTheWarningTime) {
  StallInspector inspector(seconds(5), seconds(10));
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 4)}, At(4)), IsEmpty());
  EXPECT_FALSE(inspector.stalled());
}

TEST(StallInspectorTest, RepeatsAWarningOnlyAfterAnotherWarningTime) {
  StallInspector inspector(seconds(5), seconds(0));
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 6)}, At(6)),
              ElementsAre(Warning("tensor 'x' has waited 6 s for rank 1")));
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 7)}, At(7)), IsEmpty());
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 10)}, At(10)), IsEmpty());
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 11)}, At(11)),
              ElementsAre(Warning("tensor 'x' has waited 11 s for rank 1")));
}

TEST(StallInspectorTest, ForgetsAnOperationThatStoppedWaiting) {
  StallInspector inspector(seconds(5), seconds(0));
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 6)}, At(6)),
              testing::SizeIs(1));
  EXPECT_THAT(inspector.Inspect({}, At(7)), IsEmpty());
  // The same name waiting again is a new stall, warned about at once.
  EXPECT_THAT(inspector.Inspect({Waiting("x", {2}, 5)}, At(8)),
              ElementsAre(Warning("tensor 'x' has waited 5 s for rank 2")));
}

TEST(StallInspectorTest, LooksEverySecondOrTwicePerWarningTime) {
  StallInspector slow(seconds(60), seconds(0));
  (void)slow.Inspect({}, At(10));
  EXPECT_FALSE(slow.Due(At(10) + milliseconds(999)));
  EXPECT_TRUE(slow.Due(At(11)));

  StallInspector fast(seconds(1), seconds(0));
  (void)fast.Inspect({}, At(10));
  EXPECT_FALSE(fast.Due(At(10) + milliseconds(499)));
  EXPECT_TRUE(fast.Due(At(10) + milliseconds(500)));
}

TEST(StallInspectorTest, CallsForShutdownAfterTheShutdownTime) {
  StallInspector inspector(seconds(1), seconds(3));
  (void)inspector.Inspect({Waiting("x", {1}, 2)}, At(2));
  EXPECT_FALSE(inspector.stalled());
  (void)inspector.Inspect({Waiting("x", {1}, 3)}, At(3));
  ASSERT_TRUE(inspector.stalled());
  // The verdict stays the one first reached, whatever waits later.
  const Status error = inspector.ShutdownError({Waiting("z", {0}, 50)});
  EXPECT_EQ(error.code(), StatusCode::kAborted);
  EXPECT_EQ(
      error.message(),
      "stall: tensor 'x' has waited 3 s for rank 1 (KOLO_STALL_SHUTDOWN_S=3)");
}

TEST(StallInspectorTest, NeverCallsForShutdownWhenTheShutdownTimeIsZero) {
  StallInspector inspector(seconds(1), seconds(0));
  EXPECT_THAT(inspector.Inspect({Waiting("x", {1}, 100000)}, At(100000)),
              testing::SizeIs(1));
  EXPECT_FALSE(inspector.stalled());
}

TEST(StallInspectorTest, AnotherRanksVerdictNamesWhatWaitedLongestHere) {
  StallInspector inspector(seconds(1), seconds(3));
  // This rank's clock is behind: "b" waited 2 s here, 3 s on the rank
  // that called for shutdown, so the error says at least the shutdown time.
  EXPECT_EQ(
      inspector.ShutdownError({Waiting("a", {2}, 1), Waiting("b", {1}, 2)})
          .message(),
      "stall: tensor 'b' has waited 3 s for rank 1 (KOLO_STALL_SHUTDOWN_S=3)");
  EXPECT_EQ(
      inspector.ShutdownError({Waiting("b", {1}, 7)}).message(),
      "stall: tensor 'b' has waited 7 s for rank 1 (KOLO_STALL_SHUTDOWN_S=3)");
  EXPECT_EQ(inspector.ShutdownError({}).message(),
            "stall: another rank saw an operation wait past the shutdown time "
            "(KOLO_STALL_SHUTDOWN_S=3)");
}

TEST(StallInspectorTest, ReadsWhatTheCoordinatorSeesWaiting) {
  // Rank 0 announced "x" at 0 s; ranks 1 and 2 never did.
  ResponseCache cache(8);
  Coordinator coordinator(3, &cache);
  std::vector<CycleReport> reports(3);
  reports[0].specs.push_back(
      MakeSpec(Collective::kAllreduce, DataType::kFloat32, 4));
  reports[0].specs[0].name = "x";
  (void)coordinator.Decide(reports, At(0));
  StallInspector inspector(seconds(2), seconds(4));
  EXPECT_THAT(inspector.Inspect(
                  coordinator.Waiting(At(1), inspector.warning_time()), At(1)),
              IsEmpty());
  EXPECT_THAT(inspector.Inspect(
                  coordinator.Waiting(At(4), inspector.warning_time()), At(4)),
              ElementsAre(Warning("tensor 'x' has waited 4 s for ranks 1,2")));
  EXPECT_TRUE(inspector.stalled());
}

}  // namespace
}  // namespace kolo
