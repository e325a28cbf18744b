// Tests of DataLoader and Augment (src/torch/data/loader.cc), over small
// data sets whose rows carry their own numbers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kolo/data.h"
#include "testing/requirements.h"
#include "torch/data/data_testing.h"

namespace kolo::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Iota;
using testing::Sorted;
Dataset RowNumbers(int64_t n) {
  Dataset d;
  d.labels = ::torch::arange(n, ::torch::kLong);
  d.images = d.labels.to(::torch::kFloat)
                 .view({n, 1, 1, 1})
                 .expand({n, 1, 2, 2})
                 .contiguous();
  d.num_classes = n;
  return d;
}

// Every batch of a loader, asserting each is ok.
std::vector<Batch> Drain(DataLoader& loader) {
  std::vector<Batch> batches;
  while (true) {
    auto next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    batches.push_back(**next);
  }
  return batches;
}

TEST(DataLoaderTest, YieldsSampledRowsOnceInOrderWithPartialLastBatch) {
  // N = 23, W = 2: 12 rows for rank 1, in batches of 5, 5 and 2.
  auto sampler = DistributedSampler::Create(23, {1, 2, true, 3, false});
  ASSERT_TRUE(sampler.ok());
  LoaderOptions options;
  options.batch_size = 5;
  options.num_workers = 3;
  options.prefetch = 2;
  // Later batches finish first, so order comes from the loader, not timing.
  options.transform = [](Batch& batch) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(20 * (3 - batch.number)));
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(23), *sampler, 4, options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ((*loader)->num_batches(), 3);
  const std::vector<Batch> batches = Drain(**loader);
  ASSERT_EQ(batches.size(), 3u);
  std::vector<int64_t> seen;
  const int64_t sizes[] = {5, 5, 2};
  for (size_t b = 0; b < batches.size(); ++b) {
    const Batch& batch = batches[b];
    EXPECT_EQ(batch.number, static_cast<int64_t>(b));
    EXPECT_EQ(batch.images.sizes(), (std::vector<int64_t>{sizes[b], 1, 2, 2}));
    EXPECT_TRUE(::torch::equal(batch.labels, batch.indices));
    EXPECT_TRUE(::torch::equal(batch.images, batch.indices.to(::torch::kFloat)
                                                 .view({-1, 1, 1, 1})
                                                 .expand_as(batch.images)));
    for (int64_t j = 0; j < batch.indices.size(0); ++j) {
      seen.push_back(batch.indices[j].item<int64_t>());
    }
  }
  EXPECT_EQ(seen, sampler->Indices(4));
  auto after = (*loader)->Next();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
}

TEST(DataLoaderTest, DropLastSkipsPartialBatch) {
  LoaderOptions options;
  options.batch_size = 5;
  options.drop_last = true;
  auto loader = DataLoader::Create(RowNumbers(12), Iota(12), options);
  ASSERT_TRUE(loader.ok());
  const std::vector<Batch> batches = Drain(**loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_TRUE(::torch::equal(batches[1].indices,
                             ::torch::arange(5, 10, ::torch::kLong)));
}

TEST(DataLoaderTest, EmptyEpochEndsAtOnce) {
  auto loader = DataLoader::Create(RowNumbers(4), {}, {});
  ASSERT_TRUE(loader.ok());
  auto next = (*loader)->Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

// Waits (bounded) until `count` reaches `at_least`.
bool WaitFor(const std::atomic<int>& count, int at_least) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.load() < at_least) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(DataLoaderTest, PrefetchBoundsBatchesBuiltAhead) {
  std::atomic<int> built{0};
  LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 4;
  options.prefetch = 2;
  options.transform = [&built](Batch&) {
    ++built;
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(20), Iota(20), options);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE(WaitFor(built, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(built.load(), 2);  // four workers, but only two slots
  ASSERT_TRUE((*loader)->Next().ok());
  ASSERT_TRUE(WaitFor(built, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(built.load(), 3);
}

TEST(DataLoaderTest, WorkerExceptionBecomesStickyStatus) {
  LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 3;
  options.transform = [](Batch& batch) -> Status {
    if (batch.number == 2) throw std::runtime_error("boom in batch two");
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(20), Iota(20), options);
  ASSERT_TRUE(loader.ok());
  for (int64_t b = 0; b < 2; ++b) {
    auto next = (*loader)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ((*next)->number, b);
  }
  for (int i = 0; i < 2; ++i) {
    auto next = (*loader)->Next();
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), StatusCode::kInternal);
    EXPECT_THAT(next.status().message(),
                AllOf(HasSubstr("data loader batch 2 of 10"),
                      HasSubstr("boom in batch two")));
  }
}

TEST(DataLoaderTest, TransformStatusAndTorchErrorsReachNext) {
  LoaderOptions options;
  options.batch_size = 3;
  options.transform = [](Batch& batch) {
    if (batch.number == 1) return InvalidArgument("bad batch");
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(9), Iota(9), options);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE((*loader)->Next().ok());
  auto failed = (*loader)->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "data loader batch 1 of 3: bad batch");

  options.transform = [](Batch& batch) {
    batch.images = batch.images.view({-1, 7});  // 12 elements: throws
    return Status::Ok();
  };
  loader = DataLoader::Create(RowNumbers(9), Iota(9), options);
  ASSERT_TRUE(loader.ok());
  failed = (*loader)->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("data loader batch 0 of 3: shape '[-1, 7]'"));
}

TEST(DataLoaderTest, RejectsBadIndexAndOptions) {
  auto loader = DataLoader::Create(RowNumbers(4), {0, 4}, {});
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(
      loader.status().message(),
      HasSubstr("index 4 at position 1 is outside the dataset's [0, 4)"));
  LoaderOptions options;
  options.batch_size = 0;
  EXPECT_FALSE(DataLoader::Create(RowNumbers(4), {0}, options).ok());
}

// Destroys the loader on another thread; true if that took under `limit`.
bool DestroyWithin(std::unique_ptr<DataLoader> loader,
                   std::chrono::seconds limit) {
  std::promise<void> done;
  std::future<void> destroyed = done.get_future();
  // The thread owns the promise, so a hung destructor outlives this call
  // safely; the test has failed by then.
  std::thread([done = std::move(done), l = std::move(loader)]() mutable {
    l.reset();
    done.set_value();
  }).detach();
  return destroyed.wait_for(limit) == std::future_status::ready;
}

TEST(DataLoaderTest, DestructionMidEpochReturnsPromptly) {
  LoaderOptions options;
  options.batch_size = 16;
  options.num_workers = 3;
  options.prefetch = 4;
  options.transform = [](Batch&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Status::Ok();
  };
  const Dataset dataset = Synthetic(4096, {1, 8, 8}, 10, 1);
  for (int consumed : {0, 1, 5}) {
    auto loader = DataLoader::Create(dataset, Iota(4096), options);
    ASSERT_TRUE(loader.ok());
    for (int i = 0; i < consumed; ++i) ASSERT_TRUE((*loader)->Next().ok());
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<DataLoader> owned = std::move(*loader);
    ASSERT_TRUE(DestroyWithin(std::move(owned), std::chrono::seconds(10)))
        << "destroying a loader after " << consumed << " batches hung";
    // Workers finish at most their current 20 ms batch.
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(2));
  }
}

TEST(AugmentTest, EachImageIsAWindowOfThePaddedImageMaybeMirrored) {
  const int64_t n = 16, pad = 2;
  // Values 1.. so that a zero can only be padding.
  const ::torch::Tensor images =
      ::torch::arange(1, 1 + n * 3 * 6 * 5, ::torch::kFloat).view({n, 3, 6, 5});
  const ::torch::Tensor out = Augment(images, {pad, true}, 5);
  ASSERT_EQ(out.sizes(), images.sizes());
  const ::torch::Tensor padded =
      ::torch::constant_pad_nd(images, {pad, pad, pad, pad}, 0);
  std::set<std::tuple<int64_t, int64_t, bool>> choices;
  for (int64_t i = 0; i < n; ++i) {
    bool found = false;
    for (int64_t top = 0; top <= 2 * pad && !found; ++top) {
      for (int64_t left = 0; left <= 2 * pad && !found; ++left) {
        const ::torch::Tensor window =
            padded[i].narrow(1, top, 6).narrow(2, left, 5);
        for (bool flip : {false, true}) {
          if (::torch::equal(out[i], flip ? window.flip({2}) : window)) {
            choices.insert({top, left, flip});
            found = true;
            break;
          }
        }
      }
    }
    EXPECT_TRUE(found) << "image " << i << " is no crop of its padded input";
  }
  EXPECT_GT(choices.size(), 4u);  // 16 draws from 50 choices
  EXPECT_TRUE(Augment(images, {}, 5).is_same(images));
  EXPECT_TRUE(::torch::equal(Augment(images, {pad, true}, 5), out));
  EXPECT_FALSE(::torch::equal(Augment(images, {pad, true}, 6), out));
}

std::vector<Batch> Epoch(const Dataset& dataset, int32_t rank, int64_t epoch,
                         int32_t workers) {
  auto sampler =
      DistributedSampler::Create(dataset.size(), {rank, 2, false, 9, false});
  EXPECT_TRUE(sampler.ok());
  LoaderOptions options;
  options.batch_size = 8;
  options.num_workers = workers;
  options.augmentation = Cifar10Augmentation();
  auto loader = DataLoader::Create(dataset, *sampler, epoch, options);
  EXPECT_TRUE(loader.ok());
  return Drain(**loader);
}

TEST(AugmentTest, LoaderAugmentationIsSeededBySeedEpochAndRank) {
  const Dataset dataset = Synthetic(40, {3, 32, 32}, 10, 3);
  const auto first = Epoch(dataset, 0, 0, 1);
  const auto again = Epoch(dataset, 0, 0, 3);  // other thread timing
  const auto next_epoch = Epoch(dataset, 0, 1, 1);
  ASSERT_EQ(first.size(), 3u);  // 20 rows: 8, 8, 4
  ASSERT_EQ(again.size(), first.size());
  ASSERT_EQ(next_epoch.size(), first.size());
  for (size_t b = 0; b < first.size(); ++b) {
    // No shuffling: the same rows each epoch, differently augmented.
    ASSERT_TRUE(::torch::equal(first[b].indices, next_epoch[b].indices));
    EXPECT_TRUE(::torch::equal(first[b].images, again[b].images)) << b;
    EXPECT_FALSE(::torch::equal(first[b].images, next_epoch[b].images)) << b;
    EXPECT_FALSE(::torch::equal(
        first[b].images, dataset.images.index_select(0, first[b].indices)));
    EXPECT_TRUE(::torch::equal(first[b].labels, next_epoch[b].labels));
  }
}

}  // namespace
}  // namespace kolo::data
