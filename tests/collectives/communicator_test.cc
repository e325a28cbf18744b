// Communicator with ranks as threads: Gloo over loopback TCP, rendezvous
// through an in-memory store. The multi-process runs under kolorun live in
// tests/integration/.
#include "collectives/communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "store/memory_store.h"
#include "testing/collective_matrix.h"

namespace kolo {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Creates `size` communicators concurrently (rendezvous needs all of them).
std::vector<std::unique_ptr<Communicator>> MakeWorld(
    int32_t size, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::future<StatusOr<std::unique_ptr<Communicator>>>> pending;
  for (int32_t r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      CommunicatorOptions options;
      options.world = WorldInfo{r, size, r, size, 0, 1};
      options.timeout = timeout;
      return Communicator::Create(options, store);
    }));
  }
  std::vector<std::unique_ptr<Communicator>> world;
  for (auto& p : pending) {
    auto c = p.get();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) world.push_back(std::move(c).value());
  }
  return world;
}

// Runs fn(rank, communicator) on one thread per rank; returns their results.
template <typename Fn>
auto OnEveryRank(std::vector<std::unique_ptr<Communicator>>& world, Fn fn) {
  using Result = decltype(fn(0, *world[0]));
  std::vector<std::future<Result>> pending;
  for (size_t r = 0; r < world.size(); ++r) {
    pending.push_back(std::async(std::launch::async,
                                 [&, r] { return fn(static_cast<int32_t>(r), *world[r]); }));
  }
  std::vector<Result> results;
  for (auto& p : pending) results.push_back(p.get());
  return results;
}

class CommunicatorMatrixTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(CommunicatorMatrixTest, EveryCollectiveEveryTypeMatchesClosedForm) {
  const int32_t size = GetParam();
  auto world = MakeWorld(size);
  ASSERT_EQ(world.size(), static_cast<size_t>(size));
  auto results = OnEveryRank(world, [](int32_t, Communicator& c) {
    std::string report;
    for (DataType type : AllDataTypes()) {
      for (int64_t count : {0, 1, 7, 1000}) {
        report += testing::RunCollectiveMatrix(c, c.world(), type, count).Summary();
      }
    }
    return report;
  });
  for (int32_t r = 0; r < size; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommunicatorMatrixTest, ::testing::Values(1, 2, 3, 4));

TEST(CommunicatorTest, DifferentCountsFailOnEveryRankNamingTheRanks) {
  auto world = MakeWorld(3);
  auto results = OnEveryRank(world, [](int32_t rank, Communicator& c) {
    std::vector<float> data(16, 1.0f);
    const int64_t count = rank == 1 ? 12 : 10;
    return c.Allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
  });
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_THAT(s.message(), AllOf(HasSubstr("allreduce"), HasSubstr("element count"),
                                   HasSubstr("ranks 0,2 have 10"), HasSubstr("rank 1 has 12")));
  }
  // The ranks agreed on the failure, so the communicator still works.
  auto after = OnEveryRank(world, [](int32_t, Communicator& c) {
    float x = 1.0f;
    Status s = c.Allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
    return s.ok() ? x : -1.0f;
  });
  for (float x : after) EXPECT_EQ(x, 3.0f);
}

TEST(CommunicatorTest, DifferentCollectivesAndTypesAreNamed) {
  auto world = MakeWorld(2);
  auto results = OnEveryRank(world, [](int32_t rank, Communicator& c) {
    std::vector<float> data(8, 1.0f);
    if (rank == 0) return c.Broadcast(data.data(), data.data(), 8, DataType::kFloat32, 0);
    return c.Allreduce(data.data(), data.data(), 8, DataType::kFloat32, ReduceOp::kSum);
  });
  for (const Status& s : results) {
    EXPECT_THAT(s.message(), AllOf(HasSubstr("collective"), HasSubstr("rank 0 has broadcast"),
                                   HasSubstr("rank 1 has allreduce")));
  }
  auto types = OnEveryRank(world, [](int32_t rank, Communicator& c) {
    std::vector<double> data(8, 1.0);
    return c.Allreduce(data.data(), data.data(), 4,
                       rank == 0 ? DataType::kFloat64 : DataType::kInt64, ReduceOp::kMax);
  });
  for (const Status& s : types) {
    EXPECT_THAT(s.message(), AllOf(HasSubstr("data type"), HasSubstr("rank 0 has float64"),
                                   HasSubstr("rank 1 has int64")));
  }
}

TEST(CommunicatorTest, InvalidArgumentsOnOneRankFailAllWithoutHanging) {
  auto world = MakeWorld(2);
  auto results = OnEveryRank(world, [](int32_t rank, Communicator& c) {
    std::vector<int32_t> data(4, 1);
    return c.Broadcast(data.data(), data.data(), rank == 1 ? -3 : 4, DataType::kInt32, 0);
  });
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), AllOf(HasSubstr("rank 1"), HasSubstr("negative element count -3")));
  }
}

TEST(CommunicatorTest, AllgathervAndAlltoallvCountMismatchesAreNamed) {
  auto world = MakeWorld(2);
  auto gathered = OnEveryRank(world, [](int32_t rank, Communicator& c) {
    std::vector<float> send(8), recv(16);
    // Rank 1 sends 5 but everyone expects 4 from it.
    return c.Allgatherv(send.data(), rank == 1 ? 5 : 4, recv.data(), {4, 4}, DataType::kFloat32);
  });
  for (const Status& s : gathered) {
    EXPECT_THAT(s.message(), HasSubstr("rank 1 sends 5 elements but recv_counts[1] is 4"));
  }
  auto exchanged = OnEveryRank(world, [](int32_t rank, Communicator& c) {
    std::vector<float> send(8), recv(8);
    std::vector<int64_t> sends = {2, 2};
    std::vector<int64_t> recvs = rank == 0 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2, 2};
    return c.Alltoallv(send.data(), sends, recv.data(), recvs, DataType::kFloat32);
  });
  for (const Status& s : exchanged) {
    EXPECT_THAT(s.message(), HasSubstr("rank 1 sends 2 elements to rank 0, which expects 3"));
  }
}

TEST(CommunicatorTest, PeerThatLeavesIsAStickyPeerFailure) {
  auto world = MakeWorld(2, std::chrono::seconds(10));
  // Rank 1 disappears: its connections close, as when a process dies.
  world[1].reset();
  std::vector<float> data(1024, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  Status first = world[0]->Allreduce(data.data(), data.data(), data.size(),
                                     DataType::kFloat32, ReduceOp::kSum);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(9));
  EXPECT_TRUE(first.code() == StatusCode::kPeerFailure || first.code() == StatusCode::kTimeout)
      << first.ToString();
  EXPECT_THAT(first.message(), HasSubstr("allreduce #1 failed"));
  Status second = world[0]->Barrier();
  EXPECT_EQ(second.ToString(), first.ToString());
}

}  // namespace
}  // namespace kolo
