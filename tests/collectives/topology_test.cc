// Host topology: the numbering every rank derives from the host identities,
// and the exchange of those identities through the store.
#include "collectives/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "store/memory_store.h"

namespace kolo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// DiscoverTopology as rank `rank` of `size`, under the prefix "hosts".
StatusOr<HostTopology> Discover(Store& store, int32_t rank, int32_t size,
                                const std::string& host_id,
                                int64_t timeout_ms) {
  WorldInfo world;
  world.rank = rank;
  world.size = size;
  return DiscoverTopology(store, "hosts", world, host_id,
                          std::chrono::milliseconds(timeout_ms));
}

TEST(TopologyTest, InterleavedHostsAreNumberedByTheirLowestRank) {
  // Ranks 0 and 2 on "b", 1 and 3 on "a": "b" is host 0 because rank 0 is
  // there.
  const std::vector<std::string> ids = {"b", "a", "b", "a"};
  for (int32_t rank = 0; rank < 4; ++rank) {
    HostTopology t = TopologyFromHostIds(rank, ids);
    EXPECT_EQ(t.world.rank, rank);
    EXPECT_EQ(t.world.size, 4);
    EXPECT_EQ(t.world.cross_size, 2);
    EXPECT_EQ(t.world.cross_rank, rank % 2);
    EXPECT_EQ(t.world.local_size, 2);
    EXPECT_EQ(t.world.local_rank, rank / 2);
    EXPECT_EQ(t.IsLeader(rank), rank < 2);
    EXPECT_THAT(t.host_of_rank, ElementsAre(0, 1, 0, 1));
    EXPECT_THAT(t.ranks_on_host,
                ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3)));
    EXPECT_THAT(t.Leaders(), ElementsAre(0, 1));
    EXPECT_EQ(t.LargestHost(), 2);
  }
}

TEST(TopologyTest, UnevenHostsAndSingleHost) {
  HostTopology uneven = TopologyFromHostIds(3, {"x", "y", "y", "y", "z"});
  EXPECT_EQ(uneven.world.cross_size, 3);
  EXPECT_EQ(uneven.world.cross_rank, 1);
  EXPECT_EQ(uneven.world.local_size, 3);
  EXPECT_EQ(uneven.world.local_rank, 2);
  EXPECT_EQ(uneven.LargestHost(), 3);
  EXPECT_THAT(uneven.Leaders(), ElementsAre(0, 1, 4));

  HostTopology one = TopologyFromHostIds(2, {"h", "h", "h"});
  EXPECT_EQ(one.HostCount(), 1);
  EXPECT_EQ(one.world.local_rank, 2);
  EXPECT_EQ(one.world.local_size, 3);
  EXPECT_EQ(one.world.cross_size, 1);
  EXPECT_FALSE(one.IsLeader(2));
}

TEST(TopologyTest, RanksAgreeThroughTheStore) {
  auto store = std::make_shared<MemoryStore>();
  constexpr int32_t kSize = 4;
  std::vector<StatusOr<HostTopology>> found(kSize, Internal("not run"));
  std::vector<std::thread> threads;
  for (int32_t rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      found[rank] = Discover(*store, rank, kSize, rank < 3 ? "m1" : "m2", 5000);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int32_t rank = 0; rank < kSize; ++rank) {
    ASSERT_TRUE(found[rank].ok()) << found[rank].status().ToString();
    EXPECT_EQ(found[rank]->world.local_size, rank < 3 ? 3 : 1);
    EXPECT_EQ(found[rank]->world.cross_rank, rank < 3 ? 0 : 1);
  }
}

TEST(TopologyTest, AMissingRankIsNamed) {
  MemoryStore store;
  StatusOr<HostTopology> found = Discover(store, 0, 2, "m1", 100);
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().ToString(),
              HasSubstr("waited for rank 1's host identity"));
}

TEST(TopologyTest, EveryRankNamesTheMissingRankThroughRankZero) {
  auto store = std::make_shared<MemoryStore>();
  constexpr int32_t kSize = 3;
  std::vector<StatusOr<HostTopology>> found(kSize, Internal("not run"));
  std::vector<std::thread> threads;
  for (int32_t rank : {0, 2}) {  // rank 1 never publishes
    threads.emplace_back(
        [&, rank] { found[rank] = Discover(*store, rank, kSize, "m1", 200); });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_FALSE(found[0].ok());
  ASSERT_FALSE(found[2].ok());
  EXPECT_THAT(found[0].status().ToString(),
              HasSubstr("rank 0 waited for rank 1's host identity"));
  EXPECT_THAT(found[2].status().ToString(), HasSubstr("rank 2: "));
  EXPECT_THAT(found[2].status().ToString(),
              HasSubstr("waited for rank 1's host identity"));
}

TEST(TopologyTest, AMalformedTableIsReportedNotMisread) {
  MemoryStore store;
  // The second identity claims 3 bytes where 2 remain.
  ASSERT_TRUE(store.Set("hosts/table", "2:m13:m2").ok());
  StatusOr<HostTopology> found = Discover(store, 1, 2, "m2", 100);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kInternal)
      << found.status().ToString();
  EXPECT_THAT(found.status().ToString(), HasSubstr("malformed"));
  // A length too large for any integer is malformed too, not a crash.
  MemoryStore huge;
  ASSERT_TRUE(huge.Set("hosts/table", "2:m199999999999999999999999:m2").ok());
  found = Discover(huge, 1, 2, "m2", 100);
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(found.status().ToString(), HasSubstr("malformed"));
}

}  // namespace
}  // namespace kolo
