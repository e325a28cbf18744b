// The runtime with ranks as threads: Gloo (or, where not built, kolo's tcp
// engine) over loopback TCP, rendezvous through an in-memory store.
// Multi-process runs under kolorun live in tests/integration/.
#include "runtime/runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>
#include <random>
#include <thread>

#include "runtime/synchronous.h"
#include "store/memory_store.h"
#include "testing/collective_matrix.h"
#include "testing/engines.h"
#include "testing/runtime_world.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Rank = testing::RuntimeRank;
using World = testing::RuntimeWorld;
using testing::OnEveryRank;

// Gloo over loopback between `size` runtimes (kolo's tcp engine in a build
// without Gloo). `adjust` may give one rank
// options the others lack.
World MakeWorld(
    int32_t size, RuntimeOptions base = RuntimeOptions(),
    std::function<void(int32_t rank, RuntimeOptions&)> adjust = nullptr) {
  auto store = std::make_shared<MemoryStore>();
  return testing::StartWorld(
      size, [=](int32_t r) -> StatusOr<std::unique_ptr<Runtime>> {
        RuntimeOptions options = base;
        options.world = WorldInfo{r, size, r, size, 0, 1};
        if (options.timeout == RuntimeOptions().timeout)
          options.timeout = std::chrono::seconds(20);
        if (adjust) adjust(r, options);
        std::unique_ptr<Backend> backend;
        if (size > 1) {
          BackendOptions b;
          b.world = options.world;
          b.timeout = options.timeout;
          b.job_secret = testing::kTestJobSecret;
          KOLO_ASSIGN_OR_RETURN(backend,
                                testing::NetworkEngine() == BackendKind::kGloo
                                    ? CreateGlooBackend(b, store)
                                    : CreateTcpBackend(b, store));
        }
        return Runtime::Start(options, std::move(backend), store);
      });
}

TensorSpec AllreduceSpec(const std::string& name, int64_t count,
                         ReduceOp op = ReduceOp::kSum) {
  TensorSpec spec;
  spec.name = name;
  spec.collective = Collective::kAllreduce;
  spec.type = DataType::kFloat32;
  spec.op = op;
  spec.count = count;
  return spec;
}

class RuntimeMatrixTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(RuntimeMatrixTest, EveryCollectiveEveryTypeMatchesClosedForm) {
  const int32_t size = GetParam();
  auto world = MakeWorld(size);
  ASSERT_EQ(world.size(), static_cast<size_t>(size));
  auto results = OnEveryRank(world, [](int32_t, Rank& rank) {
    std::string report;
    for (DataType type : AllDataTypes()) {
      for (int64_t count : {0, 1, 7, 1000}) {
        report += testing::RunCollectiveMatrix(
                      *rank.sync, rank.runtime->world(), type, count)
                      .Summary();
      }
    }
    return report;
  });
  for (int32_t r = 0; r < size; ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Sizes, RuntimeMatrixTest,
                         ::testing::Values(1, 2, 3, 4));

TEST(RuntimeTest, DifferentCountsFailOnEveryRankNamingTheRanks) {
  auto world = MakeWorld(3);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<float> data(16, 1.0f);
    return r.sync->Allreduce(data.data(), data.data(), rank == 1 ? 12 : 10,
                             DataType::kFloat32, ReduceOp::kSum);
  });
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_EQ(s.message(),
              "synchronous call #1: tensor 'kolo.sync': ranks disagree on the "
              "element count: "
              "ranks 0,2 have 10; "
              "rank 1 has 12");
  }
  // Only that operation failed; the runtime carries on.
  auto after = OnEveryRank(world, [](int32_t, Rank& r) {
    float x = 1.0f;
    Status s = r.sync->Allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
    return s.ok() ? x : -1.0f;
  });
  for (float x : after) EXPECT_EQ(x, 3.0f);
}

TEST(RuntimeTest, DifferentOperationsAndTypesAreNamed) {
  auto world = MakeWorld(2);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<float> data(8, 1.0f);
    if (rank == 0)
      return r.sync->Broadcast(data.data(), data.data(), 8, DataType::kFloat32,
                               0);
    return r.sync->Allreduce(data.data(), data.data(), 8, DataType::kFloat32,
                             ReduceOp::kSum);
  });
  for (const Status& s : results) {
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr("operation"), HasSubstr("rank 0 has broadcast"),
                      HasSubstr("rank 1 has allreduce")));
  }
  auto types = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<double> data(8, 1.0);
    return r.sync->Allreduce(data.data(), data.data(), 4,
                             rank == 0 ? DataType::kFloat64 : DataType::kInt64,
                             ReduceOp::kMax);
  });
  for (const Status& s : types) {
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr("data type"), HasSubstr("rank 0 has float64"),
                      HasSubstr("rank 1 has int64")));
  }
}

TEST(RuntimeTest, VariableCountMismatchesAreNamed) {
  auto world = MakeWorld(2);
  auto gathered = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<float> send(8), recv(16);
    return r.sync->Allgatherv(send.data(), rank == 1 ? 5 : 4, recv.data(),
                              {4, 4}, DataType::kFloat32);
  });
  for (const Status& s : gathered) {
    EXPECT_THAT(
        s.message(),
        HasSubstr("rank 1 sends 5 elements but rank 0 expects 4 from it"));
  }
  auto exchanged = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<float> send(8), recv(8);
    std::vector<int64_t> recvs =
        rank == 0 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2, 2};
    return r.sync->Alltoallv(send.data(), {2, 2}, recv.data(), recvs,
                             DataType::kFloat32);
  });
  for (const Status& s : exchanged) {
    EXPECT_THAT(
        s.message(),
        HasSubstr("rank 1 sends 2 elements to rank 0, which expects 3"));
  }
}

TEST(RuntimeTest, TensorsEnqueuedInDifferentOrdersAllComplete) {
  constexpr int kTensors = 200;
  auto world = MakeWorld(3);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<int> order(kTensors);
    for (int i = 0; i < kTensors; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(rank + 7));
    std::vector<std::vector<float>> data(kTensors);
    std::vector<Handle> handles(kTensors);
    for (int i : order) {
      data[i].assign(i % 13 + 1, static_cast<float>(rank + i));
      auto h = r.runtime->Enqueue(
          AllreduceSpec("t" + std::to_string(i), data[i].size()),
          data[i].data(), data[i].data(), nullptr);
      if (!h.ok()) return h.status().ToString();
      handles[i] = *h;
    }
    for (int i = 0; i < kTensors; ++i) {
      Status s = handles[i].Wait(milliseconds(20000));
      if (!s.ok()) return s.ToString();
      for (float x : data[i]) {
        if (x != static_cast<float>(3 * i + 3))
          return "t" + std::to_string(i) + " wrong";
      }
    }
    return std::string();
  });
  for (const std::string& r : results) EXPECT_EQ(r, "");
}

TEST(RuntimeTest, SmallTensorsAreFusedAndRepeatedStepsHitTheCache) {
  RuntimeOptions options;
  options.cycle_time =
      milliseconds(20);  // lets a whole step arrive in one cycle
  auto world = MakeWorld(2, options);
  constexpr int kTensors = 50;
  auto run_step = [](Rank& r, int64_t count) -> Status {
    std::vector<std::vector<float>> data(kTensors,
                                         std::vector<float>(count, 1.0f));
    std::vector<AllreduceTensor> tensors;
    std::vector<Handle> handles;
    for (int i = 0; i < kTensors; ++i) {
      KOLO_ASSIGN_OR_RETURN(
          Handle h,
          r.runtime->Enqueue(AllreduceSpec("grad" + std::to_string(i), count),
                             data[i].data(), data[i].data(), nullptr));
      handles.push_back(h);
    }
    for (Handle& h : handles) KOLO_RETURN_IF_ERROR(h.Wait(milliseconds(20000)));
    for (auto& d : data) {
      for (float x : d) {
        if (x != 2.0f) return Internal("wrong sum");
      }
    }
    return Status::Ok();
  };
  auto first =
      OnEveryRank(world, [&](int32_t, Rank& r) { return run_step(r, 10); });
  for (const Status& s : first) ASSERT_TRUE(s.ok()) << s.ToString();
  const RuntimeStats after_first = world[0].runtime->stats();
  EXPECT_EQ(after_first.operations, kTensors);
  EXPECT_LT(after_first.collectives, kTensors / 5)
      << "50 small tensors should fuse";
  EXPECT_GE(after_first.fused_batches, 1);
  EXPECT_EQ(after_first.cache_hits, 0);

  auto second =
      OnEveryRank(world, [&](int32_t, Rank& r) { return run_step(r, 10); });
  for (const Status& s : second) ASSERT_TRUE(s.ok()) << s.ToString();
  const RuntimeStats after_second = world[0].runtime->stats();
  EXPECT_EQ(after_second.cache_hits - after_first.cache_hits, 2 * kTensors)
      << "every rank announces every tensor by its cache bit";
  EXPECT_EQ(after_second.cache_misses, after_first.cache_misses);

  // A changed shape misses the cache and still gives the right answer.
  auto third =
      OnEveryRank(world, [&](int32_t, Rank& r) { return run_step(r, 12); });
  for (const Status& s : third) ASSERT_TRUE(s.ok()) << s.ToString();
  const RuntimeStats after_third = world[0].runtime->stats();
  EXPECT_EQ(after_third.cache_misses - after_second.cache_misses, 2 * kTensors);
}

TEST(RuntimeTest, TensorsLargerThanTheFusionThresholdStillWork) {
  RuntimeOptions options;
  options.fusion_threshold_bytes = 64;  // 16 floats
  auto world = MakeWorld(2, options);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) {
    std::vector<float> big(1000, static_cast<float>(rank + 1));
    std::vector<float> small(3, 1.0f);
    auto a = r.runtime->Enqueue(AllreduceSpec("big", 1000), big.data(),
                                big.data(), nullptr);
    auto b = r.runtime->Enqueue(AllreduceSpec("small", 3), small.data(),
                                small.data(), nullptr);
    if (!a.ok() || !b.ok() || !a->Wait().ok() || !b->Wait().ok()) return false;
    return big[999] == 3.0f && small[2] == 2.0f;
  });
  for (bool ok : results) EXPECT_TRUE(ok);
}

TEST(RuntimeTest, GroupedTensorsCompleteTogether) {
  auto world = MakeWorld(2);
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    std::vector<std::vector<float>> data(
        4, std::vector<float>(5, static_cast<float>(rank + 1)));
    std::vector<TensorSpec> specs;
    std::vector<const void*> sends;
    std::vector<void*> recvs;
    for (int i = 0; i < 4; ++i) {
      TensorSpec spec =
          AllreduceSpec("g" + std::to_string(i), 5, ReduceOp::kAverage);
      spec.group = "layer";
      spec.group_size = 4;
      specs.push_back(spec);
      sends.push_back(data[i].data());
      recvs.push_back(data[i].data());
    }
    auto handles = r.runtime->EnqueueGroup(specs, sends, recvs, nullptr);
    if (!handles.ok()) return handles.status().ToString();
    for (Handle& h : *handles) {
      if (Status s = h.Wait(milliseconds(20000)); !s.ok()) return s.ToString();
    }
    for (auto& d : data) {
      if (d[0] != 1.5f) return "wrong average";
    }
    return "";
  });
  for (const std::string& r : results) EXPECT_EQ(r, "");
  EXPECT_EQ(world[0].runtime->stats().fused_batches, 1);
}

TEST(RuntimeTest, JoinedRankContributesZerosAndAveragesCountContributors) {
  auto world = MakeWorld(3);
  // Rank r runs r + 1 steps of averaging its rank, then joins.
  auto results = OnEveryRank(world, [](int32_t rank, Rank& r) -> std::string {
    std::string seen;
    for (int step = 0; step <= rank; ++step) {
      float x = static_cast<float>(rank);
      auto h = r.runtime->Enqueue(AllreduceSpec("loss", 1, ReduceOp::kAverage),
                                  &x, &x, nullptr);
      if (!h.ok()) return h.status().ToString();
      if (Status s = h->Wait(milliseconds(20000)); !s.ok()) return s.ToString();
      seen += std::to_string(x) + " ";
    }
    StatusOr<int32_t> last = r.runtime->Join();
    if (!last.ok()) return last.status().ToString();
    return seen + "last " + std::to_string(*last);
  });
  // Step 0: ranks 0,1,2 -> 1. Step 1: ranks 1,2 -> 1.5. Step 2: rank 2 -> 2.
  EXPECT_EQ(results[0], "1.000000 last 2");
  EXPECT_EQ(results[1], "1.000000 1.500000 last 2");
  EXPECT_EQ(results[2], "1.000000 1.500000 2.000000 last 2");
}

TEST(RuntimeTest, StallIsReportedWithTheMissingRankThenEndsTheJob) {
  RuntimeOptions options;
  options.stall_warning = std::chrono::seconds(1);
  options.stall_shutdown = std::chrono::seconds(3);
  auto world = MakeWorld(2, options);
  ::testing::internal::CaptureStderr();
  float x = 1.0f;
  auto h = world[0].runtime->Enqueue(AllreduceSpec("late", 1), &x, &x, nullptr);
  ASSERT_TRUE(h.ok());
  Status s = h->Wait(milliseconds(20000));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_THAT(s.message(),
              HasSubstr("stall: tensor 'late' has waited 3 s for rank 1"));
  EXPECT_THAT(log, HasSubstr("stall: tensor 'late' has waited 1 s for rank 1"));
}

TEST(RuntimeTest, StallShutdownOnOneRankEndsEveryRankInTheSameExchange) {
  // Only rank 1 would ever shut down for the stall. It must not leave
  // rank 0 blocked in the next exchange until the 20 s engine timeout.
  auto world =
      MakeWorld(2, RuntimeOptions(), [](int32_t rank, RuntimeOptions& options) {
        options.stall_warning = std::chrono::seconds(1);
        options.stall_shutdown = std::chrono::seconds(rank == 1 ? 2 : 0);
      });
  ASSERT_EQ(world.size(), 2u);
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  float x = 1.0f;
  auto h = world[0].runtime->Enqueue(AllreduceSpec("late", 1), &x, &x, nullptr);
  ASSERT_TRUE(h.ok());
  Status s = h->Wait(milliseconds(20000));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("stall: tensor 'late' has waited"));
  EXPECT_THAT(s.message(), HasSubstr("s for rank 1"));
  EXPECT_LT(seconds, 8) << s.ToString();
  // Rank 1 fails after the same exchange, on its own thread, maybe a moment
  // after rank 0's handle completes: Shutdown waits for that thread. Had
  // rank 1 not failed with rank 0, it would report rank 0's absence.
  const Status s1 = world[1].runtime->Shutdown();
  EXPECT_EQ(s1.code(), StatusCode::kAborted) << s1.ToString();
  EXPECT_THAT(s1.message(), HasSubstr("stall: tensor 'late' has waited"));
  EXPECT_THAT(s1.message(), HasSubstr("(KOLO_STALL_SHUTDOWN_S=2)"));
}

TEST(RuntimeTest, RankThatLeavesFailsWhatWaitsForItThenEverything) {
  RuntimeOptions options;
  options.timeout = std::chrono::seconds(2);
  auto world = MakeWorld(2, options);
  // Rank 1 shuts down alone; it waits for rank 0 up to the timeout, then
  // leaves and closes its connections.
  std::thread leaver([&] { world[1].runtime.reset(); });
  std::vector<float> data(1024, 1.0f);
  auto h = world[0].runtime->Enqueue(AllreduceSpec("after", 1024), data.data(),
                                     data.data(), nullptr);
  ASSERT_TRUE(h.ok());
  Status first = h->Wait(milliseconds(20000));
  EXPECT_EQ(first.code(), StatusCode::kAborted) << first.ToString();
  EXPECT_THAT(
      first.message(),
      HasSubstr("tensor 'after': rank 1 shut down without announcing it"));
  leaver.join();
  // Now the peer is gone for good: the engine fails and the error sticks.
  const auto start = std::chrono::steady_clock::now();
  auto again = world[0].runtime->Enqueue(AllreduceSpec("again", 1), data.data(),
                                         data.data(), nullptr);
  Status second =
      again.ok() ? again->Wait(milliseconds(20000)) : again.status();
  EXPECT_TRUE(second.code() == StatusCode::kPeerFailure ||
              second.code() == StatusCode::kTimeout)
      << second.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  auto third = world[0].runtime->Enqueue(AllreduceSpec("third", 1), data.data(),
                                         data.data(), nullptr);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().ToString(), second.ToString());
}

TEST(RuntimeTest, DuplicatePendingNameIsRejected) {
  auto world = MakeWorld(1);
  float x = 0;
  // In a one-rank world operations complete almost at once; a group of two
  // with the same name is rejected before either is queued.
  auto handles = world[0].runtime->EnqueueGroup(
      {AllreduceSpec("dup", 1), AllreduceSpec("dup", 1)}, {&x, &x}, {&x, &x},
      nullptr);
  EXPECT_FALSE(handles.ok());
}

}  // namespace
}  // namespace kolo
