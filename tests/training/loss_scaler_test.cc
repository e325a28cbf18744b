#include "kolo/loss_scaler.h"

#include <gtest/gtest.h>

#include <vector>

namespace kolo {
namespace {

using Verdict = LossScaler::Verdict;

LossScaleConfig DeepSpeedRule(int32_t power, int64_t window,
                              int32_t hysteresis) {
  LossScaleConfig config;
  config.initial_scale_power = power;
  config.loss_scale_window = window;
  config.hysteresis = hysteresis;
  config.min_loss_scale = 1;
  return config;
}

LossScaleConfig TorchRule(int32_t power, int64_t window) {
  LossScaleConfig config = DeepSpeedRule(power, window, 2);
  config.rule = LossScaleRule::kTorchGradScaler;
  return config;
}

// Feeds `overflows` one Update() each and records the scale after each.
struct Trace {
  std::vector<double> scales;
  std::vector<Verdict> verdicts;
};
Trace Feed(LossScaler* scaler, const std::vector<bool>& overflows) {
  Trace run;
  for (bool overflow : overflows) {
    run.verdicts.push_back(scaler->Update(overflow));
    run.scales.push_back(scaler->scale());
  }
  return run;
}

constexpr bool kO = true;   // an overflowed step
constexpr bool kC = false;  // a clean step

TEST(LossScalerTest, StartsAtTwoToTheInitialPower) {
  LossScaler scaler(LossScaleConfig{});
  EXPECT_EQ(scaler.scale(), 65536.0);  // 2^16, DeepSpeed's default
  EXPECT_TRUE(scaler.dynamic());
  EXPECT_EQ(scaler.state().iteration, 0);
  EXPECT_EQ(scaler.state().last_overflow_iteration, -1);
  EXPECT_EQ(scaler.state().hysteresis_left, 2);
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

TEST(LossScalerTest, DeepSpeedDoublesOnTheWindowthCleanStep) {
  // 2^4, window 3, no hysteresis: doubles at iterations 2 and 6 (three
  // clean steps since the start, then since the overflow at iteration 3).
  LossScaler scaler(DeepSpeedRule(4, 3, 1));
  Trace run = Feed(&scaler, {kC, kC, kC, kO, kC, kC, kC});
  EXPECT_EQ(run.scales, (std::vector<double>{16, 16, 32, 16, 16, 16, 32}));
  EXPECT_EQ(run.verdicts, (std::vector<Verdict>{
                              Verdict::kApply, Verdict::kApply, Verdict::kApply,
                              Verdict::kSkip, Verdict::kApply, Verdict::kApply,
                              Verdict::kApply}));
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.state().iteration, 7);
  EXPECT_EQ(scaler.state().last_overflow_iteration, 3);
}

TEST(LossScalerTest, DeepSpeedHysteresisDelaysTheHalving) {
  // 2^3, window 4, hysteresis 2. Iteration 0 uses up the hysteresis, 1
  // halves; 2..5 are four clean steps, so 5 doubles and refills the
  // hysteresis; 6 uses it up again, 7 (clean) does not refill it without
  // consecutive_hysteresis, and 8 halves.
  LossScaler scaler(DeepSpeedRule(3, 4, 2));
  std::vector<double> scales;
  std::vector<int32_t> hysteresis;
  for (bool overflow : {kO, kO, kC, kC, kC, kC, kO, kC, kO}) {
    scaler.Update(overflow);
    scales.push_back(scaler.scale());
    hysteresis.push_back(scaler.state().hysteresis_left);
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 4, 4, 4, 4, 8, 8, 8, 4}));
  EXPECT_EQ(hysteresis, (std::vector<int32_t>{1, 1, 1, 1, 1, 2, 1, 1, 1}));
  EXPECT_EQ(scaler.skipped_steps(), 4);
  EXPECT_EQ(scaler.state().last_overflow_iteration, 8);
}

TEST(LossScalerTest, DeepSpeedOverflowThatOnlyUsesHysteresisRestartsWindow) {
  // Window 2: the clean iterations 0 and 1 double once (at 1); the
  // overflow at 2 costs no scale but moves the window, so the next doubling
  // is at 4, not 3.
  LossScaler scaler(DeepSpeedRule(3, 2, 2));
  Trace run = Feed(&scaler, {kC, kC, kO, kC, kC});
  EXPECT_EQ(run.scales, (std::vector<double>{8, 16, 16, 16, 32}));
  EXPECT_EQ(run.verdicts[2], Verdict::kSkip);
}

TEST(LossScalerTest, DeepSpeedConsecutiveHysteresisRefillsOnEveryCleanStep) {
  LossScaleConfig config = DeepSpeedRule(3, 100, 2);
  config.consecutive_hysteresis = true;
  LossScaler scaler(config);
  // The clean step at 1 refills the hysteresis that 0 used, so 2 only uses
  // it again and 3 halves.
  Trace run = Feed(&scaler, {kO, kC, kO, kO});
  EXPECT_EQ(run.scales, (std::vector<double>{8, 8, 8, 4}));

  // Without it, 2 finds no hysteresis left and halves; 3 halves again.
  LossScaler plain(DeepSpeedRule(3, 100, 2));
  EXPECT_EQ(Feed(&plain, {kO, kC, kO, kO}).scales,
            (std::vector<double>{8, 8, 4, 2}));
}

TEST(LossScalerTest, DeepSpeedStopsAtTheMinimumAndSaysSo) {
  LossScaler scaler(DeepSpeedRule(1, 100, 1));  // 2, floor 1
  Trace run = Feed(&scaler, {kO, kO, kO});
  EXPECT_EQ(run.scales, (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(run.verdicts,
            (std::vector<Verdict>{Verdict::kSkip, Verdict::kSkipAtMinimum,
                                  Verdict::kSkipAtMinimum}));
  EXPECT_EQ(scaler.skipped_steps(), 3);
}

TEST(LossScalerTest, DeepSpeedHalvingIsClampedToTheMinimum) {
  LossScaleConfig config = DeepSpeedRule(1, 100, 1);  // 2
  config.min_loss_scale = 1.5;
  LossScaler scaler(config);
  Trace run = Feed(&scaler, {kO, kO});
  EXPECT_EQ(run.scales, (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ(run.verdicts,
            (std::vector<Verdict>{Verdict::kSkip, Verdict::kSkipAtMinimum}));
}

TEST(LossScalerTest, DeepSpeedAtTheMinimumHysteresisStillAbsorbsAnOverflow) {
  LossScaler scaler(DeepSpeedRule(0, 100, 2));  // starts at the floor, 1
  Trace run = Feed(&scaler, {kO, kO});
  EXPECT_EQ(run.verdicts,
            (std::vector<Verdict>{Verdict::kSkip, Verdict::kSkipAtMinimum}));
  EXPECT_EQ(run.scales, (std::vector<double>{1, 1}));
}

TEST(LossScalerTest, TorchRuleHalvesEveryOverflowAndCountsCleanSteps) {
  // 2^4, window 3, and hysteresis 2 that this rule ignores.
  LossScaler scaler(TorchRule(4, 3));
  Trace run = Feed(&scaler, {kC, kC, kC, kO, kC, kC, kO, kC, kC, kC});
  EXPECT_EQ(run.scales,
            (std::vector<double>{16, 16, 32, 16, 16, 16, 8, 8, 8, 16}));
  EXPECT_EQ(run.verdicts[3], Verdict::kSkip);
  EXPECT_EQ(run.verdicts[6], Verdict::kSkip);
  EXPECT_EQ(run.verdicts[9], Verdict::kApply);
  EXPECT_EQ(scaler.skipped_steps(), 2);
  EXPECT_EQ(scaler.state().clean_steps, 0);  // reset by the doubling
  EXPECT_EQ(scaler.state().iteration, 10);
}

TEST(LossScalerTest, TorchRuleStopsAtTheMinimum) {
  LossScaler scaler(TorchRule(1, 2));  // 2, floor 1
  Trace run = Feed(&scaler, {kO, kO, kC, kC});
  EXPECT_EQ(run.scales, (std::vector<double>{1, 1, 1, 2}));
  EXPECT_EQ(run.verdicts,
            (std::vector<Verdict>{Verdict::kSkip, Verdict::kSkipAtMinimum,
                                  Verdict::kApply, Verdict::kApply}));
}

TEST(LossScalerTest, StaticScaleNeverMovesButStillSkips) {
  LossScaleConfig config = DeepSpeedRule(4, 2, 1);
  config.loss_scale = 128;
  LossScaler scaler(config);
  EXPECT_FALSE(scaler.dynamic());
  Trace run = Feed(&scaler, {kC, kC, kC, kO, kO, kC, kC});
  EXPECT_EQ(run.scales,
            (std::vector<double>{128, 128, 128, 128, 128, 128, 128}));
  EXPECT_EQ(run.verdicts[3], Verdict::kSkip);
  EXPECT_EQ(run.verdicts[4], Verdict::kSkip);
  EXPECT_EQ(run.verdicts[5], Verdict::kApply);
  EXPECT_EQ(scaler.skipped_steps(), 2);
  EXPECT_EQ(scaler.state().iteration, 7);
}

TEST(LossScalerTest, RestoreContinuesAsIfTheRunHadNotStopped) {
  // Window 4, hysteresis 2: the checkpoint was taken at iteration 10, three
  // clean steps after an overflow at 7 that halved the scale.
  LossScaler scaler(DeepSpeedRule(16, 4, 2));
  LossScaler::State saved;
  saved.scale = 64;
  saved.iteration = 10;
  saved.last_overflow_iteration = 7;
  saved.hysteresis_left = 1;
  saved.skipped_steps = 5;
  scaler.Restore(saved);
  EXPECT_EQ(scaler.scale(), 64);
  // Iteration 10 is the third clean step, 11 the fourth: it doubles and
  // refills the hysteresis.
  Trace run = Feed(&scaler, {kC, kC});
  EXPECT_EQ(run.scales, (std::vector<double>{64, 128}));
  EXPECT_EQ(scaler.state().hysteresis_left, 2);
  EXPECT_EQ(scaler.state().iteration, 12);
  EXPECT_EQ(scaler.skipped_steps(), 5);

  // A fresh scaler restored from this one's state moves in step with it.
  LossScaler copy(DeepSpeedRule(16, 4, 2));
  copy.Restore(scaler.state());
  Trace a = Feed(&scaler, {kO, kO, kC});
  Trace b = Feed(&copy, {kO, kO, kC});
  EXPECT_EQ(a.scales, (std::vector<double>{128, 64, 64}));
  EXPECT_EQ(b.scales, a.scales);
  EXPECT_EQ(copy.skipped_steps(), 7);
}

TEST(LossScalerTest, RestoreKeepsTheTorchRulesCleanStepCount) {
  LossScaler scaler(TorchRule(4, 3));
  LossScaler::State saved;
  saved.scale = 16;
  saved.iteration = 40;
  saved.clean_steps = 2;
  scaler.Restore(saved);
  EXPECT_EQ(Feed(&scaler, {kC}).scales, (std::vector<double>{32}));
}

}  // namespace
}  // namespace kolo
