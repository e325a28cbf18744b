// The reduction kernels alone, per instruction set, against the memcpy
// line: bytes moved per second, counting both inputs and the output
// (3 × the buffer), the traffic a two-input reduction must move.
//
//   build/bench/reduce_bench [--benchmark_filter=float32]
//
// Every kernel's result is compared with the portable kernel's once before
// timing; a mismatch makes the benchmark report an error.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/reduce.h"

namespace kolo {
namespace {

void FillPattern(std::vector<char>& buffer, uint64_t seed) {
  for (size_t i = 0; i < buffer.size(); ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    // Small integers in every type's low bytes keep floats finite.
    buffer[i] = static_cast<char>((seed >> 60) & 0x3);
  }
}

void BM_Reduce(benchmark::State& state, ReduceIsa isa, DataType type,
               ReduceOp op) {
  const int64_t bytes = state.range(0);
  const int64_t count = bytes / DataTypeSize(type);
  std::vector<char> a(bytes), b(bytes), out(bytes), want(bytes);
  FillPattern(a, 1);
  FillPattern(b, 2);
  const ReduceKernels kernels = KernelsFor(isa);
  KernelsFor(ReduceIsa::kPortable)
      .reduce(type, op, want.data(), a.data(), b.data(), count);
  kernels.reduce(type, op, out.data(), a.data(), b.data(), count);
  if (out != want) {
    state.SkipWithError("result differs from the portable kernel");
    return;
  }
  for (auto _ : state) {
    kernels.reduce(type, op, out.data(), a.data(), b.data(), count);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * bytes);
}

// The memory line: a copy moves 2 × the buffer.
void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<char> in(bytes, 1), out(bytes);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), bytes);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

// 256 KiB stays in L2; 64 MiB streams from memory.
constexpr int64_t kCached = 256 << 10;
constexpr int64_t kStreamed = 64 << 20;

int RegisterAll() {
  benchmark::RegisterBenchmark("memcpy", BM_Memcpy)
      ->Arg(kCached)
      ->Arg(kStreamed);
  for (ReduceIsa isa : SupportedReduceIsas()) {
    for (DataType type :
         {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
          DataType::kBFloat16, DataType::kInt32, DataType::kInt8}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        const std::string name = std::string("reduce/") + ReduceIsaName(isa) +
                                 "/" + DataTypeName(type) + "/" +
                                 ReduceOpName(op);
        benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, isa, type, op)
            ->Arg(kCached)
            ->Arg(kStreamed);
      }
    }
  }
  return 0;
}
const int kRegistered = RegisterAll();

}  // namespace
}  // namespace kolo

BENCHMARK_MAIN();
