#include "kolo/training_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace kolo {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

StatusOr<TrainingConfig> Parse(const std::string& json) {
  return ParseTrainingConfig(json, "ds.json");
}

// The message of the error `json` must give.
std::string ErrorOf(const std::string& json) {
  StatusOr<TrainingConfig> config = Parse(json);
  if (config.ok()) return "(parsed without error)";
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), StartsWith("ds.json: "));
  return config.status().message();
}

// The configuration in training_config.h's opening comment.
constexpr char kStudyConfig[] = R"({
  "train_batch_size": 256,
  "gradient_accumulation_steps": 2,
  "optimizer": {"type": "Adam",
                "params": {"lr": 1e-3, "betas": [0.9, 0.999],
                           "eps": 1e-8, "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupLR",
                "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3,
                           "warmup_num_steps": 100}},
  "gradient_clipping": 1.0,
  "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000,
           "hysteresis": 2, "min_loss_scale": 1,
           "initial_scale_power": 16},
  "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8,
                        "overlap_comm": true}
})";

TEST(TrainingConfigTest, StudyConfigurationEndToEnd) {
  StatusOr<TrainingConfig> c = Parse(kStudyConfig);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->train_batch_size, 256);
  EXPECT_EQ(c->train_micro_batch_size_per_gpu, 0);
  EXPECT_EQ(c->gradient_accumulation_steps, 2);
  ASSERT_TRUE(c->optimizer.has_value());
  EXPECT_EQ(c->optimizer->type, OptimizerType::kAdam);
  EXPECT_EQ(c->optimizer->lr, 1e-3);
  EXPECT_EQ(c->optimizer->beta1, 0.9);
  EXPECT_EQ(c->optimizer->beta2, 0.999);
  EXPECT_EQ(c->optimizer->eps, 1e-8);
  EXPECT_EQ(c->optimizer->weight_decay, 0.01);
  EXPECT_EQ(c->scheduler.type, LrScheduleType::kWarmupLR);
  EXPECT_EQ(c->scheduler.warmup_min_lr, 0);
  EXPECT_EQ(c->scheduler.warmup_max_lr, 1e-3);
  EXPECT_FALSE(c->scheduler.warmup_max_lr_from_optimizer);
  EXPECT_EQ(c->scheduler.warmup_num_steps, 100);
  EXPECT_EQ(c->scheduler.warmup_type, "log");
  EXPECT_EQ(c->gradient_clipping, 1.0);
  EXPECT_EQ(c->precision, Precision::kFloat16);
  EXPECT_EQ(c->fp16.loss_scale, 0);
  EXPECT_EQ(c->fp16.loss_scale_window, 1000);
  EXPECT_EQ(c->fp16.hysteresis, 2);
  EXPECT_EQ(c->fp16.min_loss_scale, 1);
  EXPECT_EQ(c->fp16.initial_scale_power, 16);
  EXPECT_EQ(c->zero_optimization.stage, 2);
  EXPECT_EQ(c->zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_TRUE(c->zero_optimization.overlap_comm);

  // 256 = micro x 2 x 4 workers: micro 32.
  TrainingConfig config = *c;
  ASSERT_TRUE(ResolveBatchSizes(&config, 4).ok());
  EXPECT_EQ(config.train_micro_batch_size_per_gpu, 32);
  // The first step runs at warmup_min_lr; step 10 is half way in log scale.
  EXPECT_EQ(LearningRateAt(config.scheduler, 1e-3, 0), 0);
  EXPECT_NEAR(LearningRateAt(config.scheduler, 1e-3, 10), 0.5e-3, 1e-15);
  EXPECT_NEAR(LearningRateAt(config.scheduler, 1e-3, 100), 1e-3, 1e-15);
}

TEST(TrainingConfigTest, EmptyObjectGivesTheDefaults) {
  StatusOr<TrainingConfig> c = Parse("{}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train_batch_size, 0);
  EXPECT_EQ(c->train_micro_batch_size_per_gpu, 0);
  EXPECT_EQ(c->gradient_accumulation_steps, 0);
  EXPECT_FALSE(c->optimizer.has_value());
  EXPECT_EQ(c->scheduler.type, LrScheduleType::kNone);
  EXPECT_EQ(c->gradient_clipping, 0);
  EXPECT_EQ(c->precision, Precision::kFloat32);
  EXPECT_EQ(c->fp16.loss_scale, 0);
  EXPECT_EQ(c->fp16.initial_scale_power, 16);
  EXPECT_EQ(c->fp16.loss_scale_window, 1000);
  EXPECT_EQ(c->fp16.hysteresis, 2);
  EXPECT_FALSE(c->fp16.consecutive_hysteresis);
  EXPECT_EQ(c->fp16.min_loss_scale, 1);
  EXPECT_EQ(c->fp16.rule, LossScaleRule::kDeepSpeed);
  EXPECT_EQ(c->zero_optimization.stage, 0);
  EXPECT_EQ(c->zero_optimization.reduce_bucket_size, 262144);      // 2^18
  EXPECT_EQ(c->zero_optimization.allgather_bucket_size, 1048576);  // 2^20
  EXPECT_TRUE(c->zero_optimization.overlap_comm);
  EXPECT_TRUE(c->zero_optimization.contiguous_gradients);
  EXPECT_EQ(c->steps_per_print, 10);
  EXPECT_EQ(c->seed, 0u);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(TrainingConfigTest, SectionDefaultsWhenOnlyTheTypeIsGiven) {
  StatusOr<TrainingConfig> c = Parse(R"({"optimizer": {"type": "AdamW"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->optimizer->type, OptimizerType::kAdamW);
  EXPECT_EQ(c->optimizer->lr, 1e-3);
  EXPECT_EQ(c->optimizer->beta1, 0.9);
  EXPECT_EQ(c->optimizer->beta2, 0.999);
  EXPECT_EQ(c->optimizer->eps, 1e-8);
  EXPECT_EQ(c->optimizer->weight_decay, 0);
  EXPECT_FALSE(c->optimizer->amsgrad);

  c = Parse(R"({"scheduler": {"type": "OneCycle",
                "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler.cycle_first_step_size, 2000);
  EXPECT_EQ(c->scheduler.cycle_second_step_size, 0);
  EXPECT_EQ(c->scheduler.cycle_first_stair_count, 0);
  EXPECT_EQ(c->scheduler.decay_step_size, 0);
  EXPECT_TRUE(c->scheduler.cycle_momentum);
  EXPECT_EQ(c->scheduler.cycle_min_mom, 0.8);
  EXPECT_EQ(c->scheduler.cycle_max_mom, 0.9);
  EXPECT_EQ(c->scheduler.decay_mom_rate, 0);

  c = Parse(R"({"fp16": {"enabled": true}, "bf16": {"enabled": false}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->precision, Precision::kFloat16);
}

TEST(TrainingConfigTest, ReadsEveryKey) {
  StatusOr<TrainingConfig> c = Parse(R"({
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 4,
    "optimizer": {"type": "sgd",
                  "params": {"lr": 0.5, "momentum": 0.9, "dampening": 0,
                             "nesterov": true, "weight_decay": 1e-4}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_min_lr": 0.01, "warmup_max_lr": 0.2,
                             "warmup_num_steps": 50, "warmup_type": "linear",
                             "total_num_steps": 1000}},
    "gradient_clipping": 0.5,
    "fp16": {"enabled": false, "loss_scale": 128, "initial_scale_power": 12,
             "loss_scale_window": 500, "hysteresis": 3,
             "consecutive_hysteresis": true, "min_loss_scale": 0.25,
             "loss_scaler": "torch"},
    "bf16": {"enabled": true},
    "zero_optimization": {"stage": 1, "reduce_bucket_size": 1000,
                          "allgather_bucket_size": 2000,
                          "overlap_comm": false,
                          "contiguous_gradients": false},
    "steps_per_print": 25,
    "seed": 18446744073709551615
  })");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->train_batch_size, 64);
  EXPECT_EQ(c->train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c->gradient_accumulation_steps, 4);
  EXPECT_EQ(c->optimizer->type, OptimizerType::kSgd);
  EXPECT_EQ(c->optimizer->lr, 0.5);
  EXPECT_EQ(c->optimizer->momentum, 0.9);
  EXPECT_EQ(c->optimizer->dampening, 0);
  EXPECT_TRUE(c->optimizer->nesterov);
  EXPECT_EQ(c->optimizer->weight_decay, 1e-4);
  EXPECT_EQ(c->scheduler.type, LrScheduleType::kWarmupDecayLR);
  EXPECT_EQ(c->scheduler.warmup_min_lr, 0.01);
  EXPECT_EQ(c->scheduler.warmup_max_lr, 0.2);
  EXPECT_EQ(c->scheduler.warmup_num_steps, 50);
  EXPECT_EQ(c->scheduler.warmup_type, "linear");
  EXPECT_EQ(c->scheduler.total_num_steps, 1000);
  EXPECT_EQ(c->gradient_clipping, 0.5);
  EXPECT_EQ(c->precision, Precision::kBFloat16);
  EXPECT_EQ(c->fp16.loss_scale, 128);
  EXPECT_EQ(c->fp16.initial_scale_power, 12);
  EXPECT_EQ(c->fp16.loss_scale_window, 500);
  EXPECT_EQ(c->fp16.hysteresis, 3);
  EXPECT_TRUE(c->fp16.consecutive_hysteresis);
  EXPECT_EQ(c->fp16.min_loss_scale, 0.25);
  EXPECT_EQ(c->fp16.rule, LossScaleRule::kTorchGradScaler);
  EXPECT_EQ(c->zero_optimization.stage, 1);
  EXPECT_EQ(c->zero_optimization.reduce_bucket_size, 1000);
  EXPECT_EQ(c->zero_optimization.allgather_bucket_size, 2000);
  EXPECT_FALSE(c->zero_optimization.overlap_comm);
  EXPECT_FALSE(c->zero_optimization.contiguous_gradients);
  EXPECT_EQ(c->steps_per_print, 25);
  EXPECT_EQ(c->seed, 18446744073709551615u);
}

TEST(TrainingConfigTest, ReadsAdamParameters) {
  StatusOr<TrainingConfig> c = Parse(R"({"optimizer": {"type": "ADAM",
      "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6,
                 "weight_decay": 0.1, "amsgrad": true}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->optimizer->type, OptimizerType::kAdam);
  EXPECT_EQ(c->optimizer->lr, 3e-4);
  EXPECT_EQ(c->optimizer->beta1, 0.8);
  EXPECT_EQ(c->optimizer->beta2, 0.95);
  EXPECT_EQ(c->optimizer->eps, 1e-6);
  EXPECT_EQ(c->optimizer->weight_decay, 0.1);
  EXPECT_TRUE(c->optimizer->amsgrad);
  EXPECT_EQ(Parse(R"({"optimizer": {"type": "adamw"}})")->optimizer->type,
            OptimizerType::kAdamW);
  EXPECT_EQ(Parse(R"({"optimizer": {"type": "SGD"}})")->optimizer->type,
            OptimizerType::kSgd);
}

TEST(TrainingConfigTest, ReadsWarmupCosineAndOneCycleParameters) {
  StatusOr<TrainingConfig> c = Parse(R"({"scheduler": {
      "type": "WarmupCosineLR",
      "params": {"total_num_steps": 900, "warmup_min_ratio": 0.1,
                 "warmup_num_steps": 30, "cos_min_ratio": 0.01,
                 "warmup_type": "linear"}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler.type, LrScheduleType::kWarmupCosineLR);
  EXPECT_EQ(c->scheduler.total_num_steps, 900);
  EXPECT_EQ(c->scheduler.warmup_min_ratio, 0.1);
  EXPECT_EQ(c->scheduler.warmup_num_steps, 30);
  EXPECT_EQ(c->scheduler.cos_min_ratio, 0.01);
  EXPECT_EQ(c->scheduler.warmup_type, "linear");

  c = Parse(R"({"scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 0.01, "cycle_max_lr": 0.1, "decay_lr_rate": 0.5,
      "cycle_first_step_size": 100, "cycle_second_step_size": 300,
      "cycle_first_stair_count": 4, "cycle_second_stair_count": 6,
      "decay_step_size": 20, "cycle_momentum": false,
      "cycle_min_mom": 0.85, "cycle_max_mom": 0.95,
      "decay_mom_rate": 0.1}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const LrScheduleConfig& s = c->scheduler;
  EXPECT_EQ(s.type, LrScheduleType::kOneCycle);
  EXPECT_EQ(s.cycle_min_lr, 0.01);
  EXPECT_EQ(s.cycle_max_lr, 0.1);
  EXPECT_EQ(s.decay_lr_rate, 0.5);
  EXPECT_EQ(s.cycle_first_step_size, 100);
  EXPECT_EQ(s.cycle_second_step_size, 300);
  EXPECT_EQ(s.cycle_first_stair_count, 4);
  EXPECT_EQ(s.cycle_second_stair_count, 6);
  EXPECT_EQ(s.decay_step_size, 20);
  EXPECT_FALSE(s.cycle_momentum);
  EXPECT_EQ(s.cycle_min_mom, 0.85);
  EXPECT_EQ(s.cycle_max_mom, 0.95);
  EXPECT_EQ(s.decay_mom_rate, 0.1);
}

TEST(TrainingConfigTest, WarmupLRWithoutMaxWarmsUpToTheOptimizersLr) {
  StatusOr<TrainingConfig> c = Parse(R"({
      "optimizer": {"type": "Adam", "params": {"lr": 0.02}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->scheduler.warmup_max_lr_from_optimizer);
  EXPECT_EQ(c->scheduler.warmup_max_lr, 0.02);

  // Without an optimizer section the program's optimizer lr is used.
  c = Parse(R"({"scheduler": {"type": "WarmupLR"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->scheduler.warmup_max_lr_from_optimizer);
  EXPECT_EQ(c->scheduler.warmup_num_steps, 1000);
  EXPECT_EQ(LearningRateAt(c->scheduler, 0.5, 5000), 0.5);

  // WarmupDecayLR keeps its own default, as in DeepSpeed.
  c = Parse(R"({"optimizer": {"type": "Adam", "params": {"lr": 0.02}},
      "scheduler": {"type": "WarmupDecayLR",
                    "params": {"total_num_steps": 10}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->scheduler.warmup_max_lr_from_optimizer);
  EXPECT_EQ(c->scheduler.warmup_max_lr, 1e-3);
}

TEST(TrainingConfigTest, IntegersMayBeWrittenAsIntegralFloats) {
  StatusOr<TrainingConfig> c = Parse(R"({"train_batch_size": 1.024e3,
      "zero_optimization": {"reduce_bucket_size": 5e8,
                            "allgather_bucket_size": 2.5e8},
      "seed": 4.2e1})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train_batch_size, 1024);
  EXPECT_EQ(c->zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_EQ(c->zero_optimization.allgather_bucket_size, 250000000);
  EXPECT_EQ(c->seed, 42u);

  std::string error = ErrorOf(R"({"train_batch_size": 2.5})");
  EXPECT_THAT(error, HasSubstr("'train_batch_size'"));
  EXPECT_THAT(error, HasSubstr("must be an integer >= 1, got 2.5"));
  EXPECT_THAT(ErrorOf(R"({"zero_optimization": {"reduce_bucket_size": 1e30}})"),
              HasSubstr("'zero_optimization.reduce_bucket_size'"));
  EXPECT_THAT(ErrorOf(R"({"seed": -1})"), HasSubstr("'seed'"));
  EXPECT_THAT(ErrorOf(R"({"seed": 0.5})"), HasSubstr("'seed'"));
}

TEST(TrainingConfigTest, AutoIsAnErrorThatNamesTheKey) {
  EXPECT_EQ(ErrorOf(R"({"optimizer": {"type": "Adam",
                        "params": {"lr": "auto"}}})"),
            "ds.json: 'optimizer.params.lr' is \"auto\"; kolo needs a value "
            "(DeepSpeed's \"auto\" is filled in by the HuggingFace "
            "integration)");
  EXPECT_THAT(ErrorOf(R"({"train_batch_size": "auto"})"),
              HasSubstr("'train_batch_size' is \"auto\""));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "AdamW",
                          "params": {"betas": "auto"}}})"),
              HasSubstr("'optimizer.params.betas' is \"auto\""));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "AdamW",
                          "params": {"betas": ["auto", 0.999]}}})"),
              HasSubstr("'optimizer.params.betas' is \"auto\""));
  EXPECT_THAT(ErrorOf(R"({"fp16": {"enabled": "auto"}})"),
              HasSubstr("'fp16.enabled' is \"auto\""));
  EXPECT_THAT(ErrorOf(R"({"zero_optimization": {"stage": 2,
                          "reduce_bucket_size": "auto"}})"),
              HasSubstr("'zero_optimization.reduce_bucket_size' is \"auto\""));

  // A key kolo does not read is only warned about, "auto" or not.
  StatusOr<TrainingConfig> c = Parse(R"({"zero_optimization":
      {"stage3_prefetch_bucket_size": "auto"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_THAT(c->warnings,
              ElementsAre("ds.json: 'zero_optimization."
                          "stage3_prefetch_bucket_size' is not used by kolo; "
                          "ignored"));
}

TEST(TrainingConfigTest, UnknownKeysAreWarnedWithTheirPaths) {
  StatusOr<TrainingConfig> c = Parse(R"({
    "train_batch_size": 8,
    "wall_clock_breakdown": false,
    "optimizer": {"type": "Adam", "legacy_fusion": false,
                  "params": {"lr": 1e-3, "torch_adam": true}},
    "scheduler": {"type": "WarmupLR",
                  "params": {"warmup_max_lr": 1e-3,
                             "last_batch_iteration": -1}},
    "fp16": {"enabled": true, "auto_cast": false},
    "zero_optimization": {"stage": 2,
                          "offload_optimizer": {"device": "cpu"}}
  })");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Sections in the order they are read, keys in each in name order.
  EXPECT_THAT(
      c->warnings,
      ElementsAre(
          "ds.json: 'wall_clock_breakdown' is not used by kolo; ignored",
          "ds.json: 'optimizer.legacy_fusion' is not used by kolo; ignored",
          "ds.json: 'optimizer.params.torch_adam' is not used by kolo; "
          "ignored",
          "ds.json: 'scheduler.params.last_batch_iteration' is not used by "
          "kolo; ignored",
          "ds.json: 'fp16.auto_cast' is not used by kolo; ignored",
          "ds.json: 'zero_optimization.offload_optimizer' is not used by "
          "kolo; ignored"));
  EXPECT_EQ(c->precision, Precision::kFloat16);
  EXPECT_EQ(c->zero_optimization.stage, 2);
}

TEST(TrainingConfigTest, ParametersOfTheOtherFamilyAreWarned) {
  StatusOr<TrainingConfig> c = Parse(R"({"optimizer": {"type": "SGD",
      "params": {"lr": 0.1, "betas": [0.9, 0.999], "momentum": 0.5}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_THAT(c->warnings,
              ElementsAre("ds.json: 'optimizer.params.betas' is not used by "
                          "kolo with SGD; ignored"));
  EXPECT_EQ(c->optimizer->momentum, 0.5);
  EXPECT_EQ(c->optimizer->beta1, 0.9);  // the default, untouched

  c = Parse(R"({"optimizer": {"type": "Adam", "params": {"momentum": 0.5}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_THAT(c->warnings,
              ElementsAre("ds.json: 'optimizer.params.momentum' is not used "
                          "by kolo with Adam or AdamW; ignored"));
  EXPECT_EQ(c->optimizer->momentum, 0);

  // OneCycle takes no warm-up parameters.
  c = Parse(R"({"scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 0.1, "cycle_max_lr": 1, "warmup_num_steps": 5}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_THAT(c->warnings,
              ElementsAre("ds.json: 'scheduler.params.warmup_num_steps' is "
                          "not used by kolo; ignored"));
}

TEST(TrainingConfigTest, Bfloat16IsTheOldNameOfBf16) {
  StatusOr<TrainingConfig> c = Parse(R"({"bfloat16": {"enabled": true}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->precision, Precision::kBFloat16);
  EXPECT_TRUE(c->warnings.empty());

  // DeepSpeed reads bf16 when both are there.
  c = Parse(R"({"bf16": {"enabled": false}, "bfloat16": {"enabled": true}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->precision, Precision::kFloat32);
  EXPECT_THAT(c->warnings,
              ElementsAre("ds.json: 'bfloat16' is not used by kolo when bf16 "
                          "is given; ignored"));

  EXPECT_THAT(ErrorOf(R"({"fp16": {"enabled": true},
                          "bfloat16": {"enabled": true}})"),
              HasSubstr("'fp16.enabled' and 'bfloat16.enabled' are both"));
}

TEST(TrainingConfigTest, NullCountsAsAbsent) {
  StatusOr<TrainingConfig> c =
      Parse(R"({"train_batch_size": null, "optimizer": null,
                "fp16": {"enabled": true, "loss_scale_window": null}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train_batch_size, 0);
  EXPECT_FALSE(c->optimizer.has_value());
  EXPECT_EQ(c->fp16.loss_scale_window, 1000);
}

TEST(TrainingConfigTest, EachBadValueNamesItsKey) {
  struct Case {
    const char* json;
    const char* expected;
  };
  const Case cases[] = {
      // Wrong JSON types.
      {R"({"train_batch_size": "256"})",
       "'train_batch_size' must be an integer >= 1, got \"256\""},
      {R"({"gradient_clipping": "1.0"})",
       "'gradient_clipping' must be a number >= 0, got \"1.0\""},
      {R"({"fp16": true})", "'fp16' must be an object, got true"},
      {R"({"zero_optimization": {"overlap_comm": 1}})",
       "'zero_optimization.overlap_comm' must be true or false, got 1"},
      {R"({"optimizer": {"type": 3}})",
       "'optimizer.type' must be a string, got 3"},
      {R"({"optimizer": {"type": "Adam", "params": [1]}})",
       "'optimizer.params' must be an object, got [1]"},
      {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})",
       "'optimizer.params.betas' must be two numbers in [0, 1)"},
      {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9, 1.0]}}})",
       "'optimizer.params.betas' must be two numbers in [0, 1), as [0.9, "
       "0.999], got [0.9,1.0]"},
      {R"({"optimizer": {"type": "Adam", "params": {"lr": -0.1}}})",
       "'optimizer.params.lr' must be a number >= 0, got -0.1"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": 1}}})",
       "'scheduler.params.warmup_type' must be a string, got 1"},
      {R"({"steps_per_print": 0})",
       "'steps_per_print' must be an integer >= 1, got 0"},
      // Batch sizes.
      {R"({"train_batch_size": 0})",
       "'train_batch_size' must be an integer >= 1, got 0"},
      {R"({"train_batch_size": -4})",
       "'train_batch_size' must be an integer >= 1, got -4"},
      {R"({"train_micro_batch_size_per_gpu": 0})",
       "'train_micro_batch_size_per_gpu' must be an integer >= 1, got 0"},
      {R"({"gradient_accumulation_steps": -1})",
       "'gradient_accumulation_steps' must be an integer >= 1, got -1"},
      {R"({"gradient_clipping": -1})",
       "'gradient_clipping' must be a number >= 0, got -1"},
      // Types of optimizer and schedule.
      {R"({"optimizer": {"type": "Lamb"}})",
       "'optimizer.type' is \"Lamb\"; kolo knows Adam, AdamW and SGD"},
      {R"({"optimizer": {"params": {"lr": 0.1}}})",
       "'optimizer.type' is missing"},
      {R"({"scheduler": {"type": "LRRangeTest"}})",
       "'scheduler.type' is \"LRRangeTest\"; kolo knows WarmupLR, "
       "WarmupDecayLR, WarmupCosineLR and OneCycle"},
      {R"({"scheduler": {}})", "'scheduler.type' is missing"},
      // Schedule parameters.
      {R"({"scheduler": {"type": "WarmupDecayLR"}})",
       "'scheduler.params.total_num_steps' is missing; WarmupDecayLR needs "
       "it"},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {}}})",
       "'scheduler.params.total_num_steps' is missing; WarmupCosineLR needs "
       "it"},
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"warmup_type": "cosine"}}})",
       "'scheduler.params.warmup_type' must be \"log\" or \"linear\", got "
       "\"cosine\""},
      {R"({"scheduler": {"type": "WarmupLR",
                         "params": {"warmup_num_steps": 0}}})",
       "'scheduler.params.warmup_num_steps' must be an integer >= 1, got 0"},
      {R"({"scheduler": {"type": "OneCycle",
                         "params": {"cycle_min_lr": 0.1}}})",
       "'scheduler.params.cycle_max_lr' is missing; OneCycle needs it"},
      {R"({"scheduler": {"type": "OneCycle",
                         "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1,
                                    "cycle_first_step_size": 0}}})",
       "'scheduler.params.cycle_first_step_size' must be an integer >= 1, "
       "got 0"},
      {R"({"optimizer": {"type": "SGD",
                         "params": {"nesterov": true, "momentum": 0}}})",
       "'optimizer.params.nesterov' needs momentum > 0 and dampening 0"},
      // ZeRO.
      {R"({"zero_optimization": {"stage": 3}})",
       "'zero_optimization.stage' is 3; kolo does not support ZeRO stage 3"},
      {R"({"zero_optimization": {"stage": 4}})",
       "'zero_optimization.stage' must be an integer from 0 to 2, got 4"},
      {R"({"zero_optimization": {"stage": -1}})",
       "'zero_optimization.stage' must be an integer from 0 to 2, got -1"},
      {R"({"zero_optimization": {"reduce_bucket_size": 0}})",
       "'zero_optimization.reduce_bucket_size' must be an integer >= 1, got "
       "0"},
      // Mixed precision.
      {R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})",
       "'fp16.enabled' and 'bf16.enabled' are both true; choose one "
       "precision"},
      {R"({"fp16": {"min_loss_scale": 0}})",
       "'fp16.min_loss_scale' must be a number > 0, got 0"},
      {R"({"fp16": {"loss_scale_window": 0}})",
       "'fp16.loss_scale_window' must be an integer >= 1, got 0"},
      {R"({"fp16": {"hysteresis": 0}})",
       "'fp16.hysteresis' must be an integer from 1 to 2147483647, got 0"},
      {R"({"fp16": {"loss_scale": -1}})",
       "'fp16.loss_scale' must be a number >= 0, got -1"},
      {R"({"fp16": {"initial_scale_power": 65}})",
       "'fp16.initial_scale_power' must be an integer from 0 to 64, got 65"},
      {R"({"fp16": {"loss_scaler": "apex"}})",
       "'fp16.loss_scaler' must be \"deepspeed\" or \"torch\", got \"apex\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    EXPECT_THAT(ErrorOf(c.json), HasSubstr(c.expected));
  }
}

TEST(TrainingConfigTest, InvalidJsonGivesNlohmannsPosition) {
  StatusOr<TrainingConfig> c = Parse("{\n  \"train_batch_size\": 4,,\n}");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), StartsWith("ds.json: not valid JSON: "));
  // The second comma: two spaces, 18 characters of key, ": 4," end at 24.
  EXPECT_THAT(c.status().message(), HasSubstr("line 2, column 25"));

  EXPECT_THAT(ErrorOf("[1, 2]"),
              HasSubstr("a configuration is a JSON object, got array"));
}

// A number too large for a double is nlohmann's out_of_range, not a
// parse_error: it escaped ParseTrainingConfig and ended the program
// (terminate in kolo-train). Found by fuzz/training_config_fuzzer.cc; the
// input is fuzz/regressions/training_config_fuzzer/number_overflow.
TEST(TrainingConfigTest, ANumberTooLargeForADoubleIsInvalidJson) {
  EXPECT_THAT(ErrorOf("{\"gradient_clipping\": 1e400}"),
              AllOf(StartsWith("ds.json: not valid JSON: "),
                    HasSubstr("number overflow parsing '1e400'")));
  const std::string found = std::string(KOLO_SOURCE_DIR) +
                            "/fuzz/regressions/training_config_fuzzer/"
                            "number_overflow";
  StatusOr<TrainingConfig> c = LoadTrainingConfig(found);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr(found), HasSubstr("number overflow")));
}

TEST(TrainingConfigTest, LoadNamesTheFile) {
  char dir_template[] = "/tmp/kolo_training_config_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/ds.json";
  {
    std::ofstream out(path);
    out << R"({"train_batch_size": 32, "zero_optimization": {"stage": 7}})";
  }
  StatusOr<TrainingConfig> c = LoadTrainingConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            path +
                ": 'zero_optimization.stage' must be an integer from 0 "
                "to 2, got 7");
  {
    std::ofstream out(path);
    out << R"({"train_batch_size": 32})";
  }
  c = LoadTrainingConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train_batch_size, 32);

  c = LoadTrainingConfig(dir + "/missing.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr(dir + "/missing.json"));

  // A directory opens but reads as nothing.
  c = LoadTrainingConfig(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(dir));

  std::remove(path.c_str());
  rmdir(dir.c_str());
}

// Batch sizes, with 4 workers unless said otherwise.
struct Batches {
  int64_t global;
  int64_t micro;
  int64_t steps;
};

StatusOr<Batches> Resolve(Batches given, int32_t world_size = 4) {
  TrainingConfig config;
  config.train_batch_size = given.global;
  config.train_micro_batch_size_per_gpu = given.micro;
  config.gradient_accumulation_steps = given.steps;
  Status status = ResolveBatchSizes(&config, world_size);
  if (!status.ok()) {
    // An error leaves the configuration as it was.
    EXPECT_EQ(config.train_batch_size, given.global);
    EXPECT_EQ(config.train_micro_batch_size_per_gpu, given.micro);
    EXPECT_EQ(config.gradient_accumulation_steps, given.steps);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    return status;
  }
  return Batches{config.train_batch_size, config.train_micro_batch_size_per_gpu,
                 config.gradient_accumulation_steps};
}

void ExpectBatches(const StatusOr<Batches>& b, int64_t global, int64_t micro,
                   int64_t steps) {
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->global, global);
  EXPECT_EQ(b->micro, micro);
  EXPECT_EQ(b->steps, steps);
}

std::string ResolveError(Batches given, int32_t world_size = 4) {
  StatusOr<Batches> b = Resolve(given, world_size);
  return b.ok() ? "(resolved)" : b.status().message();
}

TEST(ResolveBatchSizesTest, AllThreeGivenMustAgree) {
  ExpectBatches(Resolve({256, 16, 4}), 256, 16, 4);  // 16 x 4 x 4
  EXPECT_EQ(ResolveError({256, 16, 2}),
            "batch sizes: train_batch_size 256 != "
            "train_micro_batch_size_per_gpu 16 x gradient_accumulation_steps "
            "2 x 4 workers = 128");
}

TEST(ResolveBatchSizesTest, GlobalAndMicroGiveTheAccumulationSteps) {
  ExpectBatches(Resolve({256, 16, 0}), 256, 16, 4);  // 256 / (16 x 4)
  EXPECT_EQ(ResolveError({100, 16, 0}),
            "batch sizes: train_batch_size 100 is not a multiple of "
            "train_micro_batch_size_per_gpu 16 x 4 workers = 64");
  // 32 < 16 x 4: not even one accumulation step.
  EXPECT_THAT(ResolveError({32, 16, 0}),
              HasSubstr("train_batch_size 32 is not a multiple of"));
}

TEST(ResolveBatchSizesTest, GlobalAndStepsGiveTheMicroBatch) {
  ExpectBatches(Resolve({256, 0, 2}), 256, 32, 2);  // 256 / (2 x 4)
  EXPECT_EQ(ResolveError({100, 0, 3}),
            "batch sizes: train_batch_size 100 is not a multiple of "
            "gradient_accumulation_steps 3 x 4 workers = 12");
}

TEST(ResolveBatchSizesTest, MicroAndStepsGiveTheGlobalBatch) {
  ExpectBatches(Resolve({0, 8, 3}), 96, 8, 3);  // 8 x 3 x 4
}

TEST(ResolveBatchSizesTest, OneSizeAloneMeansOneAccumulationStep) {
  ExpectBatches(Resolve({256, 0, 0}), 256, 64, 1);  // 256 / 4
  EXPECT_EQ(ResolveError({10, 0, 0}),
            "batch sizes: train_batch_size 10 is not a multiple of 4 "
            "workers");
  ExpectBatches(Resolve({0, 8, 0}), 32, 8, 1);  // 8 x 4
  ExpectBatches(Resolve({0, 8, 0}, 1), 8, 8, 1);
  ExpectBatches(Resolve({7, 0, 0}, 1), 7, 7, 1);
}

TEST(ResolveBatchSizesTest, NeedsTheGlobalOrTheMicroBatch) {
  EXPECT_THAT(ResolveError({0, 0, 2}),
              HasSubstr("give train_batch_size or "
                        "train_micro_batch_size_per_gpu"));
  EXPECT_THAT(ResolveError({0, 0, 2}),
              HasSubstr("gradient_accumulation_steps 2 alone"));
  EXPECT_THAT(ResolveError({0, 0, 0}), HasSubstr("none is set"));
}

TEST(ResolveBatchSizesTest, RejectsBadWorldSizesAndNegativeSizes) {
  EXPECT_THAT(ResolveError({256, 0, 0}, 0),
              HasSubstr("world size must be >= 1, got 0"));
  EXPECT_THAT(ResolveError({-8, 0, 0}),
              HasSubstr("train_batch_size -8 is negative"));
  EXPECT_EQ(ResolveError({12, 4, 2}, 1),
            "batch sizes: train_batch_size 12 != "
            "train_micro_batch_size_per_gpu 4 x gradient_accumulation_steps "
            "2 x 1 worker = 8");
  // 2^62 x 4 overflows int64_t: an error, not a wrapped product.
  EXPECT_THAT(ResolveError({0, int64_t{1} << 62, 0}), HasSubstr("overflows"));
}

}  // namespace
}  // namespace kolo
