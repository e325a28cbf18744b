// Runtimes as threads of one test: a world of ranks started together and
// shut down together, and a way to run the same code on every rank.
#ifndef KOLO_TESTING_RUNTIME_WORLD_H_
#define KOLO_TESTING_RUNTIME_WORLD_H_

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/runtime.h"
#include "runtime/synchronous.h"

namespace kolo::testing {

struct RuntimeRank {
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<SynchronousCollectives> sync;
};

// Shuts its ranks down together, as the processes of a job do (a rank's
// shutdown waits for the others').
class RuntimeWorld : public std::vector<RuntimeRank> {
 public:
  RuntimeWorld() = default;
  RuntimeWorld(RuntimeWorld&&) = default;
  RuntimeWorld& operator=(RuntimeWorld&&) = default;
  ~RuntimeWorld() {
    std::vector<std::thread> leaving;
    for (RuntimeRank& rank : *this) {
      leaving.emplace_back([&rank] {
        if (rank.runtime) (void)rank.runtime->Shutdown();
      });
    }
    for (std::thread& t : leaving) t.join();
  }
};

// Runs start(rank) for `size` ranks concurrently (their rendezvous needs
// all of them); a rank that fails to start is reported and left out.
inline RuntimeWorld StartWorld(
    int32_t size,
    std::function<StatusOr<std::unique_ptr<Runtime>>(int32_t)> start) {
  std::vector<std::future<StatusOr<std::unique_ptr<Runtime>>>> pending;
  for (int32_t r = 0; r < size; ++r)
    pending.push_back(std::async(std::launch::async, start, r));
  RuntimeWorld world;
  for (auto& p : pending) {
    auto runtime = p.get();
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    if (!runtime.ok()) continue;
    RuntimeRank rank;
    rank.runtime = std::move(runtime).value();
    rank.sync = std::make_unique<SynchronousCollectives>(rank.runtime.get());
    world.push_back(std::move(rank));
  }
  return world;
}

// Runs fn(rank, RuntimeRank&) on one thread per rank; returns the results.
template <typename Fn>
auto OnEveryRank(RuntimeWorld& world, Fn fn) {
  using Result = decltype(fn(0, world[0]));
  std::vector<std::future<Result>> pending;
  for (size_t r = 0; r < world.size(); ++r) {
    pending.push_back(std::async(std::launch::async, [&, r] {
      return fn(static_cast<int32_t>(r), world[r]);
    }));
  }
  std::vector<Result> results;
  for (auto& p : pending) results.push_back(p.get());
  return results;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTING_RUNTIME_WORLD_H_
