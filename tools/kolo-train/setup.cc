#include "setup.h"

#include <fmt/format.h>

#include <optional>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "config_file.h"
#include "kolo/torch.h"
#include "kolo/torch_zero.h"
#include "plan.h"
#include "progress_line.h"

namespace kolo::train {
namespace {

using nlohmann::json;

constexpr int64_t kSyntheticTrainSize = 8192;
constexpr int64_t kSyntheticTestSize = 2048;

data::Dataset Rows(const data::Dataset& d, int64_t begin, int64_t count) {
  data::Dataset out;
  out.images = d.images.narrow(0, begin, count);
  out.labels = d.labels.narrow(0, begin, count);
  out.num_classes = d.num_classes;
  return out;
}

StatusOr<data::Dataset> FirstRows(data::Dataset d, int64_t n, const char* flag,
                                  const char* split, const std::string& dir) {
  if (n == 0) return d;
  if (n > d.size()) {
    return InvalidArgument(
        fmt::format("{} {} is more than the {} {} images in {}", flag, n,
                    d.size(), split, dir));
  }
  return Rows(d, 0, n);
}

}  // namespace

StatusOr<Data> LoadData(const Flags& f) {
  Data out;
  if (f.dataset == "synthetic") {
    const int64_t n_train =
        f.train_subset > 0 ? f.train_subset : kSyntheticTrainSize;
    const int64_t n_test =
        f.test_subset > 0 ? f.test_subset : kSyntheticTestSize;
    // One draw, split in two, so that both halves share the class
    // prototypes and the test set measures what training learned.
    data::Dataset all = data::Synthetic(
        n_train + n_test, {3, f.image_size, f.image_size}, 10, f.seed);
    out.train = Rows(all, 0, n_train);
    out.test = Rows(all, n_train, n_test);
    out.source = fmt::format("synthetic 3x{}x{}", f.image_size, f.image_size);
    return out;
  }
  const std::string dir =
      f.data_dir.empty() ? DefaultDataDir(f.dataset) : f.data_dir;
  auto read = [&](bool train) -> StatusOr<data::Dataset> {
    if (f.dataset == "fashion-mnist") return data::ReadFashionMnist(dir, train);
    if (f.dataset == "mnist") return data::ReadMnist(dir, train);
    return data::ReadCifar10(dir, train);
  };
  const std::string context = "--dataset " + f.dataset;
  StatusOr<data::Dataset> train = read(true);
  if (!train.ok()) return train.status().WithContext(context);
  StatusOr<data::Dataset> test = read(false);
  if (!test.ok()) return test.status().WithContext(context);
  KOLO_ASSIGN_OR_RETURN(
      out.train, FirstRows(*std::move(train), f.train_subset, "--train-subset",
                           "training", dir));
  KOLO_ASSIGN_OR_RETURN(out.test, FirstRows(*std::move(test), f.test_subset,
                                            "--test-subset", "test", dir));
  if (f.dataset == "cifar10") out.augmentation = data::Cifar10Augmentation();
  out.source = dir;
  return out;
}

Status Prepare(const Flags& f, int32_t rank, Setup* s) {
  KOLO_ASSIGN_OR_RETURN(s->data, LoadData(f));
  // The same seed on every rank gives the same initial weights; the
  // broadcast from rank 0 that follows makes sure of it.
  ::torch::manual_seed(f.seed);
  KOLO_ASSIGN_OR_RETURN(s->model,
                        models::CreateModel(f.model, s->data.train.num_classes,
                                            s->data.train.images.size(1)));
  s->optimizer =
      kolo::torch::MakeOptimizer(RunOptimizerConfig(f))(s->model->parameters());
  if (!f.resume || rank != 0) return Status::Ok();

  CheckpointInfo expected;
  expected.seed = f.seed;
  expected.model = f.model;
  expected.dataset = f.dataset;
  expected.optimizer = CheckpointOptimizerName(f);
  StatusOr<CheckpointInfo> info =
      LoadCheckpoint(f.checkpoint_dir, expected, *s->model, *s->optimizer);
  if (!info.ok()) {
    if (info.status().code() != StatusCode::kNotFound) return info.status();
    fmt::print("kolo-train: --resume: {}; starting from epoch 1\n",
               info.status().message());
    return Status::Ok();
  }
  s->epochs_done = info->epochs_done;
  // LoadCheckpoint checked that it is a JSON array.
  s->history = json::parse(info->history_json);
  s->resumed_from = CheckpointPath(f.checkpoint_dir);
  return Status::Ok();
}

json EpochRecord(const EpochFigures& e) {
  return {{"epoch", e.epoch},
          {"lr", e.lr},
          {"train_loss", e.train_loss},
          {"test_accuracy", e.eval.accuracy()},
          {"test_correct", e.eval.correct},
          {"test_total", e.eval.total},
          {"seconds", e.seconds},
          {"images_per_second", e.images_per_second}};
}

std::string EpochLine(const EpochFigures& e) {
  return fmt::format(
      "epoch {}/{}  train loss {:.4f}  test accuracy {:.2f}% ({}/{})  {:.0f} "
      "images/s  {:.1f} s",
      e.epoch, e.epochs, e.train_loss, 100.0 * e.eval.accuracy(),
      e.eval.correct, e.eval.total, e.images_per_second, e.seconds);
}

EpochFigures FiguresOf(const kolo::torch::EpochReport& e, int64_t epochs) {
  EpochFigures figures;
  figures.epoch = e.epoch;
  figures.epochs = epochs;
  figures.lr = e.lr;
  figures.train_loss = e.train_loss;
  figures.eval = e.eval;
  figures.seconds = e.seconds;
  figures.images_per_second = static_cast<double>(e.images) / e.seconds;
  return figures;
}

std::string ProgressText(const kolo::torch::StepReport& r, int64_t epochs,
                         int32_t shards) {
  const double rate =
      static_cast<double>(r.images_seen) * shards / r.epoch_seconds;
  const int64_t done = r.batch + 1;
  const double per_batch = r.epoch_seconds / static_cast<double>(done);
  const int64_t left = (r.batches_per_epoch - done) +
                       (epochs - r.epoch - 1) * r.batches_per_epoch;
  return fmt::format(
      "epoch {}/{}  step {}/{}  loss {:.4f}  {:.0f} images/s  ETA {}",
      r.epoch + 1, epochs, done, r.batches_per_epoch, r.mean_loss, rate,
      bench::FormatDuration(per_batch * static_cast<double>(left)));
}

CheckpointInfo CheckpointInfoAfter(const Flags& f, int64_t epochs_done,
                                   const std::string& history_json) {
  CheckpointInfo info;
  info.epochs_done = epochs_done;
  info.seed = f.seed;
  info.model = f.model;
  info.dataset = f.dataset;
  info.optimizer = CheckpointOptimizerName(f);
  info.history_json = history_json;
  return info;
}

std::string CheckpointOptimizerName(const Flags& f) {
  return ModeOf(f) == TrainingMode::kZero ? f.optimizer + " under ZeroOptimizer"
                                          : f.optimizer;
}

kolo::torch::Compression ParseCompression(const std::string& name) {
  if (name == "fp16") return kolo::torch::Compression::kFloat16;
  if (name == "bf16") return kolo::torch::Compression::kBFloat16;
  return kolo::torch::Compression::kNone;
}

kolo::torch::TrainerOptions TrainerOptionsOf(const Flags& f, const Data& d) {
  kolo::torch::TrainerOptions options;
  options.epochs = f.epochs;
  options.batch_size = f.batch_size;
  options.seed = f.seed;
  options.backward_passes_per_step = f.backward_passes_per_step;
  options.loader_workers = kLoaderWorkers;
  options.augmentation = d.augmentation;
  options.eval_batch_size = kEvalBatchSize;
  options.name = "kolo-train";
  return options;
}

}  // namespace kolo::train
