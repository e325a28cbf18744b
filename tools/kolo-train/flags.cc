#include "flags.h"

#include <cstdio>
#include <utility>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "kolo/models.h"

namespace kolo::train {

std::vector<std::string> ModelChoices() { return models::ModelNames(); }

std::vector<std::string> DatasetChoices() {
  return {"fashion-mnist", "mnist", "cifar10", "synthetic"};
}

namespace {

// What trains on what: the model, the data, the epochs and batches.
void AddDataAndModelFlags(CLI::App& app, Flags* f) {
  app.add_option("--model", f->model, "network to train")
      ->check(CLI::IsMember(ModelChoices()))
      ->capture_default_str();
  app.add_option("--dataset", f->dataset, "dataset to train on")
      ->check(CLI::IsMember(DatasetChoices()))
      ->capture_default_str();
  app.add_option("--data-dir", f->data_dir,
                 "directory of the dataset's files "
                 "(default /usr/share/datasets/<dataset>)");
  app.add_option("--epochs", f->epochs, "passes over the training set")
      ->capture_default_str();
  app.add_option("--batch-size", f->batch_size, "batch size per worker")
      ->capture_default_str();
}

// The optimizer and its learning rate; LibTorch threads and the seed.
void AddOptimizerFlags(CLI::App& app, Flags* f) {
  app.add_option("--lr", f->lr, "learning rate of one worker")
      ->capture_default_str();
  app.add_flag("--no-lr-scaling", f->no_lr_scaling,
               "do not multiply --lr by the number of workers");
  app.add_option("--warmup-epochs", f->warmup_epochs,
                 "epochs over which the rate climbs from --lr to the scaled "
                 "rate")
      ->capture_default_str();
  app.add_option("--lr-schedule", f->lr_schedule,
                 "after the warm-up: cosine (down to 0 at the last step) or "
                 "constant")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--optimizer", f->optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  app.add_option("--momentum", f->momentum, "SGD momentum")
      ->capture_default_str();
  app.add_flag("--nesterov,!--no-nesterov", f->nesterov,
               "SGD with Nesterov momentum (default; --no-nesterov: classic)");
  app.add_option("--weight-decay", f->weight_decay, "L2 penalty")
      ->capture_default_str();
  app.add_option(
      "--threads", f->threads,
      "LibTorch threads per worker (default: cores / local workers)");
  app.add_option("--seed", f->seed,
                 "seed of the weights, the shuffle and the dropout masks")
      ->capture_default_str();
}

// Communication, checkpoints, subsets, output and the benchmark mode.
void AddRunFlags(CLI::App& app, Flags* f) {
  app.add_option("--compression", f->compression,
                 "how gradients travel: none, fp16 or bf16")
      ->check(CLI::IsMember({"none", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--backward-passes-per-step", f->backward_passes_per_step,
                 "batches whose gradients are summed locally per allreduce")
      ->capture_default_str();
  app.add_option("--bucket-kib", f->bucket_kib,
                 "gradients travel in buckets of about this many KiB; 0: one "
                 "allreduce per parameter")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", f->checkpoint_dir,
                 "rank 0 writes checkpoint.pt here after every epoch");
  app.add_flag("--resume", f->resume,
               "continue from the checkpoint in --checkpoint-dir, if any");
  app.add_option("--train-subset", f->train_subset,
                 "train on the first N training images (0: all)");
  app.add_option("--test-subset", f->test_subset,
                 "evaluate on the first N test images (0: all)");
  app.add_option("--image-size", f->image_size,
                 "height and width of --dataset synthetic's 3-channel images")
      ->capture_default_str();
  app.add_option("--json", f->json_path, "write the results to this file");
  app.add_option("--benchmark-steps", f->benchmark_steps,
                 "measure throughput: time this many training steps (after "
                 "--benchmark-warmup untimed ones) instead of training for "
                 "--epochs; no evaluation, no checkpoints");
  app.add_option("--benchmark-warmup", f->benchmark_warmup,
                 "untimed steps before --benchmark-steps")
      ->capture_default_str();
  app.add_flag("--no-kolo", f->no_kolo,
               "train in this one process with plain LibTorch (its own "
               "optimizer, no kolo runtime): the baseline for kolo's cost");
}

// ZeRO, mixed precision and elastic training.
void AddZeroAndElasticFlags(CLI::App& app, Flags* f) {
  app.add_option("--config", f->config_path,
                 "a DeepSpeed-style JSON configuration (train_batch_size, "
                 "optimizer, scheduler, gradient_clipping, fp16, bf16, "
                 "zero_optimization, ...); flags given here override it");
  app.add_option("--zero-stage", f->zero_stage,
                 "ZeRO: 0 replicates everything (DistributedOptimizer), 1 "
                 "shards the optimizer state, 2 also the gradients")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  app.add_option("--precision", f->precision,
                 "fp32, bf16 (bfloat16 model, float32 master weights) or "
                 "fp16 (float16 gradients with dynamic loss scaling)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--gradient-clipping", f->gradient_clipping,
                 "clip the gradient to this global L2 norm (0: no clipping)")
      ->capture_default_str();
  app.add_flag("--elastic", f->elastic,
               "train through lost and added workers (run it under kolorun "
               "--elastic)");
  app.add_option("--commit-every", f->commit_every,
                 "--elastic: steps between in-memory commits of the state")
      ->capture_default_str();
  app.add_option("--global-batch", f->global_batch,
                 "--elastic: images per step whatever the workers (default: "
                 "--batch-size times the first round's workers)");
  app.add_option("--kill-rank-at-step", f->kill_rank_at_step,
                 "--elastic, for fault-injection tests: R:S makes rank R of "
                 "the first round kill itself at global step S");
}

// Pipeline and parameter-server training.
void AddModelParallelFlags(CLI::App& app, Flags* f) {
  app.add_option("--pipeline-stages", f->pipeline_stages,
                 "pipeline parallelism: cut the model into this many stages, "
                 "one per rank; the world is stages x replicas (0: none)")
      ->capture_default_str();
  app.add_option("--micro-batches", f->micro_batches,
                 "--pipeline-stages: micro-batches per batch")
      ->capture_default_str();
  app.add_option("--schedule", f->schedule, "--pipeline-stages: gpipe or 1f1b")
      ->check(CLI::IsMember({"gpipe", "1f1b"}))
      ->capture_default_str();
  app.add_option("--balance", f->balance,
                 "--pipeline-stages: split the layers by parameter count or "
                 "by their forward time on a micro-batch (measured)")
      ->check(CLI::IsMember({"parameters", "time"}))
      ->capture_default_str();
  app.add_option("--parameter-servers", f->parameter_servers,
                 "train through K parameter servers, the ranks kolorun "
                 "--servers K started (0: none)")
      ->capture_default_str();
  app.add_option("--ps-mode", f->ps_mode,
                 "--parameter-servers: sync (averaged steps), async (each "
                 "gradient as it comes) or stale (async, bounded by "
                 "--staleness)")
      ->check(CLI::IsMember({"sync", "async", "stale"}))
      ->capture_default_str();
  app.add_option("--staleness", f->staleness,
                 "--ps-mode stale: steps a worker may run ahead of the "
                 "slowest")
      ->capture_default_str();
}

}  // namespace

// The flags in the order --help lists them.
void AddFlags(CLI::App& app, Flags* f) {
  AddDataAndModelFlags(app, f);
  AddOptimizerFlags(app, f);
  AddRunFlags(app, f);
  AddZeroAndElasticFlags(app, f);
  AddModelParallelFlags(app, f);
}

namespace {

// --pipeline-stages and --parameter-servers: each other's and the other
// modes' exclusions, and their own ranges. The world size is checked once
// the job is known (model_parallel.cc).
Status ValidateModelParallel(const Flags& f) {
  const bool pipeline = f.pipeline_stages != 0;
  const bool servers = f.parameter_servers != 0;
  if (f.pipeline_stages < 0) {
    return InvalidArgument(fmt::format(
        "--pipeline-stages must not be negative, got {}", f.pipeline_stages));
  }
  if (f.parameter_servers < 0) {
    return InvalidArgument(
        fmt::format("--parameter-servers must not be negative, got {}",
                    f.parameter_servers));
  }
  if (f.micro_batches < 1) {
    return InvalidArgument(fmt::format(
        "--micro-batches must be at least 1, got {}", f.micro_batches));
  }
  if (f.staleness < 0) {
    return InvalidArgument(
        fmt::format("--staleness must not be negative, got {}", f.staleness));
  }
  if (!pipeline) {
    for (const char* flag : {"--micro-batches", "--schedule", "--balance"}) {
      if (f.given.count(flag) != 0) {
        return InvalidArgument(fmt::format("{} needs --pipeline-stages", flag));
      }
    }
  }
  if (!servers) {
    for (const char* flag : {"--ps-mode", "--staleness"}) {
      if (f.given.count(flag) != 0) {
        return InvalidArgument(
            fmt::format("{} needs --parameter-servers", flag));
      }
    }
  }
  if (f.given.count("--staleness") != 0 && f.ps_mode != "stale") {
    return InvalidArgument("--staleness needs --ps-mode stale");
  }
  if (!pipeline && !servers) return Status::Ok();
  const char* mode = pipeline ? "--pipeline-stages" : "--parameter-servers";
  if (pipeline && servers) {
    return InvalidArgument(
        "--pipeline-stages and --parameter-servers do not combine");
  }
  if (pipeline && f.batch_size < f.micro_batches) {
    return InvalidArgument(fmt::format(
        "--batch-size {} is smaller than --micro-batches {}: a micro-batch "
        "would be empty",
        f.batch_size, f.micro_batches));
  }
  // The modes step their own way: no DistributedOptimizer, ZeroOptimizer,
  // elastic rounds or checkpoints.
  const std::pair<const char*, bool> excluded[] = {
      {"--zero-stage", f.zero_stage != 0},
      {"--precision", f.precision != "fp32"},
      {"--gradient-clipping", f.gradient_clipping != 0},
      {"--config", !f.config_path.empty()},
      {"--compression", f.compression != "none"},
      {"--backward-passes-per-step", f.backward_passes_per_step != 1},
      {"--elastic", f.elastic},
      {"--no-kolo", f.no_kolo},
      {"--checkpoint-dir", !f.checkpoint_dir.empty()},
  };
  for (const auto& [flag, set] : excluded) {
    if (set) {
      return InvalidArgument(
          fmt::format("{} does not combine with {}", flag, mode));
    }
  }
  return Status::Ok();
}

}  // namespace

TrainingMode ModeOf(const Flags& f) {
  if (f.elastic) return TrainingMode::kElastic;
  if (f.pipeline_stages > 0) return TrainingMode::kPipeline;
  if (f.parameter_servers > 0) return TrainingMode::kParameterServers;
  // Mixed precision and clipping live in the ZeroOptimizer (at stage 0 too).
  if (f.zero_stage > 0 || f.gradient_clipping > 0 || f.precision != "fp32") {
    return TrainingMode::kZero;
  }
  return TrainingMode::kDataParallel;
}

Status Validate(const Flags& f) {
  auto at_least = [](const char* flag, int64_t value, int64_t min) -> Status {
    if (value >= min) return Status::Ok();
    return InvalidArgument(
        fmt::format("{} must be at least {}, got {}", flag, min, value));
  };
  KOLO_RETURN_IF_ERROR(at_least("--epochs", f.epochs, 1));
  KOLO_RETURN_IF_ERROR(at_least("--batch-size", f.batch_size, 1));
  KOLO_RETURN_IF_ERROR(at_least("--warmup-epochs", f.warmup_epochs, 0));
  KOLO_RETURN_IF_ERROR(at_least("--threads", f.threads, 0));
  KOLO_RETURN_IF_ERROR(
      at_least("--backward-passes-per-step", f.backward_passes_per_step, 1));
  KOLO_RETURN_IF_ERROR(at_least("--bucket-kib", f.bucket_kib, 0));
  KOLO_RETURN_IF_ERROR(at_least("--train-subset", f.train_subset, 0));
  KOLO_RETURN_IF_ERROR(at_least("--test-subset", f.test_subset, 0));
  KOLO_RETURN_IF_ERROR(at_least("--image-size", f.image_size, 1));
  if (f.image_size != 32 && f.dataset != "synthetic") {
    return InvalidArgument(fmt::format(
        "--image-size applies to --dataset synthetic only; {} images have "
        "their own size",
        f.dataset));
  }
  KOLO_RETURN_IF_ERROR(at_least("--benchmark-steps", f.benchmark_steps, 0));
  KOLO_RETURN_IF_ERROR(at_least("--benchmark-warmup", f.benchmark_warmup, 0));
  if (f.no_kolo && f.benchmark_steps == 0) {
    return InvalidArgument("--no-kolo needs --benchmark-steps");
  }
  if (!(f.lr > 0)) {
    return InvalidArgument(fmt::format("--lr must be positive, got {}", f.lr));
  }
  if (!(f.momentum >= 0)) {
    return InvalidArgument(
        fmt::format("--momentum must not be negative, got {}", f.momentum));
  }
  if (!(f.weight_decay >= 0)) {
    return InvalidArgument(fmt::format(
        "--weight-decay must not be negative, got {}", f.weight_decay));
  }
  if (f.elastic) {
    KOLO_RETURN_IF_ERROR(at_least("--commit-every", f.commit_every, 1));
    KOLO_RETURN_IF_ERROR(at_least("--global-batch", f.global_batch, 0));
    if (f.benchmark_steps > 0 || f.no_kolo) {
      return InvalidArgument(
          "--elastic trains; it does not combine with --benchmark-steps or "
          "--no-kolo");
    }
    if (f.backward_passes_per_step != 1) {
      return InvalidArgument(
          "--elastic keeps the global batch by splitting it over the "
          "workers; --backward-passes-per-step does not apply");
    }
    if (!f.kill_rank_at_step.empty()) {
      long rank = 0, step = 0;
      char end = 0;
      if (std::sscanf(f.kill_rank_at_step.c_str(), "%ld:%ld%c", &rank, &step,
                      &end) != 2 ||
          rank < 0 || step < 0) {
        return InvalidArgument(
            fmt::format("--kill-rank-at-step expects RANK:STEP, got '{}'",
                        f.kill_rank_at_step));
      }
    }
  } else {
    for (const auto& [flag, set] :
         {std::pair<const char*, bool>{"--global-batch", f.global_batch != 0},
          {"--kill-rank-at-step", !f.kill_rank_at_step.empty()}}) {
      if (set) {
        return InvalidArgument(
            fmt::format("{} belongs to --elastic training", flag));
      }
    }
  }
  if (!(f.gradient_clipping >= 0)) {
    return InvalidArgument(
        fmt::format("--gradient-clipping must not be negative, got {}",
                    f.gradient_clipping));
  }
  KOLO_RETURN_IF_ERROR(ValidateModelParallel(f));
  if (f.resume && f.checkpoint_dir.empty()) {
    return InvalidArgument("--resume needs --checkpoint-dir");
  }
  return Status::Ok();
}

std::string DefaultDataDir(const std::string& dataset) {
  return "/usr/share/datasets/" + dataset;
}

}  // namespace kolo::train
