// Augment() and DataLoader; the loader's protocol is described with the
// class in kolo/data.h.
#include <pthread.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kolo/data.h"
#include "torch/data/data_random.h"

namespace kolo::data {

::torch::Tensor Augment(const ::torch::Tensor& images,
                        const Augmentation& augmentation, uint64_t seed) {
  if (!augmentation.enabled()) return images;
  const int64_t n = images.size(0);
  const int64_t height = images.size(2);
  const int64_t width = images.size(3);
  const int64_t pad = augmentation.crop_padding;
  const ::torch::Tensor padded =
      pad > 0 ? ::torch::constant_pad_nd(images, {pad, pad, pad, pad}, 0)
              : images;
  ::torch::Tensor out = ::torch::empty_like(images);
  DataRandom random(seed);
  for (int64_t i = 0; i < n; ++i) {
    // Draw in a fixed order (top, left, flip) so a seed names one result.
    const int64_t top = pad > 0 ? random.Below(2 * pad + 1) : 0;
    const int64_t left = pad > 0 ? random.Below(2 * pad + 1) : 0;
    const bool flip = augmentation.horizontal_flip && (random.Next() >> 63);
    const ::torch::Tensor window =
        padded[i].narrow(1, top, height).narrow(2, left, width);
    out[i].copy_(flip ? window.flip({2}) : window);
  }
  return out;
}

StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(
    Dataset dataset, std::vector<int64_t> indices, LoaderOptions options) {
  const ::torch::Tensor& images = dataset.images;
  const ::torch::Tensor& labels = dataset.labels;
  if (!images.defined() || images.dim() != 4 ||
      images.scalar_type() != ::torch::kFloat) {
    return InvalidArgument(
        "DataLoader: dataset images must be a float32 N×C×H×W tensor");
  }
  if (!labels.defined() || labels.dim() != 1 ||
      labels.scalar_type() != ::torch::kLong ||
      labels.size(0) != images.size(0)) {
    return InvalidArgument(
        "DataLoader: dataset labels must be an int64 "
        "tensor of " +
        std::to_string(images.size(0)) + " elements, one per image");
  }
  const int64_t n = images.size(0);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= n) {
      return InvalidArgument("DataLoader: index " + std::to_string(indices[i]) +
                             " at position " + std::to_string(i) +
                             " is outside the dataset's [0, " +
                             std::to_string(n) + ")");
    }
  }
  if (options.batch_size < 1 || options.num_workers < 1 ||
      options.prefetch < 1) {
    return InvalidArgument(
        "DataLoader: batch_size, num_workers and prefetch must be >= 1, got " +
        std::to_string(options.batch_size) + ", " +
        std::to_string(options.num_workers) + ", " +
        std::to_string(options.prefetch));
  }
  if (options.augmentation.crop_padding < 0) {
    return InvalidArgument("DataLoader: crop_padding must be >= 0, got " +
                           std::to_string(options.augmentation.crop_padding));
  }
  return std::unique_ptr<DataLoader>(new DataLoader(
      std::move(dataset), std::move(indices), std::move(options)));
}

StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(
    Dataset dataset, const DistributedSampler& sampler, int64_t epoch,
    LoaderOptions options) {
  options.augmentation_seed =
      MixSeed({options.augmentation_seed, sampler.options().seed,
               static_cast<uint64_t>(epoch),
               static_cast<uint64_t>(sampler.options().rank)});
  return Create(std::move(dataset), sampler.Indices(epoch), std::move(options));
}

DataLoader::DataLoader(Dataset dataset, std::vector<int64_t> indices,
                       LoaderOptions options)
    : dataset_(std::move(dataset)),
      indices_(std::move(indices)),
      options_(std::move(options)),
      num_batches_(options_.drop_last ? static_cast<int64_t>(indices_.size()) /
                                            options_.batch_size
                                      : (static_cast<int64_t>(indices_.size()) +
                                         options_.batch_size - 1) /
                                            options_.batch_size) {
  // No more workers than batches: a worker with nothing to do would only
  // start and exit.
  const int64_t workers = std::min<int64_t>(options_.num_workers, num_batches_);
  for (int64_t i = 0; i < workers; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  space_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

StatusOr<std::optional<Batch>> DataLoader::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!error_.ok()) return error_;
    if (next_ >= num_batches_) return std::optional<Batch>();
    auto it = ready_.find(next_);
    if (it == ready_.end()) {
      ready_cv_.wait(lock);
      continue;
    }
    StatusOr<Batch> batch = std::move(it->second);
    ready_.erase(it);
    ++next_;
    if (!batch.ok()) {
      error_ = batch.status();
      stopping_ = true;
    }
    lock.unlock();
    space_cv_.notify_all();
    if (!batch.ok()) return batch.status();
    return std::optional<Batch>(std::move(batch).value());
  }
}

void DataLoader::WorkerLoop() {
  pthread_setname_np(pthread_self(), "kolo-loader");
  while (true) {
    int64_t number;
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_cv_.wait(lock, [this] {
        return stopping_ || next_claim_ >= num_batches_ ||
               next_claim_ < next_ + options_.prefetch;
      });
      if (stopping_ || next_claim_ >= num_batches_) return;
      number = next_claim_++;
    }
    StatusOr<Batch> batch = Build(number);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      // Batches after a failed one would never be handed out.
      if (!batch.ok()) next_claim_ = num_batches_;
      ready_.emplace(number, std::move(batch));
    }
    ready_cv_.notify_all();
  }
}

StatusOr<Batch> DataLoader::Build(int64_t number) const {
  const int64_t begin = number * options_.batch_size;
  const int64_t end = std::min<int64_t>(begin + options_.batch_size,
                                        static_cast<int64_t>(indices_.size()));
  const std::string where = "data loader batch " + std::to_string(number) +
                            " of " + std::to_string(num_batches_);
  // The thread boundary: LibTorch and the transform report by exception,
  // the loader by Status.
  try {
    Batch batch;
    batch.number = number;
    batch.indices = ::torch::tensor(
        std::vector<int64_t>(indices_.begin() + begin, indices_.begin() + end));
    batch.images = dataset_.images.index_select(0, batch.indices);
    batch.labels = dataset_.labels.index_select(0, batch.indices);
    if (options_.augmentation.enabled()) {
      batch.images = Augment(
          batch.images, options_.augmentation,
          MixSeed({options_.augmentation_seed, static_cast<uint64_t>(number)}));
    }
    if (options_.transform) {
      Status status = options_.transform(batch);
      if (!status.ok()) return status.WithContext(where);
    }
    return batch;
  } catch (const c10::Error& e) {
    return Internal(where + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Internal(where + ": " + e.what());
  } catch (...) {
    return Internal(where + ": unknown exception");
  }
}

}  // namespace kolo::data
