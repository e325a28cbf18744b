// A rank of the multi-process runtime tests. Scenarios:
//   random-order N   N named tensors of mixed sizes and types enqueued in an
//                    order shuffled differently on every rank, from two
//                    threads; all waited for and checked
//   steps N          N training-like steps of the same named gradients, a
//                    millisecond apart
//   die-in-steps N   as steps, but rank 0 kills itself (SIGKILL) halfway
// Exit 0 when all is well, 1 on a wrong value or error, 2 on bad usage.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/runtime.h"
#include "testing/collective_matrix.h"

namespace {

using kolo::DataType;
using kolo::ReduceOp;

int Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(), what.c_str());
  return 1;
}

// Tensor i: type cycles through every data type, 1 + (i * 37) % 1000
// elements, rank r contributes ReductionInput(sum) so the sum is closed form.
int RandomOrder(int tensors) {
  const auto& types = kolo::AllDataTypes();
  const int32_t rank = kolo::Rank();
  const int32_t size = kolo::Size();
  std::vector<std::vector<char>> data(tensors);
  std::vector<kolo::Handle> handles(tensors);
  std::vector<int> order(tensors);
  for (int i = 0; i < tensors; ++i) {
    order[i] = i;
    const DataType type = types[i % types.size()];
    const int64_t count = 1 + (i * 37) % 1000;
    data[i].resize(count * kolo::DataTypeSize(type));
    for (int64_t k = 0; k < count; ++k) {
      kolo::testing::StoreValue(
          type, data[i].data(), k,
          kolo::testing::ReductionInput(ReduceOp::kSum, rank, size, k + i));
    }
  }
  std::shuffle(order.begin(), order.end(), std::mt19937(1234 + rank));
  // Two threads enqueue interleaved halves of the shuffled order.
  std::vector<std::string> errors(2);
  auto enqueue = [&](int part) {
    for (size_t j = part; j < order.size(); j += 2) {
      const int i = order[j];
      const DataType type = types[i % types.size()];
      const int64_t count =
          static_cast<int64_t>(data[i].size()) / kolo::DataTypeSize(type);
      auto h =
          kolo::EnqueueAllreduce("tensor." + std::to_string(i), data[i].data(),
                                 data[i].data(), count, type, ReduceOp::kSum);
      if (!h.ok()) {
        errors[part] = h.status().ToString();
        return;
      }
      handles[i] = *h;
    }
  };
  std::thread other(enqueue, 1);
  enqueue(0);
  other.join();
  for (const std::string& e : errors) {
    if (!e.empty()) return Fail(e);
  }
  for (int i = 0; i < tensors; ++i) {
    kolo::Status s = handles[i].Wait(std::chrono::seconds(60));
    if (!s.ok())
      return Fail("tensor." + std::to_string(i) + ": " + s.ToString());
    const DataType type = types[i % types.size()];
    const int64_t count =
        static_cast<int64_t>(data[i].size()) / kolo::DataTypeSize(type);
    for (int64_t k = 0; k < count; ++k) {
      const double got = kolo::testing::Load(type, data[i].data(), k);
      const double want =
          kolo::testing::ReductionExpected(ReduceOp::kSum, size, k + i);
      if (got != want) {
        return Fail("tensor." + std::to_string(i) + " element " +
                    std::to_string(k) + " is " + std::to_string(got) +
                    ", expected " + std::to_string(want));
      }
    }
  }
  const kolo::RuntimeStats stats = kolo::GetRuntimeStats();
  std::printf(
      "rank %d: %d tensors correct (%lld collectives, %lld fused batches)\n",
      rank, tensors, static_cast<long long>(stats.collectives),
      static_cast<long long>(stats.fused_batches));
  return 0;
}

int Steps(int steps, bool die) {
  const char* names[] = {"grad.conv1", "grad.fc", "grad.bias"};
  std::vector<std::vector<float>> grads(3, std::vector<float>(256));
  for (int step = 0; step < steps; ++step) {
    if (die && step == steps / 2 && kolo::Rank() == 0) raise(SIGKILL);
    std::vector<kolo::Handle> handles;
    for (int t = 0; t < 3; ++t) {
      std::fill(grads[t].begin(), grads[t].end(),
                static_cast<float>(kolo::Rank() + t));
      auto h =
          kolo::EnqueueAllreduce(names[t], grads[t].data(), grads[t].data(),
                                 static_cast<int64_t>(grads[t].size()),
                                 DataType::kFloat32, ReduceOp::kSum);
      if (!h.ok()) return Fail(h.status().ToString());
      handles.push_back(*h);
    }
    for (int t = 0; t < 3; ++t) {
      kolo::Status s = handles[t].Wait(std::chrono::seconds(60));
      if (!s.ok()) return Fail(s.ToString());
      const int32_t n = kolo::Size();
      const float want = static_cast<float>(n * (n - 1) / 2 + n * t);
      if (grads[t][0] != want) return Fail(std::string(names[t]) + " wrong");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("rank %d: %d steps done\n", kolo::Rank(), steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: runtime_worker random-order|steps|die-in-steps N\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int n = std::atoi(argv[2]);
  if (kolo::Status s = kolo::Init(); !s.ok()) {
    std::fprintf(stderr, "kolo::Init failed: %s\n", s.ToString().c_str());
    return 1;
  }
  int code = 2;
  if (scenario == "random-order") code = RandomOrder(n);
  if (scenario == "steps") code = Steps(n, false);
  if (scenario == "die-in-steps") code = Steps(n, true);
  if (code == 0) {
    if (kolo::Status s = kolo::Shutdown(); !s.ok())
      return Fail("shutdown: " + s.ToString());
  }
  return code;
}
