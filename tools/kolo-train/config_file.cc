#include "config_file.h"

#include <fmt/format.h>

#include "kolo_internal/enum_names.h"

namespace kolo::train {
namespace {

// The values of --optimizer and --precision, and what each selects; the
// first is the flag's default.
constexpr EnumName<OptimizerType> kOptimizerValues[] = {
    {"sgd", OptimizerType::kSgd},
    {"adam", OptimizerType::kAdam},
    {"adamw", OptimizerType::kAdamW}};
constexpr EnumName<Precision> kPrecisionValues[] = {
    {"fp32", Precision::kFloat32},
    {"bf16", Precision::kBFloat16},
    {"fp16", Precision::kFloat16}};

}  // namespace

Status ApplyConfigFile(Flags* f, int32_t world_size,
                       std::vector<std::string>* warnings) {
  const auto given = [f](const char* flag) { return f->given.count(flag) > 0; };
  if (!f->config_path.empty()) {
    KOLO_ASSIGN_OR_RETURN(TrainingConfig config,
                          LoadTrainingConfig(f->config_path));
    for (const std::string& warning : config.warnings)
      warnings->push_back(warning);

    // Batch sizes: flags replace the file's, and the global batch follows.
    if (given("--batch-size") || given("--backward-passes-per-step"))
      config.train_batch_size = 0;
    if (given("--batch-size"))
      config.train_micro_batch_size_per_gpu = f->batch_size;
    if (given("--backward-passes-per-step"))
      config.gradient_accumulation_steps = f->backward_passes_per_step;
    if (config.train_batch_size == 0 &&
        config.train_micro_batch_size_per_gpu == 0) {
      config.train_micro_batch_size_per_gpu = f->batch_size;  // the default
    }
    KOLO_RETURN_IF_ERROR(ResolveBatchSizes(&config, world_size)
                             .WithContext("--config " + f->config_path));
    f->batch_size = config.train_micro_batch_size_per_gpu;
    f->backward_passes_per_step =
        static_cast<int32_t>(config.gradient_accumulation_steps);

    if (config.optimizer && !given("--optimizer")) {
      const OptimizerConfig& o = *config.optimizer;
      f->optimizer = NameOf(kOptimizerValues, o.type, "sgd");
      if (!given("--lr")) f->lr = o.lr;
      if (!given("--weight-decay")) f->weight_decay = o.weight_decay;
      if (o.type == OptimizerType::kSgd) {
        if (!given("--momentum")) f->momentum = o.momentum;
        if (!given("--nesterov") && !given("--no-nesterov"))
          f->nesterov = o.nesterov;
      }
    }
    if (!given("--gradient-clipping"))
      f->gradient_clipping = config.gradient_clipping;
    if (!given("--precision"))
      f->precision = NameOf(kPrecisionValues, config.precision, "fp32");
    if (!given("--zero-stage")) f->zero_stage = config.zero_optimization.stage;
    if (!given("--seed") && config.seed != 0) f->seed = config.seed;
    f->config = config;
  }
  if (ModeOf(*f) == TrainingMode::kZero) {
    const std::string why =
        f->zero_stage > 0
            ? fmt::format("ZeRO stage {}", f->zero_stage)
            : (f->precision != "fp32" ? "--precision " + f->precision
                                      : std::string("gradient clipping"));
    if (f->elastic)
      return InvalidArgument(why + " does not combine with --elastic yet");
    if (f->no_kolo)
      return InvalidArgument(why + " needs kolo; --no-kolo runs without it");
    if (f->compression != "none") {
      return InvalidArgument(
          "--compression " + f->compression +
          " applies to DistributedOptimizer; " + why +
          " uses ZeroOptimizer (--precision fp16 sends float16 "
          "gradients)");
    }
  }
  return Status::Ok();
}

bool FileDrivesLearningRate(const Flags& f) {
  return f.config.has_value() &&
         (f.config->optimizer.has_value() ||
          f.config->scheduler.type != LrScheduleType::kNone);
}

OptimizerConfig RunOptimizerConfig(const Flags& f) {
  OptimizerConfig config;
  if (f.config && f.config->optimizer) config = *f.config->optimizer;
  config.type =
      ValueOf(kOptimizerValues, f.optimizer).value_or(OptimizerType::kSgd);
  config.lr = f.lr;
  config.weight_decay = f.weight_decay;
  if (config.type == OptimizerType::kSgd) {
    config.momentum = f.momentum;
    config.nesterov = f.nesterov && f.momentum > 0;
    config.dampening = 0;
  }
  return config;
}

Precision RunPrecision(const Flags& f) {
  return ValueOf(kPrecisionValues, f.precision).value_or(Precision::kFloat32);
}

}  // namespace kolo::train
