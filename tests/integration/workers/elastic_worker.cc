// A worker of `kolorun --elastic` for the elastic tests: it fits y = X w by
// SGD, with a global batch of fixed size split over whichever workers the
// round has, and injects the faults it is told to.
//
//   elastic_worker --steps N --global-batch G --commit-every K
//                  [--step-ms T] [--kill STEP:WORKER]...
//                  [--freeze STEP:WORKER]... [--kill-in-commit STEP:WORKER]
//                  [--crash-from-worker W] [--exit-after-first-step-from W]
//                  [--exit-after-first-step-below W] [--count-resources-to R]
//
// With --count-resources-to R the job runs until the survivors have seen R
// resets, then ten steps more; --steps is not used.
//
// Step s always takes samples s*G .. s*G+G-1 of one fixed order, and every
// worker adds the gradient sum of its contiguous part of them; the update
// divides by G. So any sequence of worker counts gives the update of one
// worker with batch G, up to the order of floating-point sums. The state
// (w, the step, and a checksum of the sample indices every applied step
// covered) is a kolo::elastic::State.
//
// Prints, as the tests read them:
//   worker W: reset R: rank r of n, resuming at step S (reached F, lost L)
//   worker W: final steps N checksum C w w0 w1 ...
//   worker W: R resets clean (threads T, fds F, shm mappings M)
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "testing/process_resources.h"

namespace {

constexpr int kDim = 8;
constexpr int64_t kSamples = 1009;  // prime: i*7919 mod it is a permutation
constexpr double kLearningRate = 0.05;

struct Fault {
  int64_t step;
  int64_t worker;
};

struct Flags {
  int64_t steps = 60;
  int64_t global_batch = 24;
  int64_t commit_every = 5;
  int64_t step_ms = 0;
  std::vector<Fault> kills, freezes, kills_in_commit;
  int64_t crash_from_worker = -1;
  int64_t exit_after_first_step_from = -1;
  int64_t exit_after_first_step_below = INT64_MAX;
  int64_t count_resources_to = 0;
};

bool ParseFault(const char* text, Fault* fault) {
  return std::sscanf(text, "%ld:%ld", &fault->step, &fault->worker) == 2;
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    Fault fault{};
    if (flag == "--steps") {
      flags->steps = std::atol(value);
    } else if (flag == "--global-batch") {
      flags->global_batch = std::atol(value);
    } else if (flag == "--commit-every") {
      flags->commit_every = std::atol(value);
    } else if (flag == "--step-ms") {
      flags->step_ms = std::atol(value);
    } else if (flag == "--kill" && ParseFault(value, &fault)) {
      flags->kills.push_back(fault);
    } else if (flag == "--freeze" && ParseFault(value, &fault)) {
      flags->freezes.push_back(fault);
    } else if (flag == "--kill-in-commit" && ParseFault(value, &fault)) {
      flags->kills_in_commit.push_back(fault);
    } else if (flag == "--crash-from-worker") {
      flags->crash_from_worker = std::atol(value);
    } else if (flag == "--exit-after-first-step-from") {
      flags->exit_after_first_step_from = std::atol(value);
    } else if (flag == "--exit-after-first-step-below") {
      flags->exit_after_first_step_below = std::atol(value);
    } else if (flag == "--count-resources-to") {
      flags->count_resources_to = std::atol(value);
    } else {
      std::fprintf(stderr, "elastic_worker: bad flag %s %s\n", flag.c_str(),
                   value);
      return false;
    }
  }
  return true;
}

bool Matches(const std::vector<Fault>& faults, int64_t step, int64_t worker) {
  return std::any_of(faults.begin(), faults.end(), [&](const Fault& f) {
    return f.step == step && f.worker == worker;
  });
}

double Feature(int64_t sample, int j) {
  return std::sin(0.37 * static_cast<double>(sample * kDim + j) + 0.11);
}

double Target(int64_t sample) {
  double y = 0;
  for (int j = 0; j < kDim; ++j) y += Feature(sample, j) * (j + 1) * 0.25;
  return y + 0.01 * std::cos(static_cast<double>(sample));
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  const char* id_text = std::getenv("KOLO_ELASTIC_WORKER");
  const int64_t me = id_text ? std::atol(id_text) : -1;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (flags.crash_from_worker >= 0 && me >= flags.crash_from_worker) {
    std::fprintf(stderr, "worker %ld: crashing at start as told\n", me);
    return 7;
  }

  kolo::elastic::State state;
  std::vector<double> w(kDim, 0.0);
  int64_t step = 0;
  double checksum = 0;
  state.Track(kolo::elastic::Field{
      "w",
      [&]() -> kolo::StatusOr<std::string> {
        if (Matches(flags.kills_in_commit, step, me)) raise(SIGKILL);
        return std::string(reinterpret_cast<const char*>(w.data()),
                           w.size() * sizeof(double));
      },
      [&](const std::string& bytes) {
        if (bytes.size() != w.size() * sizeof(double))
          return kolo::InvalidArgument("w has the wrong size");
        std::memcpy(w.data(), bytes.data(), bytes.size());
        return kolo::Status::Ok();
      }});
  state.Track("step", &step);
  state.Track("checksum", &checksum);

  int64_t furthest = 0;
  kolo::testing::ProcessResources resources_at_first_reset;
  state.OnReset([&]() {
    std::printf(
        "worker %ld: reset %d: rank %d of %d, resuming at step %ld (reached "
        "%ld, lost %ld)\n",
        me, state.resets(), kolo::Rank(), kolo::Size(), step, furthest,
        std::max<int64_t>(0, furthest - step));
    if (flags.count_resources_to > 0) {
      const kolo::testing::ProcessResources now =
          kolo::testing::MeasureProcessResources();
      if (state.resets() == 1) resources_at_first_reset = now;
      if (state.resets() == flags.count_resources_to) {
        std::printf(
            "worker %ld: %d resets %s (first %s, last %s)\n", me,
            state.resets(),
            now.GrewSince(resources_at_first_reset) ? "LEAKED" : "clean",
            resources_at_first_reset.ToString().c_str(),
            now.ToString().c_str());
      }
    }
    return kolo::Status::Ok();
  });

  kolo::Status done = kolo::elastic::Run(state, [&]() -> kolo::Status {
    std::vector<double> buffer(kDim + 1);
    int64_t last_step = flags.steps;
    if (flags.count_resources_to > 0) {
      // Counting resets, the job ends a few steps after the survivors have
      // seen enough of them; the members agree on it through the largest
      // count among them (a newcomer has seen none).
      int64_t seen = state.resets();
      KOLO_RETURN_IF_ERROR(kolo::Allreduce(
          &seen, &seen, 1, kolo::DataType::kInt64, kolo::ReduceOp::kMax));
      last_step = seen >= flags.count_resources_to ? step + 10 : INT64_MAX;
    }
    while (step < last_step) {
      if (Matches(flags.kills, step, me)) raise(SIGKILL);
      if (Matches(flags.freezes, step, me)) raise(SIGSTOP);
      const int64_t size = kolo::Size();
      const int64_t rank = kolo::Rank();
      const int64_t begin = flags.global_batch * rank / size;
      const int64_t end = flags.global_batch * (rank + 1) / size;
      std::fill(buffer.begin(), buffer.end(), 0.0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t position = step * flags.global_batch + k;
        const int64_t sample = (position * 7919) % kSamples;
        double error = -Target(sample);
        for (int j = 0; j < kDim; ++j) error += Feature(sample, j) * w[j];
        for (int j = 0; j < kDim; ++j)
          buffer[j] += 2 * error * Feature(sample, j);
        buffer[kDim] += static_cast<double>(sample);
      }
      if (flags.step_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(flags.step_ms));
      KOLO_RETURN_IF_ERROR(kolo::Allreduce(buffer.data(), buffer.data(),
                                           kDim + 1, kolo::DataType::kFloat64,
                                           kolo::ReduceOp::kSum));
      for (int j = 0; j < kDim; ++j)
        w[j] -= kLearningRate * buffer[j] / flags.global_batch;
      checksum += buffer[kDim];
      ++step;
      furthest = std::max(furthest, step);
      if (flags.exit_after_first_step_from >= 0 &&
          me >= flags.exit_after_first_step_from &&
          me < flags.exit_after_first_step_below) {
        raise(SIGKILL);
      }
      if (step % flags.commit_every == 0) {
        KOLO_RETURN_IF_ERROR(state.Commit());
      }
    }
    return kolo::Status::Ok();
  });
  if (!done.ok()) {
    std::fprintf(stderr, "worker %ld: %s\n", me, done.ToString().c_str());
    return done.code() == kolo::StatusCode::kNotFound ? 0 : 1;
  }
  std::string line = "worker " + std::to_string(me) + ": final steps " +
                     std::to_string(step) + " checksum ";
  char number[64];
  std::snprintf(number, sizeof(number), "%.0f w", checksum);
  line += number;
  for (double value : w) {
    std::snprintf(number, sizeof(number), " %.17g", value);
    line += number;
  }
  std::printf("%s\n", line.c_str());
  return 0;
}
