// The shm backend with ranks as threads over a MemoryStore: collectives
// against closed-form values at sizes that take several rounds of an area,
// and the refusal of a world that spans hosts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectives/backend.h"
#include "store/memory_store.h"

namespace kolo {
namespace {

BackendOptions OptionsFor(int32_t rank, int32_t size) {
  BackendOptions options;
  options.world.rank = rank;
  options.world.size = size;
  options.world.local_rank = rank;
  options.world.local_size = size;
  options.store_prefix = "shm-test";
  options.shm_area_bytes =
      4096;  // small areas: every call below takes many rounds
  options.timeout = std::chrono::milliseconds(10000);
  return options;
}

// Allreduce (60 KB: the whole-buffer path; 120 KB: the sliced path),
// reducescatter and alltoallv over buffers many areas long, at 2 and 3
// ranks; element i of rank r is r + i % 1000.
TEST(ShmBackendTest, CollectivesSpanningManyAreasAreExact) {
  for (const auto& world_and_count : {std::pair<int32_t, int64_t>{2, 15000},
                                      {2, 30000},
                                      {3, 15000},
                                      {3, 30000}}) {  // divisible by 2 and 3
    const int32_t size = world_and_count.first;
    const int64_t kCount = world_and_count.second;
    auto store = std::make_shared<MemoryStore>();
    std::vector<int> wrong(size, 0);
    std::vector<std::thread> threads;
    for (int32_t rank = 0; rank < size; ++rank) {
      threads.emplace_back([&, rank] {
        auto backend = CreateShmBackend(OptionsFor(rank, size), store);
        if (!backend.ok()) {
          ++wrong[rank];
          return;
        }
        std::vector<float> data(kCount);
        for (int64_t i = 0; i < kCount; ++i)
          data[i] = static_cast<float>(rank + i % 1000);
        std::vector<float> sum(kCount);
        if (!(*backend)
                 ->Allreduce(data.data(), sum.data(), kCount,
                             DataType::kFloat32, ReduceOp::kSum)
                 .ok()) {
          ++wrong[rank];
          return;
        }
        const float ranks = static_cast<float>(size * (size - 1) / 2);
        for (int64_t i = 0; i < kCount; ++i) {
          if (sum[i] != ranks + size * static_cast<float>(i % 1000))
            ++wrong[rank];
        }
        const int64_t block = kCount / size;
        std::vector<float> mine(block);
        if (!(*backend)
                 ->Reducescatter(data.data(), mine.data(), block,
                                 DataType::kFloat32, ReduceOp::kMax)
                 .ok()) {
          ++wrong[rank];
          return;
        }
        for (int64_t i = 0; i < block; ++i) {
          if (mine[i] !=
              static_cast<float>(size - 1 + (rank * block + i) % 1000))
            ++wrong[rank];
        }
        // Rank r sends rank d (d + 1) * 1000 + r elements, all equal to r.
        std::vector<int64_t> send_counts(size), recv_counts(size);
        for (int32_t d = 0; d < size; ++d) {
          send_counts[d] = (d + 1) * 1000 + rank;
          recv_counts[d] = (rank + 1) * 1000 + d;
        }
        std::vector<int32_t> out_buffer, in_buffer;
        for (int32_t d = 0; d < size; ++d)
          in_buffer.insert(in_buffer.end(), send_counts[d], rank);
        for (int32_t d = 0; d < size; ++d)
          out_buffer.resize(out_buffer.size() + recv_counts[d]);
        if (!(*backend)
                 ->Alltoallv(in_buffer.data(), send_counts, out_buffer.data(),
                             recv_counts, DataType::kInt32)
                 .ok()) {
          ++wrong[rank];
          return;
        }
        size_t at = 0;
        for (int32_t from = 0; from < size; ++from) {
          for (int64_t k = 0; k < recv_counts[from]; ++k) {
            if (out_buffer[at++] != from) ++wrong[rank];
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong, std::vector<int>(size, 0)) << size << " ranks";
  }
}

// The sliced allreduce takes its chunks in alternating order, call by
// call; the result must not depend on it. Three calls on random floats with
// a partial last chunk (first in a backward call) give exactly the sum in
// rank order, each time, in place and out of place.
TEST(ShmBackendTest, SlicedAllreducesGiveTheSameBitsInEitherChunkOrder) {
  constexpr int32_t kSize = 3;
  constexpr int64_t kCount = 30001;  // 29 full chunks of 1024, then 305
  auto input_of = [](int32_t rank) {
    std::mt19937 random(17 + rank);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> input(kCount);
    for (float& x : input) x = value(random);
    return input;
  };
  std::vector<float> expected = input_of(0);
  for (int32_t r = 1; r < kSize; ++r) {
    const std::vector<float> theirs = input_of(r);
    for (int64_t i = 0; i < kCount; ++i) expected[i] += theirs[i];
  }
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::string> failures(kSize);
  std::vector<std::thread> threads;
  for (int32_t rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      auto backend = CreateShmBackend(OptionsFor(rank, kSize), store);
      if (!backend.ok()) {
        failures[rank] = backend.status().ToString();
        return;
      }
      const std::vector<float> input = input_of(rank);
      for (int call = 0; call < 3; ++call) {
        std::vector<float> out(kCount, 0.0f);
        std::vector<float> in_place = input;
        const bool place = call == 1;
        const float* send = place ? in_place.data() : input.data();
        float* result = place ? in_place.data() : out.data();
        Status s = (*backend)->Allreduce(send, result, kCount,
                                         DataType::kFloat32, ReduceOp::kSum);
        if (!s.ok()) {
          failures[rank] = s.ToString();
          return;
        }
        if (std::memcmp(result, expected.data(), kCount * sizeof(float))) {
          failures[rank] = "call " + std::to_string(call) + " differs";
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<std::string>(kSize, ""));
}

TEST(ShmBackendTest, AJobAcrossHostsIsRefused) {
  BackendOptions options = OptionsFor(0, 4);
  options.world.local_size = 2;
  options.world.cross_size = 2;
  auto backend = CreateShmBackend(options, std::make_shared<MemoryStore>());
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(),
              ::testing::HasSubstr(
                  "needs every rank on one host, but this job spans 2 hosts"));
}

}  // namespace
}  // namespace kolo
