// The hierarchical backend with ranks as threads over a MemoryStore,
// playing several hosts through their host identities: shm inside each
// "host", Gloo (kolo's tcp engine where Gloo is not built) over loopback
// between the leaders. Every result has a closed form in the ranks, so a
// stage that is skipped or reduces twice shows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "collectives/backend.h"
#include "collectives/topology.h"
#include "store/memory_store.h"
#include "testing/engines.h"

namespace kolo {
namespace {

// Runs `body` on every rank of a job whose rank r lives on host_ids[r], and
// returns each rank's count of wrong values (or of failed calls).
std::vector<int> RunHierarchical(
    const std::vector<std::string>& host_ids,
    const std::function<int(Backend&, int32_t rank, int32_t size)>& body) {
  const int32_t size = static_cast<int32_t>(host_ids.size());
  auto store = std::make_shared<MemoryStore>();
  std::vector<int> wrong(size, 0);
  std::vector<std::thread> threads;
  for (int32_t rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      const HostTopology topology = TopologyFromHostIds(rank, host_ids);
      BackendOptions options;
      options.world = topology.world;
      options.store_prefix = "hierarchical-test";
      options.shm_area_bytes = 4096;  // every large call takes many shm rounds
      options.timeout = std::chrono::milliseconds(20000);
      options.job_secret = testing::kTestJobSecret;
      StatusOr<std::unique_ptr<Backend>> backend = CreateHierarchicalBackend(
          options, store, topology, testing::NetworkEngine());
      if (!backend.ok()) {
        ADD_FAILURE() << "rank " << rank << ": " << backend.status().ToString();
        wrong[rank] = 1;
        return;
      }
      wrong[rank] = body(**backend, rank, size);
    });
  }
  for (std::thread& t : threads) t.join();
  return wrong;
}

class HierarchicalBackendTest
    : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(HierarchicalBackendTest, AllreduceSumsOverEveryRankOfEveryHost) {
  std::vector<int> wrong = RunHierarchical(
      GetParam(), [](Backend& backend, int32_t rank, int32_t size) {
        int bad = 0;
        // Out of place, float32, many shm areas long: element i of rank r is r
        // + i % 100.
        constexpr int64_t kCount = 10000;
        std::vector<float> data(kCount), sum(kCount, 0.f);
        for (int64_t i = 0; i < kCount; ++i)
          data[i] = static_cast<float>(rank + i % 100);
        if (!backend
                 .Allreduce(data.data(), sum.data(), kCount, DataType::kFloat32,
                            ReduceOp::kSum)
                 .ok()) {
          return 1;
        }
        for (int64_t i = 0; i < kCount; ++i) {
          if (sum[i] !=
              static_cast<float>(size * (size - 1) / 2 + size * (i % 100)))
            ++bad;
        }
        // In place, int32, max: element i of rank r is 10 r + i.
        std::vector<int32_t> values(7);
        for (int32_t i = 0; i < 7; ++i) values[i] = 10 * rank + i;
        if (!backend
                 .Allreduce(values.data(), values.data(), 7, DataType::kInt32,
                            ReduceOp::kMax)
                 .ok()) {
          return bad + 1;
        }
        for (int32_t i = 0; i < 7; ++i) {
          if (values[i] != 10 * (size - 1) + i) ++bad;
        }
        // The flat path: rank r contributes r + 1 copies of r.
        std::vector<int64_t> counts(size);
        for (int32_t r = 0; r < size; ++r) counts[r] = r + 1;
        std::vector<int32_t> mine(rank + 1, rank);
        std::vector<int32_t> gathered(size * (size + 1) / 2, -1);
        if (!backend
                 .Allgatherv(mine.data(), gathered.data(), counts,
                             DataType::kInt32)
                 .ok()) {
          return bad + 1;
        }
        size_t at = 0;
        for (int32_t r = 0; r < size; ++r) {
          for (int32_t k = 0; k <= r; ++k) bad += gathered[at++] != r;
        }
        return bad;
      });
  for (size_t rank = 0; rank < wrong.size(); ++rank) {
    EXPECT_EQ(wrong[rank], 0) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hosts, HierarchicalBackendTest,
    ::testing::Values(
        std::vector<std::string>{"a", "b", "a", "b"},   // 2 x 2, interleaved
        std::vector<std::string>{"x", "y", "y"},        // 1 + 2
        std::vector<std::string>{"p", "p", "q", "q"}),  // 2 x 2, in blocks
    [](const ::testing::TestParamInfo<std::vector<std::string>>& info) {
      std::string name;
      for (const std::string& id : info.param) name += id;
      return name;
    });

TEST(HierarchicalBackendErrorTest, ShmIsNotANetworkEngine) {
  const HostTopology topology = TopologyFromHostIds(0, {"a", "b"});
  BackendOptions options;
  options.world = topology.world;
  StatusOr<std::unique_ptr<Backend>> backend = CreateHierarchicalBackend(
      options, std::make_shared<MemoryStore>(), topology, BackendKind::kShm);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().ToString(),
              ::testing::HasSubstr("network engine (tcp, gloo or mpi)"));
}

}  // namespace
}  // namespace kolo
