// kolo::torch::ParameterServer: the placement (pure), and the protocol in
// real processes under kolorun --servers K: synchronous mode equals data
// parallelism, bounded staleness holds its bound and reaches it,
// asynchronous training halves the loss, and a server's death fails the workers
// with its rank named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "kolo/torch_parameter_server.h"
#include "testing/child_process.h"

namespace kolo {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using testing::RunProgram;
using testing::RunResult;
using torch::ParameterShard;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = PARAMETER_SERVER_WORKER_PATH;

TEST(ParameterServerModeTest, ParsesAndNames) {
  using torch::ParameterServerMode;
  for (ParameterServerMode mode :
       {ParameterServerMode::kSynchronous, ParameterServerMode::kAsynchronous,
        ParameterServerMode::kBoundedStaleness}) {
    EXPECT_EQ(
        *torch::ParseParameterServerMode(torch::ParameterServerModeName(mode)),
        mode);
  }
  EXPECT_EQ(*torch::ParseParameterServerMode("Bounded_Staleness"),
            ParameterServerMode::kBoundedStaleness);
  EXPECT_THAT(torch::ParseParameterServerMode("hogwild").status().message(),
              HasSubstr("sync, async or ssp, got 'hogwild'"));
}

TEST(PlacementTest, LargeTensorsAreSlicedSmallOnesPlacedWholeByName) {
  // FNV-1a 64 of "a": the published test vector.
  EXPECT_EQ(torch::Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  const std::vector<std::string> names = {"big", "small", "odd", "empty"};
  const std::vector<int64_t> numels = {100, 10, 7, 0};
  auto placement = torch::PlaceParameters(names, numels, 3, 7);
  ASSERT_EQ(placement.size(), 3u);
  // Every element of every tensor lies in exactly one shard.
  std::map<std::string, std::vector<int>> covered;
  for (int32_t s = 0; s < 3; ++s) {
    for (const ParameterShard& shard : placement[s]) {
      EXPECT_EQ(shard.server, s);
      EXPECT_EQ(shard.name, names[shard.parameter]);
      auto& hits = covered[shard.name];
      hits.resize(numels[shard.parameter]);
      for (int64_t i = shard.offset; i < shard.offset + shard.count; ++i)
        ++hits[i];
    }
  }
  for (size_t p = 0; p < 3; ++p) {
    ASSERT_EQ(covered[names[p]].size(), static_cast<size_t>(numels[p]));
    for (int hits : covered[names[p]]) EXPECT_EQ(hits, 1) << names[p];
  }
  EXPECT_EQ(covered.count("empty"), 0u);
  // "big" (100 >= 7): slices [0,33), [33,66), [66,100); "odd" (7 >= 7) too.
  std::vector<std::pair<int64_t, int64_t>> big;
  for (int32_t s = 0; s < 3; ++s)
    for (const ParameterShard& shard : placement[s])
      if (shard.name == "big") big.push_back({shard.offset, shard.count});
  EXPECT_EQ(big, (std::vector<std::pair<int64_t, int64_t>>{
                     {0, 33}, {33, 33}, {66, 34}}));
  // With a threshold of 11, "small" (10 elements) is placed whole, on server
  // Fnv1a64("small") % 3.
  auto whole = torch::PlaceParameters(names, numels, 3, 11);
  const int32_t home = static_cast<int32_t>(torch::Fnv1a64("small") % 3);
  bool found = false;
  for (const ParameterShard& shard : whole[home]) {
    if (shard.name == "small") {
      found = true;
      EXPECT_EQ(shard.offset, 0);
      EXPECT_EQ(shard.count, 10);
    }
  }
  EXPECT_TRUE(found);
  // One server holds everything whole.
  auto one = torch::PlaceParameters(names, numels, 1, 7);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].size(), 3u);
}

RunResult Launch(int workers, int servers, const std::string& mode, int steps,
                 int threshold, int staleness, int slow_ms, int kill_ms) {
  return RunProgram({kKolorun, "-np", std::to_string(workers), "--servers",
                     std::to_string(servers), "--timeout", "20", kWorker, mode,
                     std::to_string(steps), std::to_string(threshold),
                     std::to_string(staleness), std::to_string(slow_ms),
                     std::to_string(kill_ms)},
                    {}, std::chrono::seconds(60));
}

int CountMatches(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                    std::sregex_iterator()));
}

// Two workers, one and two servers; with a threshold of 100 elements both
// weights (240 and 120) are sliced across two servers and the biases are
// whole. kolorun tells ranks 0..1 they work and the rest that they serve.
TEST(ParameterServerProcessTest, SynchronousEqualsDataParallelism) {
  for (int servers : {1, 2}) {
    RunResult r = Launch(2, servers, "sync", 5, 100, 0, 0, 0);
    ASSERT_EQ(r.exit_code, 0) << servers << " servers\n" << Describe(r);
    for (int rank = 0; rank < 2 + servers; ++rank) {
      EXPECT_THAT(r.out,
                  HasSubstr("[" + std::to_string(rank) + "]<stdout>: rank " +
                            std::to_string(rank) + ": role " +
                            (rank < 2 ? "worker" : "server") + " of " +
                            std::to_string(servers) + " servers"))
          << Describe(r);
    }
    EXPECT_EQ(CountMatches(r.out, "max parameter difference [0-9.e+-]+"), 2)
        << Describe(r);
    // Every server took exactly one optimizer step per training step.
    EXPECT_EQ(CountMatches(r.out, "server rank [0-9]+: steps 5 "), servers)
        << Describe(r);
  }
}

// Worker 0 sleeps 40 ms a step, worker 1 not at all: worker 1 runs ahead
// until the bound holds it. Each server reports the largest staleness it
// answered a pull with: never above s, and equal to s.
TEST(ParameterServerProcessTest, BoundedStalenessHoldsAndReachesItsBound) {
  for (int s : {1, 2}) {
    RunResult r = Launch(2, 1, "ssp", 8, 100, s, 40, 0);
    ASSERT_EQ(r.exit_code, 0) << "s=" << s << "\n" << Describe(r);
    std::regex line(
        "server rank 2: steps 16 max staleness ([0-9]+) held "
        "([0-9]+)");
    std::smatch match;
    ASSERT_TRUE(std::regex_search(r.out, match, line)) << Describe(r);
    EXPECT_EQ(std::stoi(match[1]), s) << Describe(r);
    EXPECT_GT(std::stoi(match[2]), 0) << Describe(r);
    // Each worker saw at most s.
    std::regex seen("rank [01]: loss .* max staleness ([0-9]+)");
    int workers = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), seen), end;
         it != end; ++it, ++workers) {
      EXPECT_LE(std::stoi((*it)[1]), s) << Describe(r);
    }
    EXPECT_EQ(workers, 2) << Describe(r);
  }
}

// Both workers fit one global batch with updates in arrival order; each
// checks that the loss on it halved (exit 1 otherwise).
TEST(ParameterServerProcessTest, AsynchronousTrainingLowersTheLoss) {
  RunResult r = Launch(2, 2, "async", 30, 100, 0, 0, 0);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(CountMatches(r.out, "rank [01]: loss [0-9.]+ -> [0-9.]+"), 2)
      << Describe(r);
}

// The last server (rank 3) kills itself 600 ms in, while the workers step
// every 5 ms: both workers fail within seconds naming it.
TEST(ParameterServerProcessTest, AServersDeathFailsTheWorkersNamingIt) {
  RunResult r = Launch(2, 2, "sync", 100000, 100, 0, 5, 600);
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_LT(r.seconds, 10) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("rank 3 was killed by signal 9")) << Describe(r);
  EXPECT_GE(CountMatches(r.err,
                         "rank [01]: step [0-9]+: .*parameter server "
                         "rank 3 \\(server 1 of 2, holding"),
            1)
      << Describe(r);
}

}  // namespace
}  // namespace kolo
