// The Gloo backend with ranks as threads over a MemoryStore, beyond the
// conformance suite (tests/collectives/backend_conformance_test.cc, which
// checks its results): how its failures read. Built only with
// KOLO_WITH_GLOO (tests/CMakeLists.txt).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "collectives/backend.h"
#include "store/memory_store.h"

namespace kolo {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

BackendOptions OptionsFor(int32_t rank, int32_t size,
                          std::chrono::milliseconds timeout) {
  BackendOptions options;
  options.world = WorldInfo{rank, size, rank, size, 0, 1};
  options.timeout = timeout;
  return options;
}

// A peer that never arrives: the rendezvous ends at the timeout, and the
// error says which rank was left waiting for how many peers.
TEST(GlooBackendTest, APeerThatNeverComesTimesTheRendezvousOut) {
  auto store = std::make_shared<MemoryStore>();
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<Backend>> backend = CreateGlooBackend(
      OptionsFor(0, 3, std::chrono::milliseconds(300)), store);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().code(),
              AnyOf(StatusCode::kTimeout, StatusCode::kPeerFailure));
  EXPECT_THAT(
      backend.status().message(),
      StartsWith("rank 0 could not connect to its 2 peers: gloo rendezvous"));
  // The store's own words name the rank that never came.
  EXPECT_THAT(backend.status().message(),
              HasSubstr("key 'gloo/1' was not set within 300 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Rank 1 goes away after connecting: rank 0's next collective fails with a
// lost-peer code within the timeout, naming the collective, rather than
// hanging or throwing.
TEST(GlooBackendTest, APeerThatLeavesFailsTheNextCollective) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::future<StatusOr<std::unique_ptr<Backend>>>> pending;
  for (int32_t r = 0; r < 2; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      return CreateGlooBackend(
          OptionsFor(r, 2, std::chrono::milliseconds(2000)), store);
    }));
  }
  StatusOr<std::unique_ptr<Backend>> rank0 = pending[0].get();
  StatusOr<std::unique_ptr<Backend>> rank1 = pending[1].get();
  ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();

  // Both ranks work together first.
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  auto other = std::async(std::launch::async, [&] {
    return (*rank1)->Allreduce(b.data(), b.data(), 1000, DataType::kFloat32,
                               ReduceOp::kSum);
  });
  ASSERT_TRUE((*rank0)
                  ->Allreduce(a.data(), a.data(), 1000, DataType::kFloat32,
                              ReduceOp::kSum)
                  .ok());
  ASSERT_TRUE(other.get().ok());
  EXPECT_EQ(a, std::vector<float>(1000, 3.0f));

  rank1->reset();  // its sockets close
  const auto start = std::chrono::steady_clock::now();
  Status lost = (*rank0)->Allreduce(a.data(), a.data(), 1000,
                                    DataType::kFloat32, ReduceOp::kSum);
  EXPECT_THAT(lost.code(),
              AnyOf(StatusCode::kPeerFailure, StatusCode::kTimeout))
      << lost.ToString();
  EXPECT_THAT(lost.message(), StartsWith("gloo allreduce: "));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace kolo
