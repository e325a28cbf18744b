// ShmGroup with ranks as threads over a MemoryStore, a peer that never
// arrives, and a peer in a forked process that dies.
#include "transport/shm_group.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "store/tcp_store.h"
#include "testing/own_shm_segments.h"
#include "testing/timing.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

// The job secret of the tests that meet over a TcpStore (at least
// kMinJobSecretBytes).
constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

ShmGroup::Options OptionsFor(int32_t rank, int32_t size) {
  ShmGroup::Options options;
  options.rank = rank;
  options.size = size;
  options.areas = 2;
  options.area_bytes = 4096;
  options.timeout = std::chrono::milliseconds(2000);
  return options;
}

// Rank r writes r * 1000 + round into area (round % 2); after each sync
// every rank reads every peer's value for that round.
TEST(ShmGroupTest, WhatARankPublishesBeforeASyncEveryPeerReadsAfterIt) {
  constexpr int kRanks = 4;
  constexpr int kRounds = 200;
  MemoryStore store;
  std::vector<int> errors(kRanks, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      StatusOr<std::unique_ptr<ShmGroup>> group =
          ShmGroup::Create(OptionsFor(rank, kRanks), store, "t/");
      if (!group.ok()) {
        ++errors[rank];
        return;
      }
      for (int round = 0; round < kRounds; ++round) {
        const int64_t value = rank * 1000 + round;
        std::memcpy((*group)->Area(rank, round % 2), &value, sizeof(value));
        if (!(*group)->Sync("test").ok()) {
          ++errors[rank];
          return;
        }
        for (int peer = 0; peer < kRanks; ++peer) {
          int64_t seen = 0;
          std::memcpy(&seen, (*group)->Area(peer, round % 2), sizeof(seen));
          if (seen != peer * 1000 + round) ++errors[rank];
        }
      }
      if ((*group)->syncs() != kRounds) ++errors[rank];
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, std::vector<int>(kRanks, 0));
  // Every name was unlinked once all ranks had mapped the segments.
  EXPECT_THAT(testing::OwnShmSegments(), ::testing::IsEmpty());
}

TEST(ShmGroupTest, ScalarsTravelWithTheSync) {
  MemoryStore store;
  std::vector<int64_t> sums(2, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto group = ShmGroup::Create(OptionsFor(rank, 2), store, "s/");
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      (*group)->Scalar(rank, 1).store(10 + rank);
      ASSERT_TRUE((*group)->Sync("scalars").ok());
      sums[rank] =
          (*group)->Scalar(0, 1).load() + (*group)->Scalar(1, 1).load();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, (std::vector<int64_t>{21, 21}));
}

// A ring that finds no sleeper writes nothing; the sleeper's last look
// after it registers must then see what was published. Rank 1 publishes
// and rings at random moments around rank 0's registration; a ring lost in
// that window would leave rank 0 asleep for the whole 2 s slice.
TEST(ShmGroupTest, ARingIsNeverLostAroundASleeperRegistering) {
  constexpr int kRounds = 300;
  MemoryStore store;
  std::atomic<int> waiting_round{-1};
  std::atomic<bool> stop{false};
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto group = ShmGroup::Create(OptionsFor(rank, 2), store, "bell/");
      if (!group.ok()) {
        failures[rank] = group.status().ToString();
        stop = true;
        return;
      }
      std::atomic<int64_t>& published = (*group)->Scalar(1, 0);
      std::mt19937 random(5);
      for (int round = 0; round < kRounds && !stop; ++round) {
        if (rank == 1) {
          while (waiting_round.load() < round && !stop) {
            std::this_thread::yield();
          }
          std::this_thread::sleep_for(std::chrono::microseconds(random() % 60));
          published.store(round + 1, std::memory_order_release);
          (*group)->RingDoorbell();
          continue;
        }
        const auto began = std::chrono::steady_clock::now();
        waiting_round.store(round);
        while (published.load(std::memory_order_acquire) <= round) {
          (*group)->AwaitDoorbell(std::chrono::seconds(2), [&] {
            return published.load(std::memory_order_acquire) > round;
          });
        }
        if (std::chrono::steady_clock::now() - began >
            std::chrono::seconds(1)) {
          failures[0] = "round " + std::to_string(round) +
                        ": the ring was lost, and rank 0 slept out its slice";
          stop = true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<std::string>(2, ""));
}

TEST(ShmGroupTest, BadOptionsAreNamed) {
  MemoryStore store;
  ShmGroup::Options options = OptionsFor(0, 1);
  options.area_bytes = 1000;
  EXPECT_THAT(ShmGroup::Create(options, store, "b/").status().message(),
              HasSubstr("multiple of 4096 bytes, got 1000"));
}

// Rank 1 is a forked process that joins the group and exits: rank 0's
// next sync names it as a peer failure, well before the timeout.
TEST(ShmGroupTest, APeerProcessThatDiesIsNamed) {
  int port_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int port = 0;
    if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) _exit(2);
    auto store = TcpStoreClient::Connect("127.0.0.1", port, kSecret, 1,
                                         std::chrono::seconds(5));
    if (!store.ok()) _exit(3);
    auto group = ShmGroup::Create(OptionsFor(1, 2), **store, "d/");
    _exit(group.ok() ? 0 : 4);
  }
  auto server = TcpStoreServer::Start("127.0.0.1", 0, kSecret);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  ASSERT_EQ(write(port_pipe[1], &port, sizeof(port)),
            static_cast<ssize_t>(sizeof(port)));
  auto store = TcpStoreClient::Connect("127.0.0.1", port, kSecret, 0,
                                       std::chrono::seconds(5));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ShmGroup::Options options = OptionsFor(0, 2);
  options.timeout = testing::kFastFailTimeout;
  auto group = ShmGroup::Create(options, **store, "d/");
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  const auto start = std::chrono::steady_clock::now();
  Status synced = (*group)->Sync("allreduce");
  EXPECT_EQ(synced.code(), StatusCode::kPeerFailure) << synced.ToString();
  EXPECT_THAT(synced.message(),
              HasSubstr("shm allreduce: rank 1 (pid " + std::to_string(child) +
                        ") exited while rank 0 waited for it"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, testing::kFastFailBound);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(port_pipe[0]);
  close(port_pipe[1]);
}

// A live peer that never syncs: the waiter sleeps (no spinning past the
// first 50 us) and gives up after the timeout.
TEST(ShmGroupTest, APeerThatNeverArrivesTimesOut) {
  MemoryStore store;
  std::unique_ptr<ShmGroup> silent;
  std::thread other([&] {
    auto group = ShmGroup::Create(OptionsFor(1, 2), store, "q/");
    ASSERT_TRUE(group.ok());
    silent = std::move(group).value();
  });
  ShmGroup::Options options = OptionsFor(0, 2);
  options.timeout = std::chrono::milliseconds(1000);
  auto group = ShmGroup::Create(options, store, "q/");
  other.join();
  ASSERT_TRUE(group.ok());
  const std::clock_t cpu_before = std::clock();
  Status synced = (*group)->Sync("barrier");
  const double cpu_seconds =
      static_cast<double>(std::clock() - cpu_before) / CLOCKS_PER_SEC;
  EXPECT_EQ(synced.code(), StatusCode::kTimeout) << synced.ToString();
  EXPECT_THAT(synced.message(),
              HasSubstr("shm barrier: rank 1 did not arrive within 1000 ms"));
  // Waiting 1 s costs a few ms of CPU when the waiter sleeps, a whole
  // second when it spins on a core of its own. A loaded machine can only
  // lower the figure, so the bound cannot fail for want of CPU.
  EXPECT_LT(cpu_seconds, 0.25);
}

}  // namespace
}  // namespace kolo
