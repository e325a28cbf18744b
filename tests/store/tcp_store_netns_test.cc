// The store under a flood from another host: a cluster of two network
// namespaces (testing/netns_cluster.h), the store served from one, 1,000
// connect / send garbage / close cycles from the other. Whatever a peer
// without the secret does, the server must end where it started: its
// threads, descriptors and held memory flat.
//
// Needs root and `ip` for the namespaces (skipped otherwise; a failure
// under CI=true). The server runs in this process, so the test measures
// the server's own process.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "store/tcp_store.h"
#include "testing/netns_cluster.h"
#include "testing/process_resources.h"
#include "testing/requirements.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using testing::NetnsCluster;
using testing::RunResult;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

// Runs `body` on a thread inside `host`'s network namespace and waits for
// it: the sockets it makes live there, whichever thread uses them later.
Status InNamespace(const NetnsCluster::Host& host,
                   const std::function<void()>& body) {
  Status entered = Status::Ok();
  std::thread([&] {
    const std::string path = "/var/run/netns/" + host.name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
      entered = Internal("cannot enter the network namespace " + path);
    } else {
      body();
    }
    if (fd >= 0) ::close(fd);
  }).join();
  return entered;
}

// A bash program for the attacking host: `loops` loops side by side, each
// making `cycles` connections to address:port, each sending one kind of
// garbage (a hello that claims 2 GiB, 64 random bytes, an HTTP request)
// and closing at once. Prints one line per loop: how many connected.
std::string Flood(const std::string& address, int port, int loops, int cycles) {
  std::ostringstream script;
  script << "trap '' PIPE; for j in $(seq " << loops << "); do ( ok=0; "
         << "for i in $(seq " << cycles << "); do "
         << "if exec 3<>/dev/tcp/" << address << "/" << port
         << "; then ok=$((ok+1)); case $((i % 3)) in "
         << "0) printf '\\xff\\xff\\xff\\x7f' >&3 ;; "
         << "1) head -c 64 /dev/urandom >&3 ;; "
         << "2) printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 ;; esac; "
         << "exec 3>&-; fi; done; echo $ok ) & done; wait";
  return script.str();
}

int64_t SumOfLines(const std::string& text) {
  std::istringstream lines(text);
  int64_t sum = 0;
  for (int64_t n = 0; lines >> n;) sum += n;
  return sum;
}

// Waits until the server has handled `connections` (refused or turned
// away), then until its threads and descriptors are back to `baseline`
// (reaped within 100 ms of each connection's end), for at most 30 s.
void Settle(const TcpStoreServer& server, int64_t connections,
            const testing::ProcessResources& baseline) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (server.rejected_connections() + server.turned_away_connections() <
             connections &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  while (testing::MeasureProcessResources().GrewSince(baseline) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
}

TEST(TcpStoreNetnsTest, AThousandGarbageConnectionsLeaveTheServerFlat) {
  KOLO_REQUIRE_OR_SKIP(
      testing::WhyNetnsUnavailable().empty(),
      "network namespaces: " << testing::WhyNetnsUnavailable());
  StatusOr<std::unique_ptr<NetnsCluster>> cluster = NetnsCluster::Create(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const NetnsCluster::Host& store_host = (*cluster)->hosts()[0];
  const NetnsCluster::Host& attacker = (*cluster)->hosts()[1];
  StatusOr<std::unique_ptr<TcpStoreServer>> server = Internal("not started");
  ASSERT_TRUE(InNamespace(store_host, [&] {
                server = TcpStoreServer::Start(store_host.address, 0, kSecret);
              }).ok());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();

  const testing::ProcessResources idle = testing::MeasureProcessResources();
  // A first round warms up what a process keeps once it has had many
  // threads (malloc's per-thread arenas, the thread stack cache), so that
  // the measured round sees only what the server itself keeps.
  RunResult warm_up =
      (*cluster)->RunIn(attacker, Flood(store_host.address, port, 4, 50),
                        std::chrono::seconds(120));
  ASSERT_EQ(warm_up.exit_code, 0) << warm_up.err;
  int64_t connections = SumOfLines(warm_up.out);
  Settle(**server, connections, idle);
  const testing::ProcessResources before = testing::MeasureProcessResources();
  const int64_t held_before = testing::HeldMemoryBytes();

  RunResult flood =
      (*cluster)->RunIn(attacker, Flood(store_host.address, port, 4, 250),
                        std::chrono::seconds(120));
  ASSERT_EQ(flood.exit_code, 0) << flood.err;
  const int64_t flooded = SumOfLines(flood.out);
  EXPECT_GE(flooded, 990) << "most cycles must connect: " << flood.out;
  connections += flooded;
  Settle(**server, connections, before);

  const testing::ProcessResources after = testing::MeasureProcessResources();
  const int64_t held_after = testing::HeldMemoryBytes();
  std::printf(
      "after %lld connections from %s: %s -> %s, memory held %lld -> "
      "%lld bytes; refused %lld, turned away %lld\n",
      static_cast<long long>(flooded), attacker.address.c_str(),
      before.ToString().c_str(), after.ToString().c_str(),
      static_cast<long long>(held_before), static_cast<long long>(held_after),
      static_cast<long long>((*server)->rejected_connections()),
      static_cast<long long>((*server)->turned_away_connections()));
  EXPECT_EQ(after.threads, before.threads) << after.ToString();
  EXPECT_EQ(after.fds, before.fds) << after.ToString();
  // 2 MiB: a leak of a few KiB per connection (a kept thread stack, a
  // buffer, a socket's bookkeeping) is 4 MiB or more over 1,000; what
  // malloc keeps in its free lists, or the counters of the refused hosts'
  // log, stays well below.
  EXPECT_LT(held_after - held_before, int64_t{2} << 20)
      << "memory held " << held_before << " -> " << held_after << " bytes";
  EXPECT_EQ(
      (*server)->rejected_connections() + (*server)->turned_away_connections(),
      connections);
  // Still serving: an honest client from the attacker's host gets in.
  StatusOr<std::unique_ptr<TcpStoreClient>> honest = Internal("not tried");
  ASSERT_TRUE(InNamespace(attacker, [&] {
                honest = TcpStoreClient::Connect(
                    store_host.address, port, kSecret, 0, milliseconds(10000));
              }).ok());
  ASSERT_TRUE(honest.ok()) << honest.status().ToString();
  EXPECT_TRUE((*honest)->Set("after the flood", "served").ok());
  EXPECT_TRUE((*honest)->Close().ok());
  (*server)->Stop();
}

}  // namespace
}  // namespace kolo
