// A rank of the re-initialisation test: `reinit_worker CYCLES [TIMELINE]`
// runs CYCLES rounds of Init(options) / collectives / Shutdown() in one
// process, each round with other options (engine, cycle time, fusion
// threshold, cache, direct path), and checks that a round leaves nothing
// behind: after the last round the process has no more threads, file
// descriptors or mapped kolo shared-memory segments than after the first.
// Prints "rank R: N cycles clean (...)" and exits 0; 1 on an error, a wrong
// value or a leak, 2 on bad usage.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/runtime.h"
#include "testing/engines.h"
#include "testing/process_resources.h"

namespace {

int Fail(int cycle, const std::string& what) {
  std::fprintf(stderr, "cycle %d: %s\n", cycle, what.c_str());
  return 1;
}

// Cycle i runs with its own options, so that every round builds another
// engine and runtime than the one before: shm and Gloo in turn (kolo's tcp
// engine in a build without Gloo).
kolo::InitOptions CycleOptions(kolo::InitOptions options, int cycle,
                               const std::string& timeline) {
  options.engine.backend =
      cycle % 2 == 0 ? kolo::BackendKind::kShm : kolo::testing::NetworkEngine();
  options.runtime.cycle_time =
      std::chrono::microseconds(cycle % 3 == 0 ? 500 : 2000);
  options.runtime.fusion_threshold_bytes =
      cycle % 4 == 1 ? 0 : int64_t{1} << (16 + cycle % 5);
  options.runtime.cache_capacity = cycle % 3 == 2 ? 0 : 64;
  options.direct_path.enabled = cycle % 4 != 3;
  options.timeline.path = timeline;
  return options;
}

// The collectives of one round, each with a closed-form result.
kolo::Status RunRound(int cycle) {
  const int32_t rank = kolo::Rank();
  const int32_t size = kolo::Size();
  const float expected =
      static_cast<float>(size * (size - 1) / 2 + size * cycle);
  std::vector<float> data(1000 + cycle, static_cast<float>(rank + cycle));
  KOLO_RETURN_IF_ERROR(kolo::Allreduce(data.data(), data.data(), data.size(),
                                       kolo::DataType::kFloat32,
                                       kolo::ReduceOp::kSum));
  for (float v : data) {
    if (v != expected) {
      return kolo::Internal("blocking allreduce gave " + std::to_string(v) +
                            ", expected " + std::to_string(expected));
    }
  }
  std::vector<int64_t> a(17, rank), b(33, 2 * rank);
  KOLO_ASSIGN_OR_RETURN(
      kolo::Handle ha,
      kolo::EnqueueAllreduce("a", a.data(), a.data(), a.size(),
                             kolo::DataType::kInt64, kolo::ReduceOp::kSum));
  KOLO_ASSIGN_OR_RETURN(
      kolo::Handle hb,
      kolo::EnqueueAllreduce("b", b.data(), b.data(), b.size(),
                             kolo::DataType::kInt64, kolo::ReduceOp::kMax));
  KOLO_RETURN_IF_ERROR(ha.Wait());
  KOLO_RETURN_IF_ERROR(hb.Wait());
  if (a[16] != size * (size - 1) / 2 || b[32] != 2 * (size - 1)) {
    return kolo::Internal("named allreduces gave " + std::to_string(a[16]) +
                          " and " + std::to_string(b[32]));
  }
  return kolo::Barrier();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reinit_worker CYCLES [TIMELINE]\n");
    return 2;
  }
  const int cycles = std::atoi(argv[1]);
  const std::string timeline = argc > 2 ? argv[2] : "";
  kolo::StatusOr<kolo::InitOptions> from_env =
      kolo::InitOptions::FromEnvironment();
  if (!from_env.ok()) return Fail(0, from_env.status().ToString());
  kolo::testing::ProcessResources after_first;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const kolo::InitOptions options = CycleOptions(*from_env, cycle, timeline);
    kolo::Status s = kolo::Init(options);
    if (!s.ok()) return Fail(cycle, "Init: " + s.ToString());
    if (kolo::ActiveBackend() != options.engine.backend) {
      return Fail(cycle, std::string("runs on ") +
                             kolo::BackendName(kolo::ActiveBackend()) +
                             ", asked for " +
                             kolo::BackendName(options.engine.backend));
    }
    s = RunRound(cycle);
    if (!s.ok()) return Fail(cycle, s.ToString());
    const int32_t rank = kolo::Rank();
    s = kolo::Shutdown();
    if (!s.ok()) return Fail(cycle, "Shutdown: " + s.ToString());
    if (kolo::IsInitialized() || kolo::World().size != 1) {
      return Fail(cycle, "still initialized after Shutdown");
    }
    if (cycle == 0) after_first = kolo::testing::MeasureProcessResources();
    if (cycle == cycles - 1) {
      const kolo::testing::ProcessResources after_last =
          kolo::testing::MeasureProcessResources();
      if (after_last.GrewSince(after_first)) {
        return Fail(cycle, "leaked: after the first cycle " +
                               after_first.ToString() + "; after the last " +
                               after_last.ToString());
      }
      std::printf("rank %d: %d cycles clean (%s)\n", rank, cycles,
                  after_last.ToString().c_str());
    }
  }
  return 0;
}
