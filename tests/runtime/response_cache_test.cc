// Tests the response cache's bits, LRU eviction and its cross-rank
// determinism.
#include "runtime/response_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace kolo {
namespace {

constexpr int32_t kWorldSize = 3;

// An allgather of `name` where rank r contributes `base` + r elements, so
// every rank's spec is different.
std::vector<TensorSpec> SpecsByRank(const std::string& name,
                                    int64_t base = 10) {
  std::vector<TensorSpec> specs(kWorldSize);
  for (int32_t r = 0; r < kWorldSize; ++r) {
    specs[r].name = name;
    specs[r].collective = Collective::kAllgather;
    specs[r].count = base + r;
  }
  return specs;
}

// The bit of `name` as rank 0 sees it, or -1.
int32_t BitOf(const ResponseCache& cache, const std::string& name,
              int64_t base = 10) {
  return cache.Lookup(SpecsByRank(name, base)[0], 0);
}

TEST(ResponseCacheTest, EmptyCacheMisses) {
  ResponseCache cache(4);
  EXPECT_EQ(cache.capacity(), 4);
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(BitOf(cache, "w"), -1);
}

TEST(ResponseCacheTest, PutHitsForEveryRankWithItsOwnSpec) {
  ResponseCache cache(4);
  const std::vector<TensorSpec> specs = SpecsByRank("w");
  cache.Put(specs);
  EXPECT_EQ(cache.size(), 1);
  for (int32_t r = 0; r < kWorldSize; ++r) {
    EXPECT_EQ(cache.Lookup(specs[r], r), 0) << "rank " << r;
  }
  const std::vector<TensorSpec>& stored = cache.SpecsAt(0);
  ASSERT_EQ(stored.size(), static_cast<size_t>(kWorldSize));
  for (int32_t r = 0; r < kWorldSize; ++r) {
    EXPECT_EQ(stored[r].count, 10 + r);
    EXPECT_TRUE(stored[r] == specs[r]);
  }
}

TEST(ResponseCacheTest, AnotherRanksSpecMisses) {
  ResponseCache cache(4);
  const std::vector<TensorSpec> specs = SpecsByRank("w");
  cache.Put(specs);
  EXPECT_EQ(cache.Lookup(specs[1], 0), -1);
  EXPECT_EQ(cache.Lookup(specs[0], 2), -1);
  EXPECT_EQ(cache.Lookup(specs[0], kWorldSize), -1);  // no such rank
}

TEST(ResponseCacheTest, ChangedSpecMisses) {
  ResponseCache cache(4);
  cache.Put(SpecsByRank("w"));
  TensorSpec changed = SpecsByRank("w")[1];
  changed.type = DataType::kFloat64;
  EXPECT_EQ(cache.Lookup(changed, 1), -1);
  changed = SpecsByRank("w")[1];
  changed.count += 1;
  EXPECT_EQ(cache.Lookup(changed, 1), -1);
  EXPECT_EQ(cache.Lookup(SpecsByRank("w")[1], 1), 0);
}

TEST(ResponseCacheTest, PutOfTheSameNameReplacesInPlace) {
  ResponseCache cache(4);
  cache.Put(SpecsByRank("a"));
  cache.Put(SpecsByRank("w", 10));
  cache.Put(SpecsByRank("w", 20));
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(BitOf(cache, "w", 10), -1);
  EXPECT_EQ(BitOf(cache, "w", 20), 1);
  EXPECT_EQ(cache.SpecsAt(1)[2].count, 22);
}

TEST(ResponseCacheTest, FullCacheEvictsTheLeastRecentlyUsedAndReusesItsBit) {
  ResponseCache cache(3);
  cache.Put(SpecsByRank("a"));
  cache.Put(SpecsByRank("b"));
  cache.Put(SpecsByRank("c"));
  EXPECT_EQ(BitOf(cache, "a"), 0);
  EXPECT_EQ(BitOf(cache, "b"), 1);
  EXPECT_EQ(BitOf(cache, "c"), 2);

  cache.Put(SpecsByRank("d"));
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(BitOf(cache, "a"), -1);
  EXPECT_EQ(BitOf(cache, "d"), 0);
  EXPECT_EQ(BitOf(cache, "b"), 1);
  EXPECT_EQ(BitOf(cache, "c"), 2);
}

TEST(ResponseCacheTest, PutOfAnExistingNameRefreshesItsRecency) {
  ResponseCache cache(3);
  cache.Put(SpecsByRank("a"));
  cache.Put(SpecsByRank("b"));
  cache.Put(SpecsByRank("c"));
  cache.Put(SpecsByRank("a"));  // now b is the least recently used
  cache.Put(SpecsByRank("d"));
  EXPECT_EQ(BitOf(cache, "a"), 0);
  EXPECT_EQ(BitOf(cache, "b"), -1);
  EXPECT_EQ(BitOf(cache, "d"), 1);
  EXPECT_EQ(BitOf(cache, "c"), 2);
}

TEST(ResponseCacheTest, LookupDoesNotRefreshRecency) {
  // Lookups are per rank, so letting them touch entries would let the
  // ranks' caches drift apart.
  ResponseCache cache(2);
  cache.Put(SpecsByRank("a"));
  cache.Put(SpecsByRank("b"));
  EXPECT_EQ(BitOf(cache, "a"), 0);
  cache.Put(SpecsByRank("c"));
  EXPECT_EQ(BitOf(cache, "a"), -1);
  EXPECT_EQ(BitOf(cache, "c"), 0);
  EXPECT_EQ(BitOf(cache, "b"), 1);
}

TEST(ResponseCacheTest, EraseFreesTheBitForTheNextPut) {
  ResponseCache cache(3);
  cache.Put(SpecsByRank("a"));
  cache.Put(SpecsByRank("b"));
  cache.Put(SpecsByRank("c"));
  cache.Erase("b");
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(BitOf(cache, "b"), -1);
  // b's bit is free, so d takes it although a is older.
  cache.Put(SpecsByRank("d"));
  EXPECT_EQ(BitOf(cache, "d"), 1);
  EXPECT_EQ(BitOf(cache, "a"), 0);
  EXPECT_EQ(BitOf(cache, "c"), 2);
}

TEST(ResponseCacheTest, EraseOfAnUnknownNameChangesNothing) {
  ResponseCache cache(2);
  cache.Put(SpecsByRank("a"));
  cache.Erase("zzz");
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(BitOf(cache, "a"), 0);
}

TEST(ResponseCacheTest, CapacityZeroNeverCaches) {
  for (int32_t capacity : {0, -5}) {
    ResponseCache cache(capacity);
    EXPECT_EQ(cache.capacity(), 0);
    cache.Put(SpecsByRank("a"));
    cache.Put(SpecsByRank("a"));
    EXPECT_EQ(cache.size(), 0);
    EXPECT_EQ(BitOf(cache, "a"), -1);
    cache.Erase("a");
    EXPECT_EQ(cache.size(), 0);
  }
}

// A reference model of the documented behaviour: a new name takes the
// lowest free bit, else the bit of the least recently put name.
class ModelCache {
 public:
  explicit ModelCache(int32_t capacity) : capacity_(capacity) {}
  void Put(const std::string& name) {
    auto it = bit_.find(name);
    if (it == bit_.end()) {
      int32_t bit = -1;
      for (int32_t b = 0; b < capacity_ && bit < 0; ++b) {
        if (std::none_of(bit_.begin(), bit_.end(), [b](const auto& entry) {
              return entry.second == b;
            })) {
          bit = b;
        }
      }
      if (bit < 0) {
        std::string oldest = recency_.front();
        bit = bit_.at(oldest);
        bit_.erase(oldest);
        recency_.erase(recency_.begin());
      }
      bit_[name] = bit;
    } else {
      recency_.erase(std::find(recency_.begin(), recency_.end(), name));
    }
    recency_.push_back(name);
  }
  void Erase(const std::string& name) {
    if (bit_.erase(name) == 0) return;
    recency_.erase(std::find(recency_.begin(), recency_.end(), name));
  }
  int32_t BitOf(const std::string& name) const {
    auto it = bit_.find(name);
    return it == bit_.end() ? -1 : it->second;
  }

 private:
  int32_t capacity_;
  std::map<std::string, int32_t> bit_;
  std::vector<std::string> recency_;  // least recently put first
};

TEST(ResponseCacheTest, CachesFedTheSameSequenceAgreeOnEveryBit) {
  constexpr int32_t kCapacity = 4;
  constexpr int kNames = 9;
  ResponseCache first(kCapacity);
  ResponseCache second(kCapacity);
  ModelCache model(kCapacity);
  for (int step = 0; step < 200; ++step) {
    // A fixed pseudo-random walk over puts and erases.
    const std::string name =
        "t" + std::to_string((step * 7 + step / 5) % kNames);
    if (step % 6 == 5) {
      first.Erase(name);
      second.Erase(name);
      model.Erase(name);
    } else {
      first.Put(SpecsByRank(name));
      second.Put(SpecsByRank(name));
      model.Put(name);
    }
    ASSERT_EQ(first.size(), second.size()) << "step " << step;
    ASSERT_LE(first.size(), kCapacity);
    for (int n = 0; n < kNames; ++n) {
      const std::string probe = "t" + std::to_string(n);
      for (int32_t r = 0; r < kWorldSize; ++r) {
        const TensorSpec spec = SpecsByRank(probe)[r];
        ASSERT_EQ(first.Lookup(spec, r), second.Lookup(spec, r))
            << "step " << step << " name " << probe << " rank " << r;
        ASSERT_EQ(first.Lookup(spec, r), model.BitOf(probe))
            << "step " << step << " name " << probe << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace kolo
