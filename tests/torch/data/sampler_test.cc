// Tests of DistributedSampler (src/torch/data/sampler.cc): shards cover
// the data set once per epoch, in the same shuffled order on every rank.
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
// The sequence the ranks' shards interleave into: position r + j·W is
// rank r's j-th index.
std::vector<int64_t> Interleave(int64_t n, DistributedSampler::Options options,
                                int64_t epoch) {
  std::vector<std::vector<int64_t>> shards;
  for (int32_t r = 0; r < options.world_size; ++r) {
    options.rank = r;
    auto sampler = DistributedSampler::Create(n, options);
    EXPECT_TRUE(sampler.ok()) << sampler.status().ToString();
    shards.push_back(sampler->Indices(epoch));
    EXPECT_EQ(static_cast<int64_t>(shards.back().size()),
              sampler->num_samples());
    EXPECT_EQ(shards.back().size(), shards.front().size()) << "rank " << r;
  }
  std::vector<int64_t> sequence;
  for (size_t j = 0; j < shards.front().size(); ++j) {
    for (const auto& shard : shards) sequence.push_back(shard[j]);
  }
  return sequence;
}

TEST(DistributedSamplerTest, PadModeCoversAllAndRepeatsFromStart) {
  // N = 10, W = 3: ceil(10 / 3) = 4 each; 12 positions, 2 repeated.
  const auto sequence = Interleave(10, {0, 3, true, 7, false}, 2);
  ASSERT_EQ(sequence.size(), 12u);
  const std::vector<int64_t> permutation(sequence.begin(),
                                         sequence.begin() + 10);
  EXPECT_EQ(Sorted(permutation), Iota(10));  // disjoint and covering
  EXPECT_EQ(sequence[10], sequence[0]);
  EXPECT_EQ(sequence[11], sequence[1]);
}

TEST(DistributedSamplerTest, PadModeWithFewerRowsThanRanks) {
  const auto sequence = Interleave(2, {0, 5, true, 1, false}, 0);
  ASSERT_EQ(sequence.size(), 5u);
  EXPECT_EQ(Sorted({sequence[0], sequence[1]}), Iota(2));
  EXPECT_EQ(sequence[2], sequence[0]);
  EXPECT_EQ(sequence[3], sequence[1]);
  EXPECT_EQ(sequence[4], sequence[0]);
}

TEST(DistributedSamplerTest, DropModeDropsTheRemainder) {
  // N = 10, W = 3: 3 each; 9 distinct rows, one dropped.
  const auto sequence = Interleave(10, {0, 3, true, 7, true}, 2);
  ASSERT_EQ(sequence.size(), 9u);
  const std::set<int64_t> distinct(sequence.begin(), sequence.end());
  EXPECT_EQ(distinct.size(), 9u);
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LE(*distinct.rbegin(), 9);
  // The dropped row is the permutation's last, so it changes per epoch.
  std::set<int64_t> dropped;
  for (int64_t epoch = 0; epoch < 10; ++epoch) {
    const auto s = Interleave(10, {0, 3, true, 7, true}, epoch);
    for (int64_t i = 0; i < 10; ++i) {
      if (std::find(s.begin(), s.end(), i) == s.end()) dropped.insert(i);
    }
  }
  EXPECT_GT(dropped.size(), 1u);
}

TEST(DistributedSamplerTest, ReshufflesPerEpochIdenticallyOnAllRanks) {
  const DistributedSampler::Options options{0, 4, true, 11, false};
  const auto epoch0 = Interleave(1000, options, 0);
  const auto epoch1 = Interleave(1000, options, 1);
  EXPECT_EQ(Sorted(epoch0), Iota(1000));
  EXPECT_EQ(Sorted(epoch1), Iota(1000));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, Iota(1000));
  // Independently built samplers (as on other ranks) agree.
  EXPECT_EQ(Interleave(1000, options, 1), epoch1);
  // Another seed, another order.
  EXPECT_NE(Interleave(1000, {0, 4, true, 12, false}, 1), epoch1);
}

TEST(DistributedSamplerTest, RealSamplesCoverTheDatasetOnce) {
  // Every rank's first real_samples() rows, shuffled or not, padded or
  // dropped, are each dataset row at most once, and all of them without
  // drop_last.
  for (bool shuffle : {false, true}) {
    for (bool drop_last : {false, true}) {
      for (int64_t n : {0, 1, 5, 9, 10, 11, 1000}) {
        for (int32_t w : {1, 2, 3, 4, 7}) {
          std::vector<int64_t> real;
          for (int32_t r = 0; r < w; ++r) {
            auto sampler =
                DistributedSampler::Create(n, {r, w, shuffle, 3, drop_last});
            ASSERT_TRUE(sampler.ok());
            const std::vector<int64_t> rows = sampler->Indices(1);
            ASSERT_LE(sampler->real_samples(), sampler->num_samples());
            real.insert(real.end(), rows.begin(),
                        rows.begin() + sampler->real_samples());
          }
          const std::set<int64_t> distinct(real.begin(), real.end());
          EXPECT_EQ(distinct.size(), real.size())
              << "n " << n << " world " << w;
          EXPECT_EQ(static_cast<int64_t>(real.size()),
                    drop_last ? n / w * w : n)
              << "n " << n << " world " << w << " shuffle " << shuffle;
        }
      }
    }
  }
}

TEST(DistributedSamplerTest, NoShuffleIsStrided) {
  auto sampler = DistributedSampler::Create(10, {1, 3, false, 0, false});
  ASSERT_TRUE(sampler.ok());
  EXPECT_EQ(sampler->Indices(0), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(sampler->Indices(5), (std::vector<int64_t>{1, 4, 7, 0}));
}

TEST(DistributedSamplerTest, RejectsBadRank) {
  auto sampler = DistributedSampler::Create(10, {3, 3});
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(sampler.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sampler.status().message(), HasSubstr("rank 3"));
  EXPECT_FALSE(DistributedSampler::Create(10, {0, 0}).ok());
}

// images[i] is filled with i and labels[i] = i, so a batch shows which rows
// it holds.

}  // namespace
}  // namespace kolo::data
