// The executor with ranks as threads: each rank's Executor drives a real
// shm backend over a MemoryStore, wrapped in FailingBackend, which passes
// calls through until the k-th call of one collective and fails that one
// with kPeerFailure on every rank (each rank counts its own calls, and all
// ranks call in the same order, so no rank is left waiting on another).
//
// Inputs are closed forms: element i of tensor j on rank r is r*i + j, so
// a sum over n ranks is i*n(n-1)/2 + n*j and a misplaced copy into or out
// of the fusion buffer shows up as a wrong value.
//
// The executor is not sticky: after a failed batch it runs the next one
// again (the engine may or may not work). Stickiness is the runtime's: the
// last test checks that a failed engine call reaches every operation of
// the batch, and every later one, through Runtime.
#include "runtime/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "store/memory_store.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

constexpr const char* kFakeFailure = "fake engine: rank 1 vanished";

// Passes every call to `inner` except the `fail_at`-th (1-based) call of
// `collective`, which fails with kPeerFailure without reaching `inner`.
// Thread-safety: as Backend (one call at a time).
class FailingBackend : public Backend {
 public:
  FailingBackend(std::unique_ptr<Backend> inner, Collective collective,
                 int64_t fail_at)
      : inner_(std::move(inner)), collective_(collective), fail_at_(fail_at) {}

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op) override {
    KOLO_RETURN_IF_ERROR(Count(Collective::kAllreduce));
    return inner_->Allreduce(send, recv, count, type, op);
  }
  Status Allgatherv(const void* send, void* recv,
                    const std::vector<int64_t>& counts,
                    DataType type) override {
    KOLO_RETURN_IF_ERROR(Count(Collective::kAllgather));
    return inner_->Allgatherv(send, recv, counts, type);
  }
  Status Broadcast(void* buffer, int64_t count, DataType type,
                   int32_t root) override {
    KOLO_RETURN_IF_ERROR(Count(Collective::kBroadcast));
    return inner_->Broadcast(buffer, count, type, root);
  }
  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                   void* recv, const std::vector<int64_t>& recv_counts,
                   DataType type) override {
    KOLO_RETURN_IF_ERROR(Count(Collective::kAlltoall));
    return inner_->Alltoallv(send, send_counts, recv, recv_counts, type);
  }
  Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                       DataType type, ReduceOp op) override {
    KOLO_RETURN_IF_ERROR(Count(Collective::kReducescatter));
    return inner_->Reducescatter(send, recv, recv_count, type, op);
  }
  Status Barrier() override {
    KOLO_RETURN_IF_ERROR(Count(Collective::kBarrier));
    return inner_->Barrier();
  }
  int64_t FusionCutoffBytes() const override {
    return inner_->FusionCutoffBytes();
  }

  int64_t calls() const { return calls_; }

 private:
  Status Count(Collective collective) {
    if (collective != collective_) return Status::Ok();
    if (++calls_ == fail_at_) return PeerFailure(kFakeFailure);
    return Status::Ok();
  }

  const std::unique_ptr<Backend> inner_;
  const Collective collective_;
  const int64_t fail_at_;
  int64_t calls_ = 0;
};

WorldInfo WorldOf(int32_t rank, int32_t size) {
  return WorldInfo{rank, size, rank, size, 0, 1};
}

// Shm backends for `size` ranks, built together (their rendezvous needs
// every rank), each wrapped to fail its `fail_at`-th call of `collective`
// (0: never).
std::vector<std::unique_ptr<FailingBackend>> MakeBackends(
    int32_t size, Collective collective = Collective::kAllreduce,
    int64_t fail_at = 0) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::future<StatusOr<std::unique_ptr<Backend>>>> pending;
  for (int32_t r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      BackendOptions options;
      options.world = WorldOf(r, size);
      options.store_prefix = "executor-test";
      options.timeout = std::chrono::seconds(20);
      return CreateShmBackend(options, store);
    }));
  }
  std::vector<std::unique_ptr<FailingBackend>> backends;
  for (auto& p : pending) {
    StatusOr<std::unique_ptr<Backend>> backend = p.get();
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (!backend.ok()) return {};
    backends.push_back(std::make_unique<FailingBackend>(
        std::move(backend).value(), collective, fail_at));
  }
  return backends;
}

// One rank's side of a batch: the ready operations (the same on every
// rank) and this rank's buffers.
struct Batch {
  std::vector<ReadyOperation> ready;
  std::vector<LocalOperation> locals;
  std::vector<std::vector<float>> send;
  std::vector<std::vector<float>> recv;

  std::vector<const ReadyOperation*> Operations() const {
    std::vector<const ReadyOperation*> out;
    for (const ReadyOperation& op : ready) out.push_back(&op);
    return out;
  }
  // joined_rank's locals are null: it has joined and contributes zeros.
  std::vector<LocalOperation*> Locals(bool joined) {
    std::vector<LocalOperation*> out;
    for (LocalOperation& local : locals)
      out.push_back(joined ? nullptr : &local);
    return out;
  }
};

constexpr float kUntouched = -1.0f;

// Allreduce tensors of `counts` elements; tensor j of rank r holds r*i + j.
// `joined_rank` (if >= 0) is marked joined in every operation.
Batch AllreduceBatch(int32_t rank, int32_t size,
                     const std::vector<int64_t>& counts, ReduceOp op,
                     int32_t joined_rank = -1) {
  Batch b;
  for (size_t j = 0; j < counts.size(); ++j) {
    ReadyOperation ready;
    ready.name = "grad" + std::to_string(j);
    TensorSpec spec =
        MakeSpec(Collective::kAllreduce, DataType::kFloat32, counts[j], op);
    spec.name = ready.name;
    ready.specs.assign(size, spec);
    ready.joined.assign(size, false);
    if (joined_rank >= 0) ready.joined[joined_rank] = true;
    b.ready.push_back(ready);
    std::vector<float> send(counts[j]);
    for (int64_t i = 0; i < counts[j]; ++i)
      send[i] = static_cast<float>(rank * i + j);
    b.send.push_back(send);
    b.recv.emplace_back(counts[j], kUntouched);
  }
  for (size_t j = 0; j < counts.size(); ++j) {
    LocalOperation local;
    local.spec = b.ready[j].specs[rank];
    local.send = b.send[j].data();
    local.recv = b.recv[j].data();
    local.handle =
        std::make_shared<internal::HandleState>(b.ready[j].name, nullptr);
    b.locals.push_back(local);
  }
  return b;
}

// Runs body(rank) on one thread per rank and returns its results.
template <typename Fn>
auto OnEveryRank(int32_t size, Fn body) {
  using Result = decltype(body(0));
  std::vector<std::future<Result>> pending;
  for (int32_t r = 0; r < size; ++r)
    pending.push_back(std::async(std::launch::async, body, r));
  std::vector<Result> results;
  for (auto& p : pending) results.push_back(p.get());
  return results;
}

TEST(ExecutorTest, FusedAllreduceBatchGivesClosedFormSums) {
  for (int32_t size : {2, 3}) {
    auto backends = MakeBackends(size);
    ASSERT_EQ(static_cast<int32_t>(backends.size()), size);
    const std::vector<int64_t> counts = {5, 0, 7,
                                         1};  // a zero-sized tensor among them
    auto failures = OnEveryRank(size, [&](int32_t rank) {
      RuntimeStats stats;
      Executor executor(WorldOf(rank, size), backends[rank].get(), nullptr,
                        &stats);
      Batch b = AllreduceBatch(rank, size, counts, ReduceOp::kSum);
      std::string wrong;
      Status ran = executor.Run(b.Operations(), b.Locals(false));
      if (!ran.ok()) return ran.ToString();
      for (size_t j = 0; j < counts.size(); ++j) {
        for (int64_t i = 0; i < counts[j]; ++i) {
          const float want =
              static_cast<float>(i * size * (size - 1) / 2 + size * j);
          if (b.recv[j][i] != want) {
            wrong += "tensor " + std::to_string(j) + " element " +
                     std::to_string(i) + " is " + std::to_string(b.recv[j][i]) +
                     ", expected " + std::to_string(want) + "\n";
          }
          // Out of place: the inputs are left alone.
          if (b.send[j][i] != static_cast<float>(rank * i + j))
            wrong += "send changed\n";
        }
      }
      // One engine call carried the whole batch.
      if (stats.collectives != 1 || stats.fused_batches != 1) {
        wrong += "engine calls " + std::to_string(stats.collectives) +
                 ", fused " + std::to_string(stats.fused_batches) +
                 "; expected 1 and 1\n";
      }
      return wrong;
    });
    for (int32_t r = 0; r < size; ++r)
      EXPECT_EQ(failures[r], "") << "rank " << r << " of " << size;
  }
}

TEST(ExecutorTest, AverageDividesByTheRanksThatContributed) {
  // Three ranks, rank 2 joined: it sends zeros and is not counted, so the
  // average is (0*i + j + 1*i + j) / 2 = i/2 + j.
  constexpr int32_t kSize = 3;
  auto backends = MakeBackends(kSize);
  ASSERT_EQ(static_cast<int32_t>(backends.size()), kSize);
  const std::vector<int64_t> counts = {4, 6};
  auto failures = OnEveryRank(kSize, [&](int32_t rank) {
    RuntimeStats stats;
    Executor executor(WorldOf(rank, kSize), backends[rank].get(), nullptr,
                      &stats);
    Batch b = AllreduceBatch(rank, kSize, counts, ReduceOp::kAverage,
                             /*joined_rank=*/2);
    Status ran = executor.Run(b.Operations(), b.Locals(/*joined=*/rank == 2));
    if (!ran.ok()) return ran.ToString();
    std::string wrong;
    if (rank == 2) return wrong;  // a joined rank has no outputs
    for (size_t j = 0; j < counts.size(); ++j) {
      for (int64_t i = 0; i < counts[j]; ++i) {
        const float want = static_cast<float>(i) / 2 + static_cast<float>(j);
        if (b.recv[j][i] != want) {
          wrong += "tensor " + std::to_string(j) + " element " +
                   std::to_string(i) + " is " + std::to_string(b.recv[j][i]) +
                   ", expected " + std::to_string(want) + "\n";
        }
      }
    }
    return wrong;
  });
  for (int32_t r = 0; r < kSize; ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(ExecutorTest, ALoneTensorReducesInPlaceWithoutTheFusionBuffer) {
  constexpr int32_t kSize = 2;
  auto backends = MakeBackends(kSize);
  ASSERT_EQ(static_cast<int32_t>(backends.size()), kSize);
  auto failures = OnEveryRank(kSize, [&](int32_t rank) {
    RuntimeStats stats;
    Executor executor(WorldOf(rank, kSize), backends[rank].get(), nullptr,
                      &stats);
    Batch b = AllreduceBatch(rank, kSize, {9}, ReduceOp::kMax);
    b.locals[0].recv = b.send[0].data();  // in place
    Status ran = executor.Run(b.Operations(), b.Locals(false));
    if (!ran.ok()) return ran.ToString();
    std::string wrong;
    for (int64_t i = 0; i < 9; ++i) {
      if (b.send[0][i] != static_cast<float>(i))
        wrong += "element " + std::to_string(i) + "\n";
    }
    if (b.recv[0][0] != kUntouched) wrong += "wrote the unused output\n";
    if (stats.fused_batches != 0) wrong += "counted a lone tensor as fused\n";
    return wrong;
  });
  for (int32_t r = 0; r < kSize; ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(ExecutorTest, OneRankCopiesWithoutAnEngine) {
  RuntimeStats stats;
  Executor executor(WorldOf(0, 1), /*backend=*/nullptr, nullptr, &stats);
  Batch b = AllreduceBatch(0, 1, {3, 2}, ReduceOp::kSum);
  ASSERT_TRUE(executor.Run(b.Operations(), b.Locals(false)).ok());
  EXPECT_EQ(b.recv[0], (std::vector<float>{0, 0, 0}));  // rank 0: 0*i + 0
  EXPECT_EQ(b.recv[1], (std::vector<float>{1, 1}));
}

TEST(ExecutorTest, TheOtherCollectivesFillTheHandlesOutputs) {
  constexpr int32_t kSize = 2;
  auto backends = MakeBackends(kSize);
  ASSERT_EQ(static_cast<int32_t>(backends.size()), kSize);
  auto failures = OnEveryRank(kSize, [&](int32_t rank) {
    RuntimeStats stats;
    Executor executor(WorldOf(rank, kSize), backends[rank].get(), nullptr,
                      &stats);
    std::string wrong;
    auto run = [&](TensorSpec mine, std::vector<TensorSpec> all,
                   const void* send,
                   void* recv) -> std::shared_ptr<internal::HandleState> {
      ReadyOperation ready;
      ready.name = mine.name;
      ready.specs = std::move(all);
      ready.joined.assign(kSize, false);
      LocalOperation local;
      local.spec = mine;
      local.send = send;
      local.recv = recv;
      local.handle =
          std::make_shared<internal::HandleState>(mine.name, nullptr);
      Status ran = executor.Run({&ready}, {&local});
      if (!ran.ok()) wrong += mine.name + ": " + ran.ToString() + "\n";
      return local.handle;
    };

    // allgather: rank r gives r + 1 elements, all equal to 10r.
    {
      std::vector<TensorSpec> all;
      for (int32_t r = 0; r < kSize; ++r) {
        all.push_back(
            MakeSpec(Collective::kAllgather, DataType::kInt32, r + 1));
        all.back().name = "gather";
      }
      std::vector<int32_t> send(rank + 1, 10 * rank);
      auto handle = run(all[rank], all, send.data(), nullptr);
      std::vector<int32_t> got(handle->output.size() / sizeof(int32_t));
      std::memcpy(got.data(), handle->output.data(), handle->output.size());
      if (got != std::vector<int32_t>({0, 10, 10}))
        wrong += "allgather output\n";
      if (handle->output_counts != std::vector<int64_t>({1, 2}))
        wrong += "allgather counts\n";
    }
    // broadcast from rank 1 into recv.
    {
      TensorSpec spec = MakeSpec(Collective::kBroadcast, DataType::kInt32, 3,
                                 ReduceOp::kSum, 1);
      spec.name = "bcast";
      std::vector<int32_t> buffer = rank == 1 ? std::vector<int32_t>{7, 8, 9}
                                              : std::vector<int32_t>{0, 0, 0};
      run(spec, {spec, spec}, buffer.data(), buffer.data());
      if (buffer != std::vector<int32_t>({7, 8, 9})) wrong += "broadcast\n";
    }
    // alltoall: rank r sends rank d (d + 1) elements equal to 10r + d.
    {
      std::vector<TensorSpec> all;
      for (int32_t r = 0; r < kSize; ++r) {
        all.push_back(MakeSpec(Collective::kAlltoall, DataType::kInt32, 3));
        all.back().name = "a2a";
        all.back().splits = {1, 2};
      }
      std::vector<int32_t> send = {10 * rank, 10 * rank + 1, 10 * rank + 1};
      auto handle = run(all[rank], all, send.data(), nullptr);
      std::vector<int32_t> got(handle->output.size() / sizeof(int32_t));
      std::memcpy(got.data(), handle->output.data(), handle->output.size());
      const std::vector<int32_t> want =
          rank == 0 ? std::vector<int32_t>{0, 10}
                    : std::vector<int32_t>{1, 1, 11, 11};
      if (got != want) wrong += "alltoall output\n";
    }
    // reducescatter: 4 elements r*i + 1; rank r keeps block r of the sum.
    {
      TensorSpec spec =
          MakeSpec(Collective::kReducescatter, DataType::kInt32, 4);
      spec.name = "rs";
      std::vector<int32_t> send(4);
      for (int32_t i = 0; i < 4; ++i) send[i] = rank * i + 1;
      auto handle = run(spec, {spec, spec}, send.data(), nullptr);
      std::vector<int32_t> got(handle->output.size() / sizeof(int32_t));
      std::memcpy(got.data(), handle->output.data(), handle->output.size());
      // sum over r of (r*i + 1) = i + 2.
      const std::vector<int32_t> want =
          rank == 0 ? std::vector<int32_t>{2, 3} : std::vector<int32_t>{4, 5};
      if (got != want) wrong += "reducescatter output\n";
    }
    return wrong;
  });
  for (int32_t r = 0; r < kSize; ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

// The 2nd allreduce fails on every rank: that batch's Run returns the
// engine's error as it came (code and message), writes none of the batch's
// outputs, and the executor runs the next batch again.
TEST(ExecutorTest, AFailedEngineCallFailsTheWholeBatchAndNotTheNext) {
  constexpr int32_t kSize = 2;
  auto backends = MakeBackends(kSize, Collective::kAllreduce, /*fail_at=*/2);
  ASSERT_EQ(static_cast<int32_t>(backends.size()), kSize);
  const std::vector<int64_t> counts = {3, 4, 5};
  auto failures = OnEveryRank(kSize, [&](int32_t rank) {
    RuntimeStats stats;
    Executor executor(WorldOf(rank, kSize), backends[rank].get(), nullptr,
                      &stats);
    std::string wrong;
    Batch first = AllreduceBatch(rank, kSize, counts, ReduceOp::kSum);
    Status ran = executor.Run(first.Operations(), first.Locals(false));
    if (!ran.ok()) wrong += "first batch: " + ran.ToString() + "\n";

    Batch failed = AllreduceBatch(rank, kSize, counts, ReduceOp::kSum);
    ran = executor.Run(failed.Operations(), failed.Locals(false));
    if (ran.code() != StatusCode::kPeerFailure ||
        ran.message() != kFakeFailure) {
      wrong += "failed batch returned " + ran.ToString() + "\n";
    }
    for (size_t j = 0; j < counts.size(); ++j) {
      if (failed.recv[j] != std::vector<float>(counts[j], kUntouched)) {
        wrong += "tensor " + std::to_string(j) +
                 " of the failed batch was written\n";
      }
    }

    Batch next = AllreduceBatch(rank, kSize, counts, ReduceOp::kSum);
    ran = executor.Run(next.Operations(), next.Locals(false));
    if (!ran.ok()) wrong += "next batch: " + ran.ToString() + "\n";
    for (size_t j = 0; j < counts.size(); ++j) {
      for (int64_t i = 0; i < counts[j]; ++i) {
        if (next.recv[j][i] != static_cast<float>(i + 2 * j))
          wrong += "next batch value\n";
      }
    }
    if (backends[rank]->calls() != 3)
      wrong += "engine calls " + std::to_string(backends[rank]->calls());
    return wrong;
  });
  for (int32_t r = 0; r < kSize; ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

// Through the runtime: the engine's failure completes every operation of
// the batch with kPeerFailure carrying the engine's message and the
// operation that failed, and every later operation gets the same error.
TEST(ExecutorTest, TheRuntimeFailsEveryOperationOfTheBatchAndEveryLaterOne) {
  constexpr int32_t kSize = 2;
  auto backends = MakeBackends(kSize, Collective::kAllreduce, /*fail_at=*/1);
  ASSERT_EQ(static_cast<int32_t>(backends.size()), kSize);
  auto results = OnEveryRank(kSize, [&](int32_t rank) -> std::vector<Status> {
    RuntimeOptions options;
    options.world = WorldOf(rank, kSize);
    options.timeout = std::chrono::seconds(20);
    StatusOr<std::unique_ptr<Runtime>> runtime =
        Runtime::Start(options, std::move(backends[rank]), /*store=*/nullptr);
    if (!runtime.ok()) return {runtime.status()};
    std::vector<std::vector<float>> data(3, std::vector<float>(8, 1.0f));
    // A group, so that the three tensors are one batch however the
    // enqueues and the runtime's cycles interleave.
    std::vector<TensorSpec> specs;
    std::vector<const void*> sends;
    std::vector<void*> recvs;
    for (int j = 0; j < 3; ++j) {
      TensorSpec spec = MakeSpec(Collective::kAllreduce, DataType::kFloat32, 8);
      spec.name = "grad" + std::to_string(j);
      spec.group = "grads";
      spec.group_size = 3;
      specs.push_back(spec);
      sends.push_back(data[j].data());
      recvs.push_back(data[j].data());
    }
    StatusOr<std::vector<Handle>> handles =
        (*runtime)->EnqueueGroup(specs, sends, recvs, nullptr);
    if (!handles.ok()) return {handles.status()};
    std::vector<Status> statuses;
    for (const Handle& h : *handles)
      statuses.push_back(h.Wait(std::chrono::seconds(20)));
    // Later: refused at once, or failed, with the same error.
    TensorSpec later = MakeSpec(Collective::kAllreduce, DataType::kFloat32, 8);
    later.name = "later";
    StatusOr<Handle> h =
        (*runtime)->Enqueue(later, data[0].data(), data[0].data(), nullptr);
    statuses.push_back(h.ok() ? h->Wait(std::chrono::seconds(20)) : h.status());
    (void)(*runtime)->Shutdown();
    return statuses;
  });
  for (int32_t r = 0; r < kSize; ++r) {
    ASSERT_EQ(results[r].size(), 4u)
        << "rank " << r << ": " << results[r][0].ToString();
    for (const Status& s : results[r]) {
      EXPECT_EQ(s.code(), StatusCode::kPeerFailure)
          << "rank " << r << ": " << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr(kFakeFailure)) << "rank " << r;
      EXPECT_THAT(s.message(), HasSubstr("allreduce of 'grad")) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace kolo
