// The TCP backend with ranks as threads over a MemoryStore, beyond the
// conformance suite (tests/collectives/backend_conformance_test.cc, which
// checks its results in closed forms): how its failures read, that every
// rank ends with the same bits where the reduction is inexact, and that the
// hierarchical backend runs on it between hosts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "collectives/backend.h"
#include "collectives/topology.h"
#include "store/memory_store.h"
#include "testing/engines.h"
#include "testing/timing.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

BackendOptions OptionsFor(int32_t rank, int32_t size,
                          std::chrono::milliseconds timeout) {
  BackendOptions options;
  options.world = WorldInfo{rank, size, rank, size, 0, 1};
  options.timeout = timeout;
  options.job_secret = testing::kTestJobSecret;
  options.store_prefix = "tcp-test";
  return options;
}

std::vector<std::unique_ptr<Backend>> CreateWorld(
    int32_t size, std::chrono::milliseconds timeout) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::future<StatusOr<std::unique_ptr<Backend>>>> pending;
  for (int32_t r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      return CreateTcpBackend(OptionsFor(r, size, timeout), store);
    }));
  }
  std::vector<std::unique_ptr<Backend>> backends;
  for (int32_t r = 0; r < size; ++r) {
    StatusOr<std::unique_ptr<Backend>> backend = pending[r].get();
    EXPECT_TRUE(backend.ok())
        << "rank " << r << ": " << backend.status().ToString();
    backends.push_back(backend.ok() ? std::move(backend).value() : nullptr);
  }
  return backends;
}

// Runs body(rank) on every rank at once; the statuses in rank order.
std::vector<Status> OnEveryRank(int32_t size,
                                const std::function<Status(int32_t)>& body) {
  std::vector<Status> results(size);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < size; ++r)
    threads.emplace_back([&, r] { results[r] = body(r); });
  for (std::thread& t : threads) t.join();
  return results;
}

std::string Peer(int rank) {
  return "rank " + std::to_string(rank) + " \\(127\\.0\\.0\\.1:[0-9]+\\)";
}

// Rank 1 goes away while rank 0 is in an allreduce (a large one, still
// moving): rank 0 learns at once, with the rank and address of the peer
// that closed, and every later call returns that same error.
TEST(TcpBackendTest, APeerThatClosesMidCallIsNamedAndTheErrorSticks) {
  auto world = CreateWorld(2, testing::kFastFailTimeout);
  ASSERT_TRUE(world[0] && world[1]);
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    world[1].reset();
  });
  std::vector<float> data(16 << 20, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  Status lost = world[0]->Allreduce(data.data(), data.data(), data.size(),
                                    DataType::kFloat32, ReduceOp::kSum);
  leaver.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, testing::kFastFailBound);
  EXPECT_EQ(lost.code(), StatusCode::kPeerFailure) << lost.ToString();
  EXPECT_THAT(
      lost.message(),
      MatchesRegex(Peer(1) + " closed the connection during allreduce"));

  const auto again_start = std::chrono::steady_clock::now();
  for (Status again :
       {world[0]->Barrier(),
        world[0]->Broadcast(data.data(), 10, DataType::kFloat32, 0),
        world[0]->Allreduce(data.data(), data.data(), 10, DataType::kFloat32,
                            ReduceOp::kSum)}) {
    EXPECT_EQ(again.code(), lost.code());
    EXPECT_EQ(again.message(), lost.message());
  }
  // Sticky: none of them waited on the network for the timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - again_start,
            testing::kFastFailBound);
}

// On a ring of three, rank 1 goes away: rank 2, which receives from it,
// names it; rank 0 fails too, well before the timeout, because a rank that
// fails shuts its connections.
TEST(TcpBackendTest, APeerThatClosesFailsTheWholeRing) {
  auto world = CreateWorld(3, testing::kFastFailTimeout);
  ASSERT_TRUE(world[0] && world[1] && world[2]);
  std::vector<std::vector<float>> data(3, std::vector<float>(1 << 20, 1.0f));
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> results = OnEveryRank(3, [&](int32_t r) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      world[1].reset();
      return Status::Ok();
    }
    return world[r]->Allreduce(data[r].data(), data[r].data(), data[r].size(),
                               DataType::kFloat32, ReduceOp::kSum);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, testing::kFastFailBound);
  EXPECT_EQ(results[2].code(), StatusCode::kPeerFailure)
      << results[2].ToString();
  EXPECT_THAT(
      results[2].message(),
      MatchesRegex(Peer(1) + " closed the connection during allreduce"));
  EXPECT_EQ(results[0].code(), StatusCode::kPeerFailure)
      << results[0].ToString();
  EXPECT_THAT(results[0].message(),
              MatchesRegex("rank [12] .* closed the connection during "
                           "allreduce"));
}

// Rank 1 is connected but never calls: rank 0 gives up once the timeout
// has passed, naming it; rank 1's own call then finds rank 0 gone.
TEST(TcpBackendTest, ASilentPeerTimesOutNamingIt) {
  auto world = CreateWorld(2, std::chrono::milliseconds(500));
  ASSERT_TRUE(world[0] && world[1]);
  std::vector<float> data(1024, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  Status silent = world[0]->Allreduce(data.data(), data.data(), data.size(),
                                      DataType::kFloat32, ReduceOp::kSum);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(500));
  EXPECT_LT(waited, std::chrono::milliseconds(500) + testing::kSchedulingSlack);
  EXPECT_EQ(silent.code(), StatusCode::kTimeout) << silent.ToString();
  EXPECT_THAT(silent.message(),
              MatchesRegex(Peer(1) + " sent nothing for 500 ms during "
                                     "allreduce"));
  Status again = world[0]->Allgatherv(data.data(), data.data(), {1, 1},
                                      DataType::kFloat32);
  EXPECT_EQ(again.message(), silent.message());

  // Rank 0's half of the exchange may already sit in rank 1's socket, so
  // rank 1's allreduce may still complete; its next call cannot.
  Status late = world[1]->Allreduce(data.data(), data.data(), data.size(),
                                    DataType::kFloat32, ReduceOp::kSum);
  if (late.ok()) late = world[1]->Barrier();
  EXPECT_EQ(late.code(), StatusCode::kPeerFailure) << late.ToString();
  EXPECT_THAT(late.message(), HasSubstr("rank 0 ("));
}

// Floats of every magnitude and sign, so that the sum depends on the order
// of the additions: the value of element i on rank r.
std::vector<float> AwkwardValues(int32_t rank, int64_t count) {
  std::mt19937 random(1234 + rank);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-24, 24);
  std::vector<float> values(count);
  for (float& v : values) {
    v = std::ldexp(mantissa(random), exponent(random)) *
        (random() % 2 == 0 ? 1.0f : -1.0f);
  }
  return values;
}

struct BitsCase {
  int32_t ranks;
  int64_t count;
  bool in_place;
};

class TcpBitIdentityTest : public ::testing::TestWithParam<BitsCase> {};

// Every rank ends with the same bits, for small buffers (recursive doubling
// on 2 and 4 ranks, ring on 3) and large ones (ring, many pieces per
// block; at 2000003 elements the scratch slots are reused many times), and
// the result is the sum to within float rounding.
TEST_P(TcpBitIdentityTest, EveryRankEndsWithTheSameBits) {
  const BitsCase& c = GetParam();
  auto world = CreateWorld(c.ranks, std::chrono::milliseconds(20000));
  for (auto& b : world) ASSERT_TRUE(b);
  std::vector<std::vector<float>> inputs, outputs(c.ranks);
  for (int32_t r = 0; r < c.ranks; ++r)
    inputs.push_back(AwkwardValues(r, c.count));
  const std::vector<std::vector<float>> original = inputs;
  std::vector<Status> results = OnEveryRank(c.ranks, [&](int32_t r) {
    float* out = inputs[r].data();
    if (!c.in_place) {
      outputs[r].resize(c.count);
      out = outputs[r].data();
    }
    return world[r]->Allreduce(inputs[r].data(), out, c.count,
                               DataType::kFloat32, ReduceOp::kSum);
  });
  for (int32_t r = 0; r < c.ranks; ++r) {
    ASSERT_TRUE(results[r].ok())
        << "rank " << r << ": " << results[r].ToString();
    if (c.in_place) outputs[r] = inputs[r];
  }
  for (int32_t r = 1; r < c.ranks; ++r) {
    EXPECT_EQ(std::memcmp(outputs[r].data(), outputs[0].data(),
                          c.count * sizeof(float)),
              0)
        << "rank " << r << " differs from rank 0";
  }
  int64_t far = 0;
  for (int64_t i = 0; i < c.count; ++i) {
    double sum = 0, magnitude = 0;
    for (int32_t r = 0; r < c.ranks; ++r) {
      sum += original[r][i];
      magnitude += std::fabs(original[r][i]);
    }
    if (std::fabs(outputs[0][i] - sum) > magnitude * 1e-6) ++far;
  }
  EXPECT_EQ(far, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, TcpBitIdentityTest,
    ::testing::Values(BitsCase{2, 1001, false}, BitsCase{2, 300007, true},
                      BitsCase{2, 2000003, false}, BitsCase{3, 2000003, true},
                      BitsCase{3, 1001, false}, BitsCase{3, 1001, true},
                      BitsCase{3, 300007, false}, BitsCase{3, 300007, true},
                      BitsCase{4, 1001, false}, BitsCase{4, 1001, true},
                      BitsCase{4, 300007, false}, BitsCase{4, 300007, true}),
    [](const ::testing::TestParamInfo<BitsCase>& info) {
      return std::to_string(info.param.ranks) + "ranks_count" +
             std::to_string(info.param.count) +
             (info.param.in_place ? "_in_place" : "_out_of_place");
    });

// Two "hosts" of two ranks each (hosts interleave ranks), tcp between the
// leaders and as the flat engine: every rank gets the sum of all four.
TEST(TcpBackendTest, HierarchicalAllreduceRunsOverTcp) {
  const std::vector<std::string> host_ids = {"a", "b", "a", "b"};
  auto store = std::make_shared<MemoryStore>();
  std::vector<Status> results = OnEveryRank(4, [&](int32_t rank) -> Status {
    const HostTopology topology = TopologyFromHostIds(rank, host_ids);
    BackendOptions options;
    options.world = topology.world;
    options.store_prefix = "hierarchical-tcp";
    options.shm_area_bytes = 4096;
    options.timeout = std::chrono::milliseconds(20000);
    options.job_secret = testing::kTestJobSecret;
    KOLO_ASSIGN_OR_RETURN(
        std::unique_ptr<Backend> backend,
        CreateHierarchicalBackend(options, store, topology, BackendKind::kTcp));
    std::vector<int32_t> values(100003);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = rank * 1000 + static_cast<int32_t>(i % 1000);
    KOLO_RETURN_IF_ERROR(backend->Allreduce(values.data(), values.data(),
                                            values.size(), DataType::kInt32,
                                            ReduceOp::kSum));
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != 6000 + 4 * static_cast<int32_t>(i % 1000))
        return Internal("rank " + std::to_string(rank) + ": element " +
                        std::to_string(i) + " is " + std::to_string(values[i]));
    }
    return backend->Barrier();
  });
  for (int32_t r = 0; r < 4; ++r)
    EXPECT_TRUE(results[r].ok()) << results[r].ToString();
}

}  // namespace
}  // namespace kolo
