// kolo-bench elastic's reading of a faulty run: the kill's time from the
// killed worker's line, and recovery, steps lost and rates from rank 0's
// step times.
#include "elastic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kolo::bench {
namespace {

using nlohmann::json;
using ::testing::DoubleNear;

TEST(FindKillTimeTest, ReadsTheKilledWorkersLine) {
  StatusOr<double> t = FindKillTime(
      "[w0]<stdout>: x\n[w1]<stdout>: kolo-train: fault injection: rank 1 "
      "kills itself at step 15 (t=3265.887213)\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(*t, 3265.887213);
  EXPECT_EQ(FindKillTime("no such line").status().code(),
            StatusCode::kNotFound);
}

TEST(MeasureRecoveryTest, FromTheKillToTheFirstStepAfterIt) {
  // Steps every 0.1 s; rank 1 kills itself at 1.52 s, once it completed
  // step 15, which rank 0 completes a moment later; the last commit was at
  // step 10, so steps 11.. are done again from 2.0 s on, every 0.2 s.
  json times = json::array();
  for (int step = 1; step <= 14; ++step)
    times.push_back({step, step * 0.1, 4, 0});
  times.push_back({15, 1.53, 4, 0});
  for (int step = 11; step <= 20; ++step)
    times.push_back({step, 2.0 + (step - 11) * 0.2, 3, 1});
  StatusOr<RecoveryMeasurement> m =
      MeasureRecovery(times, 1.52, /*kill_step=*/15, /*global_batch=*/64);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_THAT(m->recovery_seconds, DoubleNear(0.48, 1e-9));
  EXPECT_EQ(m->steps_lost, 5);
  EXPECT_THAT(m->images_per_second_before, DoubleNear(640, 1e-6));
  EXPECT_THAT(m->images_per_second_after, DoubleNear(320, 1e-6));
}

TEST(MeasureRecoveryTest, NoStepAfterTheKillIsAnError) {
  json times = json::array({{1, 0.1, 2, 0}, {2, 0.2, 2, 0}});
  StatusOr<RecoveryMeasurement> m = MeasureRecovery(times, 0.5, 2, 64);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureRecovery(json::array({{1, "x", 2, 0}}), 0.5, 2, 64)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kolo::bench
