// Backend conformance: every backend that can run ranks as threads, over an
// in-memory store, held to the contract of collectives/backend.h.
//
// The matrix is backend x ranks (1-4) x element count (0, 1, odd, large),
// and inside each case every collective of the seam for a few data types:
// allreduce with each op (sum, min, max, product; average reaches a
// backend only as AllreduceAndDivide, checked bit for bit against the sum
// divided in a pass of its own), allgather and allgatherv, broadcast from each root, alltoall
// and alltoallv, reducescatter with each op, and barrier; allreduce,
// allgather, alltoall and reducescatter also in their aliasing (in-place)
// forms. Expected values are closed forms (tests/testing/collective_matrix.h)
// chosen so that every data type holds every input and answer exactly.
//
// What "count 0" means at this seam: a backend never sees a call whose
// total is zero (the executor returns before it), so with count 0 only the
// variable-count collectives run, where some ranks' blocks are empty and
// others are not: rank r gathers count + r elements, and rank i sends rank j
// count + (i + j) % 2 elements. A one-rank world never reaches a backend
// either, but a backend must still build and run there.
//
// Adding a backend that runs ranks as threads is one line in kBackends. A
// backend not compiled into this build (gloo without KOLO_WITH_GLOO) has no
// cases.
//
// MPI cannot run ranks as threads (one MPI_COMM_WORLD per process), so it
// is not here: tests/integration/collectives_test.cc runs the same closed
// forms (RunCollectiveMatrix) with MPI, Gloo, tcp and shm in real processes.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/backend.h"
#include "common/reduce.h"
#include "store/memory_store.h"
#include "testing/collective_matrix.h"
#include "testing/engines.h"

namespace kolo {
namespace {

using testing::AlltoallValue;
using testing::BroadcastValue;
using testing::Failures;
using testing::GatherValue;
using testing::ReductionExpected;
using testing::ReductionInput;
using testing::StoreValue;
using testing::Verify;

using BackendFactory = StatusOr<std::unique_ptr<Backend>> (*)(
    const BackendOptions&, std::shared_ptr<Store>);

struct BackendUnderTest {
  const char* name;
  BackendFactory create;
};

// One line per backend that can run ranks as threads.
const BackendUnderTest kBackends[] = {
    {"shm", &CreateShmBackend},
    {"gloo", &CreateGlooBackend},
    {"tcp", &CreateTcpBackend},
};

constexpr int64_t kOdd = 37;
// Large enough to take many rounds of the shm areas set below, several of
// Gloo's chunks and several of the tcp engine's reduction pieces in every
// ring block, odd so that no block divides evenly.
constexpr int64_t kLarge = 65539;

constexpr ReduceOp kBackendOps[] = {ReduceOp::kSum, ReduceOp::kMin,
                                    ReduceOp::kMax, ReduceOp::kProduct};

// Small counts run every type; the large count the two that matter most
// (the common case, and a 16-bit type whose reduction widens and rounds).
std::vector<DataType> TypesFor(int64_t count) {
  if (count == kLarge) return {DataType::kFloat32, DataType::kBFloat16};
  return {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
          DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
          DataType::kInt32,    DataType::kInt64};
}

BackendOptions OptionsFor(const BackendUnderTest& backend, int32_t rank,
                          int32_t size) {
  BackendOptions options;
  options.world.rank = rank;
  options.world.size = size;
  options.world.local_rank = rank;
  options.world.local_size = size;
  options.store_prefix = std::string("conformance-") + backend.name;
  options.shm_area_bytes = 16384;  // kLarge float32 takes 16+ rounds
  // A hang fails the case instead of blocking the suite.
  options.timeout = std::chrono::milliseconds(30000);
  options.job_secret = testing::kTestJobSecret;
  return options;
}

// Runs every collective of the seam for one type on one rank's backend.
class RankRun {
 public:
  RankRun(Backend* backend, int32_t rank, int32_t size, DataType type,
          int64_t count, Failures* failures)
      : backend_(backend),
        rank_(rank),
        size_(size),
        type_(type),
        count_(count),
        element_(DataTypeSize(type)),
        failures_(failures),
        suffix_(std::string(" ") + DataTypeName(type) + " count " +
                std::to_string(count) + " rank " + std::to_string(rank) + "/" +
                std::to_string(size)) {}

  void All() {
    if (count_ > 0) {
      for (ReduceOp op : kBackendOps) {
        for (bool in_place : {false, true}) {
          Allreduce(op, in_place);
          Reducescatter(op, in_place);
        }
      }
      for (bool in_place : {false, true}) AllreduceAndDivide(in_place);
      for (bool in_place : {false, true}) {
        Allgather(in_place);
        Alltoall(in_place);
      }
      for (int32_t root = 0; root < size_; ++root) Broadcast(root);
    }
    Allgatherv();
    Alltoallv();
    Check(backend_->Barrier(), "barrier" + suffix_);
  }

 private:
  std::vector<char> Buffer(int64_t elements) const {
    return std::vector<char>(static_cast<size_t>(elements * element_));
  }
  char* At(std::vector<char>& buffer, int64_t element) const {
    return buffer.data() + element * element_;
  }
  bool Check(const Status& status, const std::string& what) {
    if (!status.ok()) failures_->Add(what + ": " + status.ToString());
    return status.ok();
  }
  static const char* Placement(bool in_place) {
    return in_place ? " in-place" : " out-of-place";
  }

  void Allreduce(ReduceOp op, bool in_place) {
    const std::string what = std::string("allreduce ") + ReduceOpName(op) +
                             suffix_ + Placement(in_place);
    std::vector<char> send = Buffer(count_), recv = Buffer(count_);
    for (int64_t i = 0; i < count_; ++i) {
      StoreValue(type_, send.data(), i, ReductionInput(op, rank_, size_, i));
    }
    char* out = in_place ? send.data() : recv.data();
    if (Check(backend_->Allreduce(send.data(), out, count_, type_, op), what)) {
      Verify(failures_, what, type_, out, count_,
             [&](int64_t i) { return ReductionExpected(op, size_, i); });
    }
  }

  // The sum divided by the world size: the same bits as the closed-form
  // sum divided in a pass of its own, whichever pass the engine divides in.
  void AllreduceAndDivide(bool in_place) {
    const std::string what =
        "allreduce-and-divide" + suffix_ + Placement(in_place);
    std::vector<char> send = Buffer(count_), recv = Buffer(count_);
    std::vector<char> expected = Buffer(count_);
    for (int64_t i = 0; i < count_; ++i) {
      StoreValue(type_, send.data(), i,
                 ReductionInput(ReduceOp::kSum, rank_, size_, i));
      StoreValue(type_, expected.data(), i,
                 ReductionExpected(ReduceOp::kSum, size_, i));
    }
    DivideInPlace(type_, expected.data(), count_, size_);
    char* out = in_place ? send.data() : recv.data();
    if (!Check(backend_->AllreduceAndDivide(send.data(), out, count_, type_,
                                            size_),
               what)) {
      return;
    }
    for (int64_t i = 0; i < count_; ++i) {
      if (std::memcmp(At(expected, i), out + i * element_, element_) != 0) {
        failures_->Add(what + ": element " + std::to_string(i) +
                       " differs from the sum divided by " +
                       std::to_string(size_));
        return;
      }
    }
  }

  // Block j of the input (elements j*count .. (j+1)*count) goes to rank j.
  // In place, the output is this rank's own block of the input.
  void Reducescatter(ReduceOp op, bool in_place) {
    const std::string what = std::string("reducescatter ") + ReduceOpName(op) +
                             suffix_ + Placement(in_place);
    std::vector<char> send = Buffer(count_ * size_), recv = Buffer(count_);
    for (int64_t i = 0; i < count_ * size_; ++i) {
      StoreValue(type_, send.data(), i, ReductionInput(op, rank_, size_, i));
    }
    char* out = in_place ? At(send, rank_ * count_) : recv.data();
    if (Check(backend_->Reducescatter(send.data(), out, count_, type_, op),
              what)) {
      Verify(failures_, what, type_, out, count_, [&](int64_t k) {
        return ReductionExpected(op, size_, rank_ * count_ + k);
      });
    }
  }

  // Allgatherv with equal counts; in place, the input is already in this
  // rank's slot of the output.
  void Allgather(bool in_place) {
    const std::string what = "allgather" + suffix_ + Placement(in_place);
    std::vector<char> send = Buffer(count_), recv = Buffer(count_ * size_);
    char* mine = in_place ? At(recv, rank_ * count_) : send.data();
    for (int64_t i = 0; i < count_; ++i)
      StoreValue(type_, mine, i, GatherValue(rank_, i));
    const std::vector<int64_t> counts(size_, count_);
    if (Check(backend_->Allgatherv(mine, recv.data(), counts, type_), what)) {
      Verify(failures_, what, type_, recv.data(), count_ * size_,
             [&](int64_t i) {
               return GatherValue(static_cast<int32_t>(i / count_), i % count_);
             });
    }
  }

  // Rank r contributes count + r elements: with count 0, rank 0's block is
  // empty and the others' are not.
  void Allgatherv() {
    const std::string what = "allgatherv" + suffix_;
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (int32_t r = 0; r < size_; ++r) {
      counts.push_back(count_ + r);
      total += counts.back();
    }
    if (total == 0) return;  // never reaches a backend
    std::vector<char> send = Buffer(counts[rank_]), recv = Buffer(total);
    for (int64_t i = 0; i < counts[rank_]; ++i) {
      StoreValue(type_, send.data(), i, GatherValue(rank_, i));
    }
    if (!Check(backend_->Allgatherv(send.data(), recv.data(), counts, type_),
               what))
      return;
    int64_t offset = 0;
    for (int32_t r = 0; r < size_; ++r) {
      Verify(failures_, what + " block of rank " + std::to_string(r), type_,
             At(recv, offset), counts[r],
             [&](int64_t i) { return GatherValue(r, i); });
      offset += counts[r];
    }
  }

  void Broadcast(int32_t root) {
    const std::string what = "broadcast from " + std::to_string(root) + suffix_;
    std::vector<char> buffer = Buffer(count_);
    for (int64_t i = 0; i < count_; ++i) {
      StoreValue(type_, buffer.data(), i,
                 rank_ == root ? BroadcastValue(root, i) : 111);
    }
    if (Check(backend_->Broadcast(buffer.data(), count_, type_, root), what)) {
      Verify(failures_, what, type_, buffer.data(), count_,
             [&](int64_t i) { return BroadcastValue(root, i); });
    }
  }

  // Alltoallv with equal counts; in place, send and recv are one buffer.
  void Alltoall(bool in_place) {
    const std::string what = "alltoall" + suffix_ + Placement(in_place);
    std::vector<char> send = Buffer(count_ * size_),
                      recv = Buffer(count_ * size_);
    for (int32_t to = 0; to < size_; ++to) {
      for (int64_t k = 0; k < count_; ++k) {
        StoreValue(type_, send.data(), to * count_ + k,
                   AlltoallValue(rank_, to, k));
      }
    }
    char* out = in_place ? send.data() : recv.data();
    const std::vector<int64_t> counts(size_, count_);
    if (Check(backend_->Alltoallv(send.data(), counts, out, counts, type_),
              what)) {
      Verify(failures_, what, type_, out, count_ * size_, [&](int64_t i) {
        return AlltoallValue(static_cast<int32_t>(i / count_), rank_,
                             i % count_);
      });
    }
  }

  // Rank i sends rank j count + (i + j) % 2 elements, so with count 0 some
  // blocks are empty.
  void Alltoallv() {
    const std::string what = "alltoallv" + suffix_;
    std::vector<int64_t> send_counts, recv_counts;
    int64_t sent = 0, received = 0, everyone = 0;
    for (int32_t j = 0; j < size_; ++j) {
      send_counts.push_back(count_ + (rank_ + j) % 2);
      recv_counts.push_back(count_ + (j + rank_) % 2);
      sent += send_counts.back();
      received += recv_counts.back();
      for (int32_t i = 0; i < size_; ++i) everyone += count_ + (i + j) % 2;
    }
    if (everyone == 0) return;  // never reaches a backend
    std::vector<char> send = Buffer(sent), recv = Buffer(received);
    int64_t offset = 0;
    for (int32_t to = 0; to < size_; ++to) {
      for (int64_t k = 0; k < send_counts[to]; ++k) {
        StoreValue(type_, send.data(), offset + k, AlltoallValue(rank_, to, k));
      }
      offset += send_counts[to];
    }
    if (!Check(backend_->Alltoallv(send.data(), send_counts, recv.data(),
                                   recv_counts, type_),
               what)) {
      return;
    }
    offset = 0;
    for (int32_t from = 0; from < size_; ++from) {
      Verify(failures_, what + " block from rank " + std::to_string(from),
             type_, At(recv, offset), recv_counts[from],
             [&](int64_t k) { return AlltoallValue(from, rank_, k); });
      offset += recv_counts[from];
    }
  }

  Backend* const backend_;
  const int32_t rank_;
  const int32_t size_;
  const DataType type_;
  const int64_t count_;
  const int64_t element_;
  Failures* const failures_;
  const std::string suffix_;
};

struct Case {
  BackendUnderTest backend;
  int32_t ranks;
  int64_t count;
};

class BackendConformanceTest : public ::testing::TestWithParam<Case> {};

TEST_P(BackendConformanceTest, EveryCollectiveGivesTheClosedForm) {
  const Case& c = GetParam();
  auto store = std::make_shared<MemoryStore>();
  std::vector<Status> created(c.ranks);
  std::vector<Failures> failures(c.ranks);
  std::vector<std::thread> threads;
  for (int32_t rank = 0; rank < c.ranks; ++rank) {
    threads.emplace_back([&, rank] {
      StatusOr<std::unique_ptr<Backend>> backend =
          c.backend.create(OptionsFor(c.backend, rank, c.ranks), store);
      created[rank] = backend.status();
      if (!backend.ok()) return;
      for (DataType type : TypesFor(c.count)) {
        RankRun(backend->get(), rank, c.ranks, type, c.count, &failures[rank])
            .All();
      }
    });
  }
  for (std::thread& t : threads) t.join();

  for (int32_t rank = 0; rank < c.ranks; ++rank) {
    ASSERT_TRUE(created[rank].ok())
        << c.backend.name << " rank " << rank << " of " << c.ranks << ": "
        << created[rank].ToString();
  }
  for (int32_t rank = 0; rank < c.ranks; ++rank) {
    EXPECT_TRUE(failures[rank].items().empty())
        << c.backend.name << " rank " << rank << ":\n"
        << failures[rank].Summary();
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const BackendUnderTest& backend : kBackends) {
    if (!testing::EngineBuilt(backend.name)) continue;
    for (int32_t ranks = 1; ranks <= 4; ++ranks) {
      for (int64_t count : {int64_t{0}, int64_t{1}, kOdd, kLarge}) {
        cases.push_back({backend, ranks, count});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendConformanceTest,
                         ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.backend.name) + "_" +
                                  std::to_string(info.param.ranks) +
                                  "ranks_count" +
                                  std::to_string(info.param.count);
                         });

}  // namespace
}  // namespace kolo
