// A rank of the multi-process collective tests. Started by kolorun (or
// mpirun); the first argument picks the scenario:
//   matrix [counts...]  every collective x type x count, closed-form checks
//   mismatch            rank 1 calls allreduce with a different count
//   die                 rank 1 kills itself in the middle of allreduces
//   hang                rank 1 never makes the call (its process stays alive)
//   freeze              rank 1 stops altogether (SIGSTOP)
//   reinit              Init, allreduce, Shutdown, three times over
//   loop SECONDS        allreduces of 64 KiB for SECONDS, each checked; prints
//                       "rank R: looping" after the first correct one
// Exit codes: 0 as expected, 1 wrong result or unexpected error, 2 bad
// usage, 3 the expected error was reported (die, hang), or any error in
// loop (a peer lost mid-job).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "testing/collective_matrix.h"

namespace {

int Matrix(const std::vector<int64_t>& counts) {
  kolo::testing::ProcessApi api;
  int cases = 0;
  std::string report;
  for (kolo::DataType type : kolo::AllDataTypes()) {
    for (int64_t count : counts) {
      report +=
          kolo::testing::RunCollectiveMatrix(api, kolo::World(), type, count)
              .Summary();
      ++cases;
    }
  }
  if (!report.empty()) {
    std::fprintf(stderr, "rank %d: wrong results:\n%s", kolo::Rank(),
                 report.c_str());
    return 1;
  }
  std::printf(
      "rank %d of %d (%s): all collectives correct in %d type/count cases\n",
      kolo::Rank(), kolo::Size(), kolo::BackendName(kolo::ActiveBackend()),
      cases);
  std::printf(
      "rank %d: host %d of %d, local rank %d of %d, hierarchical allreduce "
      "%s\n",
      kolo::Rank(), kolo::CrossRank(), kolo::CrossSize(), kolo::LocalRank(),
      kolo::LocalSize(), kolo::HierarchicalAllreduce() ? "on" : "off");
  return 0;
}

int Mismatch() {
  std::vector<float> data(16, 1.0f);
  const int64_t count = kolo::Rank() == 1 ? 12 : 10;
  kolo::Status s =
      kolo::Allreduce(data.data(), data.data(), count, kolo::DataType::kFloat32,
                      kolo::ReduceOp::kSum);
  std::printf("rank %d: %s\n", kolo::Rank(), s.ToString().c_str());
  if (s.code() != kolo::StatusCode::kMismatch) return 1;
  // Every rank saw the same error, so the job can carry on.
  float x = 1.0f;
  s = kolo::Allreduce(&x, &x, 1, kolo::DataType::kFloat32,
                      kolo::ReduceOp::kSum);
  if (!s.ok() || x != static_cast<float>(kolo::Size())) return 1;
  std::printf("rank %d: recovered after the mismatch\n", kolo::Rank());
  return 0;
}

int Die() {
  std::vector<float> data(1 << 16, 1.0f);
  for (int step = 0; step < 50; ++step) {
    if (step == 2 && kolo::Rank() == 1) raise(SIGKILL);
    kolo::Status s =
        kolo::Allreduce(data.data(), data.data(), data.size(),
                        kolo::DataType::kFloat32, kolo::ReduceOp::kAverage);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: step %d: %s\n", kolo::Rank(), step,
                   s.ToString().c_str());
      return 3;
    }
  }
  return 0;
}

// Both ranks make one call; then rank 1 dies while rank 0 computes, and
// rank 0's next call must fail naming it.
int DieBetweenCalls() {
  float x = 1.0f;
  kolo::Status s = kolo::Allreduce(&x, &x, 1, kolo::DataType::kFloat32,
                                   kolo::ReduceOp::kSum);
  if (!s.ok() || x != 2.0f) return 1;
  usleep(200 * 1000);
  if (kolo::Rank() == 1) raise(SIGKILL);
  usleep(1000 * 1000);
  s = kolo::Allreduce(&x, &x, 1, kolo::DataType::kFloat32,
                      kolo::ReduceOp::kSum);
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(), s.ToString().c_str());
  return s.ok() ? 1 : 3;
}

// Rank 1 never makes the call rank 0 waits in, because it sleeps or is
// stopped. `after_a_call`: both first make one call together, so that on
// shm rank 0 then waits in a direct-path lease rather than in the runtime.
int Hang(bool freeze, bool after_a_call) {
  if (after_a_call) {
    float warm = 1.0f;
    kolo::Status s = kolo::Allreduce(&warm, &warm, 1, kolo::DataType::kFloat32,
                                     kolo::ReduceOp::kSum);
    if (!s.ok() || warm != 2.0f) return 1;
    // Both ranks' runtimes lease in the tick that ran it.
    usleep(200 * 1000);
  }
  if (kolo::Rank() == 1) {
    if (freeze) raise(SIGSTOP);
    sleep(120);
    return 0;
  }
  float x = 1.0f;
  kolo::Status s = kolo::Allreduce(&x, &x, 1, kolo::DataType::kFloat32,
                                   kolo::ReduceOp::kSum);
  std::fprintf(stderr, "rank %d: %s\n", kolo::Rank(), s.ToString().c_str());
  return s.ok() ? 1 : 3;
}

// Allreduces a 64 KiB float buffer until `seconds` have passed, so that a
// test can break the job while it runs (cut a host's link). Step n sums
// rank + (i + n) % 13 over the ranks: S(S-1)/2 + S((i + n) % 13), exact in
// float, and different in every step, so a stale buffer cannot pass.
int Loop(int seconds) {
  const int32_t rank = kolo::Rank();
  const int32_t size = kolo::Size();
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<float> data(64 * 1024 / sizeof(float));
  for (int64_t step = 0; std::chrono::steady_clock::now() < end; ++step) {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<float>(rank + (i + step) % 13);
    kolo::Status s =
        kolo::Allreduce(data.data(), data.data(), data.size(),
                        kolo::DataType::kFloat32, kolo::ReduceOp::kSum);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: step %lld: %s\n", rank,
                   static_cast<long long>(step), s.ToString().c_str());
      return 3;
    }
    for (size_t i = 0; i < data.size(); ++i) {
      const float expected =
          static_cast<float>(size * (size - 1) / 2 + size * ((i + step) % 13));
      if (data[i] != expected) {
        std::fprintf(stderr, "rank %d: step %lld: element %zu is %g, not %g\n",
                     rank, static_cast<long long>(step), i, data[i], expected);
        return 1;
      }
    }
    if (step == 0) {
      std::printf("rank %d: looping\n", rank);
      std::fflush(stdout);
    }
    // A breath between steps, so that four looping ranks leave the
    // machine's cores to the rest of the test.
    usleep(1000);
  }
  return 0;
}

int Reinit() {
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      if (kolo::Status s = kolo::Init(); !s.ok()) {
        std::fprintf(stderr, "round %d: init: %s\n", round,
                     s.ToString().c_str());
        return 1;
      }
    }
    float x = static_cast<float>(kolo::Rank() + round);
    kolo::Status s = kolo::Allreduce(&x, &x, 1, kolo::DataType::kFloat32,
                                     kolo::ReduceOp::kSum);
    const int32_t n = kolo::Size();
    if (!s.ok() || x != static_cast<float>(n * (n - 1) / 2 + n * round)) {
      std::fprintf(stderr, "round %d: %s, got %g\n", round,
                   s.ToString().c_str(), x);
      return 1;
    }
    if (round < 2) {
      if (kolo::Status down = kolo::Shutdown(); !down.ok()) return 1;
    }
  }
  std::printf("rank %d: three rounds of init and shutdown\n", kolo::Rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: collectives_worker matrix|mismatch|die|hang|freeze|"
                 "hang-after-a-call|freeze-after-a-call|die-between-calls|"
                 "reinit [counts...] | loop SECONDS\n");
    return 2;
  }
  const std::string scenario = argv[1];
  kolo::Status init = kolo::Init();
  if (!init.ok()) {
    std::fprintf(stderr, "kolo::Init failed: %s\n", init.ToString().c_str());
    return 1;
  }
  int code = 2;
  if (scenario == "matrix") {
    std::vector<int64_t> counts;
    for (int i = 2; i < argc; ++i) counts.push_back(std::atoll(argv[i]));
    if (counts.empty()) counts = {0, 1, 7, (1 << 20) + 3};
    code = Matrix(counts);
  } else if (scenario == "mismatch") {
    code = Mismatch();
  } else if (scenario == "die") {
    code = Die();
  } else if (scenario == "reinit") {
    code = Reinit();
  } else if (scenario == "loop" && argc == 3) {
    code = Loop(std::atoi(argv[2]));
  } else if (scenario == "hang" || scenario == "freeze") {
    code = Hang(scenario == "freeze", false);
  } else if (scenario == "die-between-calls") {
    code = DieBetweenCalls();
  } else if (scenario == "hang-after-a-call" ||
             scenario == "freeze-after-a-call") {
    code = Hang(scenario == "freeze-after-a-call", true);
  }
  if (code == 0) {
    kolo::Status down = kolo::Shutdown();
    if (!down.ok()) {
      std::fprintf(stderr, "rank %d: shutdown: %s\n", kolo::Rank(),
                   down.ToString().c_str());
      return 1;
    }
  }
  return code;
}
