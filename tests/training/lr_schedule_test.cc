#include "kolo/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

namespace kolo {
namespace {

LinearScalingSchedule Scaling(double base, double scaled, int64_t warmup,
                              int64_t total,
                              LinearScalingSchedule::AfterWarmup after) {
  LinearScalingSchedule schedule;
  schedule.base_lr = base;
  schedule.scaled_lr = scaled;
  schedule.warmup_iterations = warmup;
  schedule.total_iterations = total;
  schedule.after_warmup = after;
  return schedule;
}

TEST(LinearScalingScheduleTest, ClimbsLinearlyFromBaseToScaledOverWarmup) {
  // base 0.1, scaled 0.4, 10 warm-up iterations: 0.1 + 0.03 i.
  for (auto schedule : {LinearScalingSchedule::AfterWarmup::kHold,
                        LinearScalingSchedule::AfterWarmup::kCosine}) {
    const LinearScalingSchedule plan = Scaling(0.1, 0.4, 10, 1000, schedule);
    for (int64_t i = 0; i < 10; ++i) {
      EXPECT_DOUBLE_EQ(LearningRate(plan, i), 0.1 + 0.03 * i) << i;
    }
    EXPECT_DOUBLE_EQ(LearningRate(plan, 10), 0.4);
  }
}

TEST(LinearScalingScheduleTest, HoldStaysAtTheScaledRate) {
  const LinearScalingSchedule plan =
      Scaling(0.1, 0.4, 10, 100, LinearScalingSchedule::AfterWarmup::kHold);
  EXPECT_DOUBLE_EQ(LearningRate(plan, 50), 0.4);
  EXPECT_DOUBLE_EQ(LearningRate(plan, 1000), 0.4);
  EXPECT_DOUBLE_EQ(
      LearningRate(
          Scaling(0.1, 0.4, 0, 100, LinearScalingSchedule::AfterWarmup::kHold),
          0),
      0.4);
}

TEST(LinearScalingScheduleTest, CosineFallsFromTheScaledRateToZeroAtTheEnd) {
  const LinearScalingSchedule plan =
      Scaling(0.1, 0.4, 10, 110, LinearScalingSchedule::AfterWarmup::kCosine);
  EXPECT_DOUBLE_EQ(LearningRate(plan, 10), 0.4);
  EXPECT_NEAR(LearningRate(plan, 35), 0.4 * (1 + std::sqrt(0.5)) / 2, 1e-12);
  EXPECT_NEAR(LearningRate(plan, 60), 0.2, 1e-12);
  EXPECT_NEAR(LearningRate(plan, 110), 0.0, 1e-12);
  double previous = 1;
  for (int64_t i = 10; i <= 110; ++i) {
    const double lr = LearningRate(plan, i);
    EXPECT_LE(lr, previous) << i;
    previous = lr;
  }
  // Without a warm-up the decay starts at iteration 0.
  EXPECT_DOUBLE_EQ(
      LearningRate(Scaling(0.1, 0.4, 0, 100,
                           LinearScalingSchedule::AfterWarmup::kCosine),
                   0),
      0.4);
}

// Schedules. Each expected value is worked out by hand from DeepSpeed's
// formula with kolo's step k = DeepSpeed's last_batch_iteration + 1.
constexpr double kTol = 1e-12;

TEST(LearningRateTest, NoScheduleIsTheOptimizersLr) {
  LrScheduleConfig none;
  EXPECT_EQ(LearningRateAt(none, 0.25, 0), 0.25);
  EXPECT_EQ(LearningRateAt(none, 0.25, 123456), 0.25);
  EXPECT_EQ(MomentumAt(none, 0), std::nullopt);
}

TEST(LearningRateTest, WarmupLRLogarithmic) {
  LrScheduleConfig s;
  s.type = LrScheduleType::kWarmupLR;
  s.warmup_min_lr = 0.01;
  s.warmup_max_lr = 0.11;
  s.warmup_num_steps = 100;
  // Steps 0 and 1 both run at the minimum (DeepSpeed's -1 and log(1) = 0);
  // step 10 is log(10) / log(100) = 1/2 of the way; step 100 arrives.
  EXPECT_EQ(LearningRateAt(s, 9, 0), 0.01);
  EXPECT_EQ(LearningRateAt(s, 9, 1), 0.01);
  EXPECT_NEAR(LearningRateAt(s, 9, 10), 0.06, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 100), 0.11, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 101), 0.11, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 1000000), 0.11, kTol);
  EXPECT_EQ(MomentumAt(s, 10), std::nullopt);
}

TEST(LearningRateTest, WarmupLRLinear) {
  LrScheduleConfig s;
  s.type = LrScheduleType::kWarmupLR;
  s.warmup_min_lr = 0;
  s.warmup_max_lr = 1;
  s.warmup_num_steps = 100;
  s.warmup_type = "linear";
  EXPECT_EQ(LearningRateAt(s, 9, 0), 0);
  EXPECT_EQ(LearningRateAt(s, 9, 1), 0);
  EXPECT_NEAR(LearningRateAt(s, 9, 51), 0.5, kTol);    // 50 / 100
  EXPECT_NEAR(LearningRateAt(s, 9, 100), 0.99, kTol);  // 99 / 100
  EXPECT_EQ(LearningRateAt(s, 9, 101), 1);
}

TEST(LearningRateTest, WarmupLRShorterThanTwoStepsIsTwo) {
  LrScheduleConfig s;
  s.type = LrScheduleType::kWarmupLR;
  s.warmup_min_lr = 0;
  s.warmup_max_lr = 1;
  s.warmup_num_steps = 1;  // DeepSpeed raises it to 2
  EXPECT_EQ(LearningRateAt(s, 9, 1), 0);
  EXPECT_NEAR(LearningRateAt(s, 9, 2), 1, kTol);  // log(2) / log(2)
  EXPECT_EQ(LearningRateAt(s, 9, 3), 1);
}

TEST(LearningRateTest, WarmupLRToTheOptimizersLr) {
  LrScheduleConfig s;
  s.type = LrScheduleType::kWarmupLR;
  s.warmup_max_lr_from_optimizer = true;
  s.warmup_num_steps = 100;
  EXPECT_NEAR(LearningRateAt(s, 0.5, 10), 0.25, kTol);
  EXPECT_EQ(LearningRateAt(s, 0.5, 200), 0.5);
}

TEST(LearningRateTest, WarmupDecayLR) {
  LrScheduleConfig s;
  s.type = LrScheduleType::kWarmupDecayLR;
  s.warmup_min_lr = 0.2;
  s.warmup_max_lr = 1.2;  // a span of 1
  s.warmup_num_steps = 10;
  s.warmup_type = "linear";
  s.total_num_steps = 110;  // 100 steps of decay
  EXPECT_EQ(LearningRateAt(s, 9, 0), 0.2);
  EXPECT_EQ(LearningRateAt(s, 9, 1), 0.2);
  EXPECT_NEAR(LearningRateAt(s, 9, 6), 0.7, kTol);     // 5 / 10
  EXPECT_NEAR(LearningRateAt(s, 9, 10), 1.1, kTol);    // 9 / 10
  EXPECT_NEAR(LearningRateAt(s, 9, 11), 1.2, kTol);    // (110 - 10) / 100
  EXPECT_NEAR(LearningRateAt(s, 9, 61), 0.7, kTol);    // (110 - 60) / 100
  EXPECT_NEAR(LearningRateAt(s, 9, 110), 0.21, kTol);  // (110 - 109) / 100
  EXPECT_NEAR(LearningRateAt(s, 9, 111), 0.2, kTol);   // 0: the end
  EXPECT_NEAR(LearningRateAt(s, 9, 500), 0.2, kTol);   // clamped at 0
}

TEST(LearningRateTest, WarmupCosineLR) {
  LrScheduleConfig s;
  s.type = LrScheduleType::kWarmupCosineLR;
  s.warmup_min_ratio = 0.5;
  s.warmup_num_steps = 10;
  s.warmup_type = "linear";
  s.total_num_steps = 14;  // 4 steps of cosine: quarters of pi
  s.cos_min_ratio = 0.1;
  const double lr = 2.0;
  // Before DeepSpeed's scheduler starts the ratio is 0.
  EXPECT_EQ(LearningRateAt(s, lr, 0), 0);
  EXPECT_NEAR(LearningRateAt(s, lr, 1), 1.0, kTol);   // ratio 0.5
  EXPECT_NEAR(LearningRateAt(s, lr, 6), 1.5, kTol);   // 0.5 + 0.5 x 5/10
  EXPECT_NEAR(LearningRateAt(s, lr, 10), 1.9, kTol);  // 0.5 + 0.5 x 9/10
  // Step 11: p = 1/4, (1 + cos(pi/4)) / 2 = (1 + sqrt(2)/2) / 2.
  EXPECT_NEAR(LearningRateAt(s, lr, 11),
              lr * (0.1 + 0.9 * (1 + std::sqrt(2.0) / 2) / 2), kTol);
  EXPECT_NEAR(LearningRateAt(s, lr, 12), 1.1, kTol);  // p = 1/2: 0.1 + 0.45
  EXPECT_NEAR(LearningRateAt(s, lr, 14), 0.2, kTol);  // p = 1: 0.1
  EXPECT_NEAR(LearningRateAt(s, lr, 15), 0.2, kTol);  // held at the floor
  EXPECT_NEAR(LearningRateAt(s, lr, 100000), 0.2, kTol);

  s.warmup_type = "log";
  s.warmup_num_steps = 100;
  s.warmup_min_ratio = 0;
  EXPECT_NEAR(LearningRateAt(s, lr, 10), 1.0, kTol);  // log 10 / log 100
}

LrScheduleConfig OneCycle() {
  LrScheduleConfig s;
  s.type = LrScheduleType::kOneCycle;
  s.cycle_min_lr = 0.1;
  s.cycle_max_lr = 1.1;  // a span of 1
  s.cycle_first_step_size = 4;
  s.cycle_second_step_size = 0;  // 4 as well: the cycle is 8 steps
  s.decay_step_size = 2;
  s.decay_lr_rate = 0.5;
  s.cycle_min_mom = 0.8;
  s.cycle_max_mom = 0.9;
  s.decay_mom_rate = 0.05;
  return s;
}

TEST(LearningRateTest, OneCycleRisesFallsAndDecays) {
  const LrScheduleConfig s = OneCycle();
  EXPECT_NEAR(LearningRateAt(s, 9, 0), 0.1, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 1), 0.35, kTol);  // 1/4 up
  EXPECT_NEAR(LearningRateAt(s, 9, 2), 0.6, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 4), 1.1, kTol);  // the peak
  EXPECT_NEAR(LearningRateAt(s, 9, 6), 0.6, kTol);  // 2/4 down
  EXPECT_NEAR(LearningRateAt(s, 9, 8), 0.1, kTol);  // the cycle's end
  // Decay: 0.1 / (1 + 0.5 x (k - 8) / 2).
  EXPECT_NEAR(LearningRateAt(s, 9, 9), 0.08, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 10), 0.1 / 1.5, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 12), 0.05, kTol);

  // Momentum moves the other way: 0.9 - 0.1 x position, then
  // 0.9 x (1 + 0.05 x (k - 8) / 2).
  EXPECT_NEAR(*MomentumAt(s, 0), 0.9, kTol);
  EXPECT_NEAR(*MomentumAt(s, 1), 0.875, kTol);
  EXPECT_NEAR(*MomentumAt(s, 4), 0.8, kTol);
  EXPECT_NEAR(*MomentumAt(s, 6), 0.85, kTol);
  EXPECT_NEAR(*MomentumAt(s, 8), 0.9, kTol);
  EXPECT_NEAR(*MomentumAt(s, 10), 0.945, kTol);
  EXPECT_NEAR(*MomentumAt(s, 12), 0.99, kTol);
}

TEST(LearningRateTest, OneCycleWithoutDecayHoldsTheEnds) {
  LrScheduleConfig s = OneCycle();
  s.decay_step_size = 0;
  EXPECT_EQ(LearningRateAt(s, 9, 9), 0.1);
  EXPECT_EQ(LearningRateAt(s, 9, 1000), 0.1);
  EXPECT_EQ(*MomentumAt(s, 1000), 0.9);
  s = OneCycle();
  s.decay_lr_rate = 0;
  s.decay_mom_rate = 0;
  EXPECT_EQ(LearningRateAt(s, 9, 1000), 0.1);
  EXPECT_EQ(*MomentumAt(s, 1000), 0.9);
  s.cycle_momentum = false;
  EXPECT_EQ(MomentumAt(s, 3), std::nullopt);
}

TEST(LearningRateTest, OneCycleAsymmetricHalves) {
  LrScheduleConfig s = OneCycle();
  s.cycle_first_step_size = 2;
  s.cycle_second_step_size = 6;                     // still 8 steps
  EXPECT_NEAR(LearningRateAt(s, 9, 1), 0.6, kTol);  // 1/2 up
  EXPECT_NEAR(LearningRateAt(s, 9, 2), 1.1, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 5), 0.6, kTol);  // 3/6 down
  EXPECT_NEAR(LearningRateAt(s, 9, 8), 0.1, kTol);
}

TEST(LearningRateTest, OneCycleStairs) {
  LrScheduleConfig s = OneCycle();
  s.cycle_first_stair_count = 2;  // the second half takes 2 as well
  // Up in two stairs of 2 steps, down the same way.
  EXPECT_NEAR(LearningRateAt(s, 9, 1), 0.1, kTol);  // floor(1 x 2 / 4) = 0
  EXPECT_NEAR(LearningRateAt(s, 9, 2), 0.6, kTol);  // 1 stair of 2
  EXPECT_NEAR(LearningRateAt(s, 9, 3), 0.6, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 4), 1.1, kTol);
  EXPECT_NEAR(LearningRateAt(s, 9, 5), 0.6, kTol);  // 3 from the end
  EXPECT_NEAR(LearningRateAt(s, 9, 7), 0.1, kTol);  // 1 from the end
  EXPECT_NEAR(*MomentumAt(s, 3), 0.85, kTol);

  s.cycle_second_stair_count = 4;  // every step on the way down
  EXPECT_NEAR(LearningRateAt(s, 9, 5), 0.85, kTol);  // 3/4
  EXPECT_NEAR(LearningRateAt(s, 9, 7), 0.35, kTol);  // 1/4
}

}  // namespace
}  // namespace kolo
