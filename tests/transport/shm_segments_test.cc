// ShmSegments with ranks as threads over a MemoryStore: every rank sees
// what every other wrote into its own segment, the names are gone once
// every rank mapped them, and a rank that never comes times out without
// leaving its segment behind.
#include "transport/shm_segments.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "testing/own_shm_segments.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

ShmSegments::Options OptionsFor(int32_t rank, int32_t size) {
  ShmSegments::Options options;
  options.rank = rank;
  options.size = size;
  options.bytes = 8192;
  options.timeout = std::chrono::milliseconds(2000);
  options.key_prefix = "test/";
  options.name_tag = "-test-";
  options.what = "shm test";
  return options;
}

// Rank r writes r * 100 + k at offset 8 k of its own segment; every rank
// then reads every segment.
TEST(ShmSegmentsTest, EveryRankReadsWhatEveryRankWroteAndNoNameIsLeft) {
  constexpr int kRanks = 3;
  MemoryStore store;
  std::vector<int> wrong(kRanks, -1);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      StatusOr<std::unique_ptr<ShmSegments>> segments =
          ShmSegments::Create(OptionsFor(rank, kRanks), store);
      ASSERT_TRUE(segments.ok()) << segments.status().ToString();
      int64_t* own = static_cast<int64_t*>((*segments)->own());
      for (int k = 0; k < 4; ++k) own[k] = rank * 100 + k;
      ASSERT_TRUE((*segments)->MapPeers(store).ok());
      EXPECT_TRUE((*segments)->peers_mapped());
      int errors = 0;
      for (int r = 0; r < kRanks; ++r) {
        const int64_t* theirs = static_cast<int64_t*>((*segments)->of(r));
        for (int k = 0; k < 4; ++k) errors += theirs[k] != r * 100 + k;
      }
      wrong[rank] = errors;
      // The mappings outlive the names: they go when the main thread has
      // looked at /dev/shm.
      ASSERT_TRUE(store.Add("test/checked", 1).ok());
      EXPECT_TRUE(store.Wait({"test/done"}, std::chrono::seconds(5)).ok());
    });
  }
  // Every rank unlinked its name once all had mapped every segment.
  while (store.Add("test/checked", 0).value_or(0) < kRanks) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(testing::OwnShmSegments().empty());
  ASSERT_TRUE(store.Set("test/done", "1").ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>(kRanks, 0));
}

TEST(ShmSegmentsTest, ARankThatNeverComesTimesOutAndLeavesNothing) {
  MemoryStore store;
  ShmSegments::Options options = OptionsFor(0, 2);
  options.timeout = std::chrono::milliseconds(100);
  options.populate = true;
  StatusOr<std::unique_ptr<ShmSegments>> segments =
      ShmSegments::Create(options, store);
  ASSERT_TRUE(segments.ok()) << segments.status().ToString();
  EXPECT_EQ(testing::OwnShmSegments().size(), 1u);
  Status mapped = (*segments)->MapPeers(store);
  EXPECT_EQ(mapped.code(), StatusCode::kTimeout) << mapped.ToString();
  EXPECT_THAT(mapped.ToString(), HasSubstr("shm test"));
  EXPECT_FALSE((*segments)->peers_mapped());
  segments->reset();
  EXPECT_TRUE(testing::OwnShmSegments().empty());
}

TEST(ShmSegmentsTest, BadOptionsAreNamed) {
  MemoryStore store;
  ShmSegments::Options options = OptionsFor(2, 2);
  StatusOr<std::unique_ptr<ShmSegments>> segments =
      ShmSegments::Create(options, store);
  EXPECT_EQ(segments.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(segments.status().ToString(), HasSubstr("rank 2 of 2"));
}

}  // namespace
}  // namespace kolo
