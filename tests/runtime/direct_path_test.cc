// The direct path with ranks as threads: the shm engine under the runtime,
// a DirectPath beside it, rendezvous through an in-memory store. The
// multi-process cases (a rank that dies, freezes or never calls while the
// others wait in a lease) live in tests/integration/collectives_test.cc.
#include "runtime/direct_path.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "runtime/runtime.h"
#include "runtime/synchronous.h"
#include "store/memory_store.h"
#include "testing/collective_matrix.h"
#include "testing/runtime_world.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

using Rank = testing::RuntimeRank;
using World = testing::RuntimeWorld;
using testing::OnEveryRank;

Status Allreduce(Rank& r, float* data, int64_t count) {
  return r.sync->Allreduce(data, data, count, DataType::kFloat32,
                           ReduceOp::kSum);
}
int64_t DirectCalls(const Rank& r) {
  return r.runtime->stats().direct_operations;
}

TensorSpec AllreduceSpecFor(const std::string& name, int64_t count) {
  TensorSpec spec = MakeSpec(Collective::kAllreduce, DataType::kFloat32, count);
  spec.name = name;
  return spec;
}

// `size` runtimes on shm, each with a direct path unless `direct` is false.
World MakeWorld(int32_t size, bool direct = true,
                const std::string& timeline = "") {
  auto store = std::make_shared<MemoryStore>();
  return testing::StartWorld(
      size, [=](int32_t r) -> StatusOr<std::unique_ptr<Runtime>> {
        RuntimeOptions options;
        options.world = WorldInfo{r, size, r, size, 0, 1};
        options.timeout = std::chrono::seconds(20);
        options.timeline_path = timeline;
        BackendOptions b;
        b.world = options.world;
        b.timeout = options.timeout;
        b.store_prefix = "shm";
        b.shm_area_bytes = 64 * 1024;
        KOLO_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                              CreateShmBackend(b, store));
        std::unique_ptr<DirectPath> path;
        if (direct) {
          DirectPath::Options d;
          d.world = options.world;
          d.timeout = options.timeout;
          d.shm_area_bytes = 64 * 1024;
          KOLO_ASSIGN_OR_RETURN(path, DirectPath::Create(d, store));
        }
        return Runtime::Start(options, std::move(backend), store,
                              std::move(path));
      });
}

// Back-to-back allreduces of rank + 1; "" when every sum was right.
std::string SumsOfRanks(int32_t rank, Rank& r, int calls) {
  const int32_t size = r.runtime->world().size;
  for (int i = 0; i < calls; ++i) {
    float x = static_cast<float>(rank + 1);
    Status s = Allreduce(r, &x, 1);
    if (!s.ok()) return s.ToString();
    if (x != size * (size + 1) / 2)
      return "call " + std::to_string(i) + " gave " + std::to_string(x);
  }
  return "";
}

// Ten right sums, after which the lease is open: "" when all went so.
std::string WarmUpIntoALease(int32_t rank, Rank& r) {
  if (std::string sums = SumsOfRanks(rank, r, 10); !sums.empty()) return sums;
  return DirectCalls(r) == 0 ? "no call took the direct path" : "";
}

class DirectPathMatrixTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(DirectPathMatrixTest,
       EveryCollectiveEveryTypeMatchesClosedFormWithoutTheRuntimesThread) {
  const int32_t size = GetParam();
  World world = MakeWorld(size);
  ASSERT_EQ(world.size(), static_cast<size_t>(size));
  auto results = OnEveryRank(world, [](int32_t, Rank& rank) {
    std::string report;
    for (DataType type : AllDataTypes()) {
      for (int64_t count : {0, 1, 7, 1000, 40000}) {
        report += testing::RunCollectiveMatrix(
                      *rank.sync, rank.runtime->world(), type, count)
                      .Summary();
      }
    }
    return report;
  });
  for (int32_t r = 0; r < size; ++r) {
    EXPECT_EQ(results[r], "") << "rank " << r;
    // Only calls that found the lease closed (the first, at least) went
    // through the runtime's thread.
    const RuntimeStats stats = world[r].runtime->stats();
    EXPECT_GT(stats.direct_operations, stats.operations * 9 / 10)
        << "rank " << r << ": " << stats.direct_operations << " of "
        << stats.operations;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DirectPathMatrixTest,
                         ::testing::Values(2, 3, 4));

// Allreduces under 64 KiB travel in the posts and reduce from them; the
// engine reduces from its own segments. Both fold in rank order, so the
// bits agree, at the posts' largest size and the engine's smallest, with
// calls of the engine's in between (the posts alternate areas by slot).
TEST(DirectPathTest, AllreducesInThePostsGiveTheEnginesBits) {
  constexpr int32_t kSize = 3;
  // 16383 floats are the posts' largest allreduce, 16384 (64 KiB) the
  // direct path's engine's smallest.
  const std::vector<int64_t> counts = {1, 5, 1000, 16383, 16384, 3};
  World world = MakeWorld(kSize);
  ASSERT_EQ(world.size(), static_cast<size_t>(kSize));
  auto results = OnEveryRank(world, [&](int32_t rank, Rank& r) -> std::string {
    if (std::string warm = WarmUpIntoALease(rank, r); !warm.empty())
      return warm;
    std::mt19937 mine(300 + rank);
    std::uniform_real_distribution<float> value(-3.0f, 3.0f);
    std::vector<std::vector<float>> inputs, direct;
    // Back to back, so that no call leaves the lease.
    const int64_t before = DirectCalls(r);
    for (ReduceOp op : AllReduceOps()) {
      for (int64_t count : counts) {
        inputs.emplace_back(count);
        for (float& x : inputs.back()) x = value(mine);
        direct.emplace_back(count, 0.0f);
        Status s = r.sync->Allreduce(inputs.back().data(), direct.back().data(),
                                     count, DataType::kFloat32, op);
        if (!s.ok()) return s.ToString();
      }
    }
    if (DirectCalls(r) - before != static_cast<int64_t>(inputs.size()))
      return std::to_string(DirectCalls(r) - before) + " of " +
             std::to_string(inputs.size()) + " calls took the direct path";
    // The same reductions through the runtime's engine, in place.
    size_t call = 0;
    for (ReduceOp op : AllReduceOps()) {
      for (int64_t count : counts) {
        std::vector<float> engine = inputs[call];
        TensorSpec spec =
            AllreduceSpecFor("engine." + std::to_string(call), count);
        spec.op = op;
        StatusOr<Handle> h =
            r.runtime->Enqueue(spec, engine.data(), engine.data(), nullptr);
        if (!h.ok()) return h.status().ToString();
        if (Status w = h->Wait(); !w.ok()) return w.ToString();
        if (std::memcmp(direct[call].data(), engine.data(),
                        count * sizeof(float)) != 0) {
          return std::string(ReduceOpName(op)) + " of " +
                 std::to_string(count) + " differs from the engine's";
        }
        ++call;
      }
    }
    return "";
  });
  for (int32_t r = 0; r < kSize; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

TEST(DirectPathTest, WithoutAPathEveryCallGoesThroughTheRuntime) {
  World world = MakeWorld(2, /*direct=*/false);
  auto results = OnEveryRank(
      world, [](int32_t rank, Rank& r) { return SumsOfRanks(rank, r, 20); });
  for (int32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], "");
    EXPECT_EQ(DirectCalls(world[r]), 0);
    EXPECT_EQ(world[r].runtime->stats().operations, 20);
  }
}

// A timeline shows every operation, so a job that writes one never leases.
TEST(DirectPathTest, WithATimelineEveryCallGoesThroughTheRuntime) {
  const std::string path = ::testing::TempDir() + "direct_path_timeline.json";
  {
    World world = MakeWorld(2, /*direct=*/true, path);
    auto results = OnEveryRank(
        world, [](int32_t rank, Rank& r) { return SumsOfRanks(rank, r, 20); });
    for (int32_t r = 0; r < 2; ++r) {
      EXPECT_EQ(results[r], "");
      EXPECT_EQ(DirectCalls(world[r]), 0);
    }
  }
  std::remove(path.c_str());
}

TEST(DirectPathTest, AnOperationForTheRuntimeSendsAWaitingRankBackToIt) {
  World world = MakeWorld(2);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    if (std::string warm = WarmUpIntoALease(rank, r); !warm.empty())
      return warm;
    std::vector<float> named(8, static_cast<float>(rank + 1));
    float x = static_cast<float>(rank + 1);
    if (rank == 0) {
      // Rank 1 is already waiting in the lease for this rank's next call.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      StatusOr<Handle> h = r.runtime->Enqueue(
          AllreduceSpecFor("named", 8), named.data(), named.data(), nullptr);
      if (!h.ok()) return h.status().ToString();
      if (Status s = Allreduce(r, &x, 1); !s.ok()) return s.ToString();
      if (Status s = h->Wait(); !s.ok()) return s.ToString();
    } else {
      const int64_t direct_before = DirectCalls(r);
      if (Status s = Allreduce(r, &x, 1); !s.ok()) return s.ToString();
      if (DirectCalls(r) != direct_before)
        return "the call ran on the direct path after the lease ended";
      StatusOr<Handle> h = r.runtime->Enqueue(
          AllreduceSpecFor("named", 8), named.data(), named.data(), nullptr);
      if (!h.ok()) return h.status().ToString();
      if (Status s = h->Wait(); !s.ok()) return s.ToString();
    }
    if (x != 3.0f || named[7] != 3.0f) {
      return "sums " + std::to_string(x) + " and " + std::to_string(named[7]) +
             ", expected 3";
    }
    // The runtime's next idle tick leases again.
    return SumsOfRanks(rank, r, 10);
  });
  for (int32_t r = 0; r < 2; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

TEST(DirectPathTest, DisagreeingCallsGetTheRuntimesErrorAndTheNextCallWorks) {
  World world = MakeWorld(3);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    if (std::string warm = WarmUpIntoALease(rank, r); !warm.empty())
      return warm;
    std::vector<float> data(16, 1.0f);
    Status s = Allreduce(r, data.data(), rank == 1 ? 12 : 10);
    if (s.code() != StatusCode::kMismatch)
      return "not a mismatch: " + s.ToString();
    if (s.message().find(
            "synchronous call #11: tensor 'kolo.sync': ranks disagree on the "
            "element count: ranks 0,2 have 10; rank 1 has 12") != 0) {
      return "unexpected error: " + s.ToString();
    }
    return SumsOfRanks(rank, r, 10);
  });
  for (int32_t r = 0; r < 3; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

// Identical arguments can still be wrong; the runtime names what is wrong.
TEST(DirectPathTest, InvalidCallsAgreedByEveryRankGetTheRuntimesError) {
  World world = MakeWorld(2);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    if (std::string warm = WarmUpIntoALease(rank, r); !warm.empty())
      return warm;
    std::vector<float> data(8, 1.0f);
    Status root =
        r.sync->Broadcast(data.data(), data.data(), 8, DataType::kFloat32, 5);
    if (root.message().find(
            "broadcast root 5 is not a rank of a 2-rank world") ==
        std::string::npos) {
      return "root 5: " + root.ToString();
    }
    std::vector<float> out(8);
    Status counts = r.sync->Allgatherv(data.data(), 2, out.data(), {2, 2, 2},
                                       DataType::kFloat32);
    if (counts.message().find("expects 3 counts for 2 ranks") ==
        std::string::npos) {
      return "three counts: " + counts.ToString();
    }
    return SumsOfRanks(rank, r, 10);
  });
  for (int32_t r = 0; r < 2; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

TEST(DirectPathTest, ARankThatJoinsDuringALeaseContributesZeros) {
  World world = MakeWorld(3);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    if (std::string warm = SumsOfRanks(rank, r, 10); !warm.empty()) return warm;
    if (rank == 2) {
      StatusOr<int32_t> last = r.runtime->Join();
      return last.ok() ? "joined, last " + std::to_string(*last)
                       : last.status().ToString();
    }
    float x = static_cast<float>(rank + 1);
    if (Status s = Allreduce(r, &x, 1); !s.ok()) return s.ToString();
    if (x != 3.0f)
      return "sum " + std::to_string(x) + " without rank 2, expected 3";
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    StatusOr<int32_t> last = r.runtime->Join();
    return last.ok() ? "joined, last " + std::to_string(*last)
                     : last.status().ToString();
  });
  // Rank 0 joined last: it slept past an idle tick before joining.
  for (int32_t r = 0; r < 3; ++r)
    EXPECT_EQ(results[r], "joined, last 0") << "rank " << r;
}

TEST(DirectPathTest, ASecondConcurrentCallOnOneRankIsRefused) {
  World world = MakeWorld(2);
  ASSERT_EQ(
      OnEveryRank(world, [](int32_t rank,
                            Rank& r) { return SumsOfRanks(rank, r, 10); }),
      std::vector<std::string>(2, ""));
  // Rank 0's call waits in the lease for rank 1, which calls 500 ms later;
  // the second call comes when the first has long been waiting.
  auto waiting = std::async(std::launch::async, [&] {
    float x = 1.0f;
    Status s = Allreduce(world[0], &x, 1);
    return s.ok() ? std::to_string(x) : s.ToString();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  float y = 1.0f;
  Status second = Allreduce(world[0], &y, 1);
  EXPECT_EQ(second.code(), StatusCode::kInvalidArgument) << second.ToString();
  EXPECT_THAT(second.message(),
              HasSubstr("'kolo.sync' is already pending on rank 0"));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  float z = 2.0f;
  EXPECT_TRUE(Allreduce(world[1], &z, 1).ok());
  EXPECT_EQ(waiting.get(), "3.000000");
  EXPECT_EQ(z, 3.0f);
}

TEST(DirectPathTest, ShutdownEndsTheLeaseForEveryRank) {
  World world = MakeWorld(2);
  ASSERT_EQ(
      OnEveryRank(world, [](int32_t rank,
                            Rank& r) { return SumsOfRanks(rank, r, 10); }),
      std::vector<std::string>(2, ""));
  // Rank 1 waits in the lease; rank 0 shuts down instead of calling.
  auto waiting = std::async(std::launch::async, [&] {
    float x = 1.0f;
    return Allreduce(world[1], &x, 1);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto leaving = std::async(std::launch::async,
                            [&] { return world[0].runtime->Shutdown(); });
  const Status waited = waiting.get();
  EXPECT_EQ(waited.code(), StatusCode::kAborted) << waited.ToString();
  EXPECT_THAT(waited.message(),
              HasSubstr("rank 0 shut down without announcing it"));
  EXPECT_TRUE(world[1].runtime->Shutdown().ok());
  EXPECT_TRUE(leaving.get().ok());
}

// Every rank runs the same random mix on two threads: one makes blocking
// calls (allreduces and allgathers of random sizes, with random pauses
// that differ per rank), the other enqueues named allreduces and waits for
// them. Leases open and close under both threads' feet: the blocking calls
// meet in the lease, in the runtime, or across the switch between them.
TEST(DirectPathTest, BlockingAndNamedCallsFromTwoThreadsMixWithoutLossOrHang) {
  constexpr int32_t kSize = 3;
  World world = MakeWorld(kSize);
  ASSERT_EQ(world.size(), static_cast<size_t>(kSize));
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    auto named = std::async(std::launch::async, [&]() -> std::string {
      std::mt19937 same(7);  // the same sizes on every rank
      std::mt19937 mine(100 + rank);
      for (int i = 0; i < 60; ++i) {
        const int64_t count = 1 + same() % 3000;
        std::vector<float> data(count, static_cast<float>(rank + 1));
        StatusOr<Handle> h = r.runtime->Enqueue(
            AllreduceSpecFor("named." + std::to_string(i), count), data.data(),
            data.data(), nullptr);
        if (!h.ok()) return h.status().ToString();
        if (mine() % 4 == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(mine() % 3000));
        if (Status s = h->Wait(); !s.ok()) return s.ToString();
        if (data[count - 1] != 6.0f)
          return "named " + std::to_string(i) + " gave " +
                 std::to_string(data[count - 1]);
      }
      return "";
    });
    std::mt19937 same(11);
    std::mt19937 mine(200 + rank);
    std::string failure;
    for (int i = 0; i < 300 && failure.empty(); ++i) {
      const int64_t count = 1 + same() % 5000;
      if (same() % 4 == 0) {
        // Allgather: rank r sends count + r elements of value r.
        std::vector<float> send(count + rank, static_cast<float>(rank));
        std::vector<int64_t> counts;
        for (int32_t p = 0; p < kSize; ++p) counts.push_back(count + p);
        std::vector<float> recv(3 * count + 3, -1.0f);
        Status s = r.sync->Allgatherv(send.data(), count + rank, recv.data(),
                                      counts, DataType::kFloat32);
        if (!s.ok()) failure = s.ToString();
        for (int32_t p = 0, at = 0; p < kSize && failure.empty();
             at += count + p, ++p) {
          if (recv[at] != p || recv[at + count + p - 1] != p)
            failure = "allgather " + std::to_string(i);
        }
      } else {
        std::vector<float> data(count, static_cast<float>(rank + 1));
        Status s = Allreduce(r, data.data(), count);
        if (!s.ok()) failure = s.ToString();
        if (failure.empty() && (data[0] != 6.0f || data[count - 1] != 6.0f)) {
          failure = "allreduce " + std::to_string(i) + " gave " +
                    std::to_string(data[0]);
        }
      }
      if (mine() % 8 == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(mine() % 2000));
    }
    const std::string named_failure = named.get();
    if (!failure.empty()) return failure;
    if (!named_failure.empty()) return named_failure;
    const RuntimeStats stats = r.runtime->stats();
    // Both paths served blocking calls.
    if (stats.direct_operations == 0)
      return "no blocking call took the direct path";
    if (stats.operations - stats.direct_operations <= 60)
      return "every blocking call took the direct path";
    return "";
  });
  for (int32_t r = 0; r < kSize; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

}  // namespace
}  // namespace kolo
