// TcpMesh with ranks as threads over a MemoryStore, on loopback: the mesh
// forms despite stray connections, which are refused and counted; it
// admits only ranks that prove the job secret; it bounds its pending
// connections and does not spin out of descriptors; transfers
// are full-duplex; a rank that never comes, a silent peer and a closed one
// give errors that name them, within the timeout.
#include "transport/tcp_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "net/socket.h"
#include "store/memory_store.h"
#include "store/message_auth.h"
#include "testing/engines.h"
#include "testing/timing.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TcpMesh::Options OptionsFor(int32_t rank, int32_t size,
                            std::chrono::milliseconds timeout) {
  TcpMesh::Options options;
  options.rank = rank;
  options.size = size;
  options.timeout = timeout;
  options.job_secret = testing::kTestJobSecret;
  return options;
}

// Forms a mesh of `size` ranks as threads; the results in rank order.
std::vector<StatusOr<std::unique_ptr<TcpMesh>>> FormMesh(
    int32_t size, Store* store,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  std::vector<std::future<StatusOr<std::unique_ptr<TcpMesh>>>> pending;
  for (int32_t r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      return TcpMesh::Connect(OptionsFor(r, size, timeout), store);
    }));
  }
  std::vector<StatusOr<std::unique_ptr<TcpMesh>>> meshes;
  for (auto& p : pending) meshes.push_back(p.get());
  return meshes;
}

// Every ordered pair (i, j) can send i*100+j to j: each rank sends to rank
// r+k and receives from r-k in round k.
TEST(TcpMeshTest, EveryPairIsConnected) {
  constexpr int32_t kRanks = 4;
  MemoryStore store;
  auto meshes = FormMesh(kRanks, &store);
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kRanks);
  for (int32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (int32_t k = 1; k < kRanks; ++k) {
        const int32_t to = (r + k) % kRanks, from = (r - k + kRanks) % kRanks;
        int32_t out = r * 100 + to, in = -1;
        TcpMesh::Transfer t;
        t.to = to;
        t.send = {{&out, sizeof(out)}};
        t.from = from;
        t.recv = {{&in, sizeof(in)}};
        Status s = (*meshes[r])->Run(t, "test");
        if (!s.ok() || in != from * 100 + r) {
          failures[r] += "round " + std::to_string(k) + ": " + s.ToString() +
                         " got " + std::to_string(in) + "; ";
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int32_t r = 0; r < kRanks; ++r) EXPECT_EQ(failures[r], "") << r;
  for (auto& m : meshes) EXPECT_EQ((*m)->refused_connections(), 0);
}

// Both ranks send 32 MiB to each other at once, far more than the socket
// buffers hold: a transfer that sent before receiving would deadlock.
TEST(TcpMeshTest, TransfersAreFullDuplex) {
  MemoryStore store;
  auto meshes = FormMesh(2, &store);
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  constexpr size_t kWords = 8 << 20;
  std::vector<std::vector<uint32_t>> out(2), in(2);
  for (int r = 0; r < 2; ++r) {
    out[r].resize(kWords);
    std::iota(out[r].begin(), out[r].end(), r * 7u);
    in[r].assign(kWords, 0);
  }
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      TcpMesh::Transfer t;
      t.to = t.from = 1 - r;
      // Two spans each way, to cross a span boundary mid-stream.
      const int64_t half = kWords / 2 * sizeof(uint32_t);
      t.send = {{out[r].data(), half}, {out[r].data() + kWords / 2, half}};
      t.recv = {{in[r].data(), half}, {in[r].data() + kWords / 2, half}};
      results[r] = (*meshes[r])->Run(t, "test");
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].ToString();
    EXPECT_TRUE(in[r] == out[1 - r]) << "rank " << r;
  }
}

// Connects to rank 0's listener once it is published, as a stranger would.
Socket ConnectToRankZero(MemoryStore* store) {
  StatusOr<std::string> address =
      store->Get("addr/0", std::chrono::milliseconds(5000));
  EXPECT_TRUE(address.ok()) << address.status().ToString();
  const size_t colon = address->rfind(':');
  StatusOr<Socket> socket = Socket::Connect(
      address->substr(0, colon), std::stoi(address->substr(colon + 1)),
      DeadlineAfter(std::chrono::milliseconds(5000)));
  EXPECT_TRUE(socket.ok()) << socket.status().ToString();
  return std::move(socket).value();
}

// Rank 0 of two, forming its mesh on another thread.
std::future<StatusOr<std::unique_ptr<TcpMesh>>> RankZeroOfTwo(
    MemoryStore* store,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  return std::async(std::launch::async, [=] {
    return TcpMesh::Connect(OptionsFor(0, 2, timeout), store);
  });
}

// Rank 1 joins rank 0; both results, rank 0's first.
std::pair<StatusOr<std::unique_ptr<TcpMesh>>,
          StatusOr<std::unique_ptr<TcpMesh>>>
JoinRankOne(MemoryStore* store,
            std::future<StatusOr<std::unique_ptr<TcpMesh>>>* rank0) {
  StatusOr<std::unique_ptr<TcpMesh>> rank1 = TcpMesh::Connect(
      OptionsFor(1, 2, std::chrono::milliseconds(10000)), store);
  return {rank0->get(), std::move(rank1)};
}

// A hello as the mesh writes it: magic, from, to (network order), the
// round's id (as the store holds it, in hex), a nonce.
std::string HelloBytes(int32_t from, int32_t to, const std::string& round_hex) {
  std::string hello = "kolo-tcp";
  for (int32_t value : {from, to}) {
    for (int shift = 24; shift >= 0; shift -= 8)
      hello.push_back(static_cast<char>(value >> shift));
  }
  for (size_t i = 0; i + 1 < round_hex.size(); i += 2)
    hello.push_back(
        static_cast<char>(std::stoi(round_hex.substr(i, 2), 0, 16)));
  hello.resize(8 + 4 + 4 + kStoreNonceBytes, '\0');
  hello += RandomNonce().value();
  return hello;
}

void Send(Socket* socket, const std::string& bytes) {
  ASSERT_TRUE(socket
                  ->SendAll(bytes.data(), bytes.size(),
                            DeadlineAfter(std::chrono::seconds(5)))
                  .ok());
}

// A refusal is answered by closing: the stranger reads end of file.
void ExpectClosed(Socket* socket) {
  char byte;
  Status read =
      socket->RecvAll(&byte, 1, DeadlineAfter(std::chrono::seconds(5)));
  EXPECT_EQ(read.code(), StatusCode::kPeerFailure) << read.ToString();
}

// Strangers reach rank 0's listener before its real peer: one of another
// round, one with this round but an impossible rank, one that says
// nothing. Each is dropped and counted; the mesh forms anyway.
TEST(TcpMeshTest, StrayConnectionsAreRefusedAndTheMeshStillForms) {
  MemoryStore store;
  auto rank0 = RankZeroOfTwo(&store);
  Socket other_round = ConnectToRankZero(&store);
  Send(&other_round, HelloBytes(1, 0, std::string(64, '0')));
  StatusOr<std::string> round = store.Get("round", std::chrono::seconds(5));
  ASSERT_TRUE(round.ok());
  Socket wrong_rank = ConnectToRankZero(&store);
  Send(&wrong_rank, HelloBytes(7, 0, *round));
  Socket silent = ConnectToRankZero(&store);
  ExpectClosed(&other_round);
  ExpectClosed(&wrong_rank);

  auto [mesh0, rank1] = JoinRankOne(&store, &rank0);
  ASSERT_TRUE(mesh0.ok()) << mesh0.status().ToString();
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();
  EXPECT_EQ((*mesh0)->refused_connections(), 3);
  EXPECT_EQ((*rank1)->refused_connections(), 0);

  // And the admitted connection carries data.
  int32_t ping = 42, got = 0;
  TcpMesh::Transfer send;
  send.to = 1;
  send.send = {{&ping, sizeof(ping)}};
  TcpMesh::Transfer recv;
  recv.from = 0;
  recv.recv = {{&got, sizeof(got)}};
  ASSERT_TRUE((*mesh0)->Run(send, "test").ok());
  ASSERT_TRUE((*rank1)->Run(recv, "test").ok());
  EXPECT_EQ(got, 42);
}

// A stranger that knows everything in the store (the round, every address)
// and every byte rank 0 sends, but not the job secret: it says a perfect
// hello as rank 1, is challenged, and its proof (a MAC of the challenge
// under its own guess of a secret) is refused. The real rank 1, which
// holds the secret, is admitted after it.
TEST(TcpMeshTest, AStrangerWithoutTheSecretIsRefused) {
  MemoryStore store;
  auto rank0 = RankZeroOfTwo(&store);
  Socket stranger = ConnectToRankZero(&store);
  StatusOr<std::string> round = store.Get("round", std::chrono::seconds(5));
  ASSERT_TRUE(round.ok());
  Send(&stranger, HelloBytes(1, 0, *round));
  std::string challenge(8 + 4 + 4 + 2 * kStoreNonceBytes + kStoreTagBytes,
                        '\0');
  ASSERT_TRUE(stranger
                  .RecvAll(&challenge[0], challenge.size(),
                           DeadlineAfter(std::chrono::seconds(5)))
                  .ok());
  EXPECT_EQ(challenge.substr(0, 16),
            std::string("kolo-tcp\0\0\0\0\0\0\0\1", 16));  // rank 0 to 1
  Send(&stranger, HmacSha256("a guess at the job secret", challenge));
  ExpectClosed(&stranger);

  auto [mesh0, rank1] = JoinRankOne(&store, &rank0);
  ASSERT_TRUE(mesh0.ok()) << mesh0.status().ToString();
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();
  EXPECT_EQ((*mesh0)->refused_connections(), 1);
}

// Two ranks with different secrets: rank 0 cannot prove its secret to
// rank 1, which names it and gives up; rank 0 admits no one.
TEST(TcpMeshTest, RanksWithDifferentSecretsRefuseEachOther) {
  MemoryStore store;
  auto rank0 = RankZeroOfTwo(&store, std::chrono::milliseconds(1500));
  TcpMesh::Options other = OptionsFor(1, 2, std::chrono::milliseconds(1500));
  other.job_secret = "another job's secret, 32 bytes!";
  StatusOr<std::unique_ptr<TcpMesh>> rank1 = TcpMesh::Connect(other, &store);
  ASSERT_FALSE(rank1.ok());
  EXPECT_EQ(rank1.status().code(), StatusCode::kPeerFailure);
  EXPECT_THAT(rank1.status().message(),
              HasSubstr("could not prove it holds the job secret"));
  StatusOr<std::unique_ptr<TcpMesh>> mesh0 = rank0.get();
  ASSERT_FALSE(mesh0.ok());
  EXPECT_EQ(mesh0.status().code(), StatusCode::kTimeout);
}

TEST(TcpMeshTest, AMissingOrShortSecretIsRefusedUpFront) {
  MemoryStore store;
  for (const char* secret : {"", "short"}) {
    TcpMesh::Options options = OptionsFor(0, 2, std::chrono::milliseconds(100));
    options.job_secret = secret;
    StatusOr<std::unique_ptr<TcpMesh>> mesh = TcpMesh::Connect(options, &store);
    ASSERT_FALSE(mesh.ok());
    EXPECT_EQ(mesh.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(mesh.status().message(), HasSubstr("tcp engine of rank 0"));
  }
}

// More strangers than the listener holds: each beyond 64 displaces the
// oldest, which reads end of file at once, not at the handshake's 5 s;
// the real rank 1 comes last and is still admitted.
TEST(TcpMeshTest, PendingConnectionsAreBoundedAndTheOldestMakeRoom) {
  MemoryStore store;
  auto rank0 = RankZeroOfTwo(&store);
  constexpr int kStrangers = 70;
  std::vector<Socket> strangers;
  for (int i = 0; i < kStrangers; ++i)
    strangers.push_back(ConnectToRankZero(&store));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kStrangers - 64; ++i) ExpectClosed(&strangers[i]);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));

  auto [mesh0, rank1] = JoinRankOne(&store, &rank0);
  ASSERT_TRUE(mesh0.ok()) << mesh0.status().ToString();
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();
  EXPECT_EQ((*mesh0)->refused_connections(), kStrangers);
}

// Rank 0 in a process out of file descriptors (RLIMIT_NOFILE lowered once
// it listens): accept() fails with EMFILE while strangers wait in the
// backlog. The listener must not make poll spin: rank 0 sheds them on its
// reserve descriptor and sleeps until its timeout, using a small share of
// a core. In a child process, since the limit is the process's.
TEST(TcpMeshTest, OutOfDescriptorsTheListenerShedsConnectionsWithoutSpinning) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    MemoryStore store;
    std::vector<int> strangers;
    for (int i = 0; i < 8; ++i)
      strangers.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    std::thread connector([&] {
      StatusOr<std::string> address =
          store.Get("addr/0", std::chrono::milliseconds(5000));
      if (!address.ok()) _exit(10);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      // No descriptor above those open now can be made.
      int lowest_free = 0;
      while (::fcntl(lowest_free, F_GETFD) != -1) ++lowest_free;
      rlimit limit{};
      ::getrlimit(RLIMIT_NOFILE, &limit);
      limit.rlim_cur = static_cast<rlim_t>(lowest_free);
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(11);
      const size_t colon = address->rfind(':');
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port =
          htons(static_cast<uint16_t>(std::stoi(address->substr(colon + 1))));
      ::inet_pton(AF_INET, address->substr(0, colon).c_str(), &to.sin_addr);
      for (int fd : strangers) {
        if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0)
          _exit(12);
      }
    });
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    StatusOr<std::unique_ptr<TcpMesh>> mesh = TcpMesh::Connect(
        OptionsFor(0, 2, std::chrono::milliseconds(1500)), &store);
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    connector.join();
    auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
    const double cpu = seconds(after.ru_utime) - seconds(before.ru_utime) +
                       seconds(after.ru_stime) - seconds(before.ru_stime);
    if (mesh.ok() || mesh.status().code() != StatusCode::kTimeout) _exit(13);
    // Spinning would burn the whole 1.5 s.
    if (cpu > 0.5) _exit(14);
    // Every stranger was accepted to be closed.
    if (mesh.status().message().find("refused 8 other") == std::string::npos)
      _exit(15);
    _exit(0);
  }
  // Bounded: a listener that spins would never reach its timeout.
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 200 && reaped == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reaped = ::waitpid(child, &status, WNOHANG);
  }
  if (reaped == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL() << "rank 0 still ran 10 s after its 1.5 s timeout: poll spun";
  }
  ASSERT_EQ(reaped, child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: no address, 11: setrlimit, 12: connect, 13: not a timeout, "
         "14: poll spun, 15: strangers not shed";
}

// Rank 2 of 3 never comes: ranks 0 and 1 give up at the timeout, naming it.
TEST(TcpMeshTest, ARankThatNeverComesIsNamedAtTheTimeout) {
  MemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  auto r0 = std::async(std::launch::async, [&] {
    return TcpMesh::Connect(OptionsFor(0, 3, std::chrono::milliseconds(500)),
                            &store);
  });
  StatusOr<std::unique_ptr<TcpMesh>> r1 = TcpMesh::Connect(
      OptionsFor(1, 3, std::chrono::milliseconds(500)), &store);
  StatusOr<std::unique_ptr<TcpMesh>> m0 = r0.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500) + testing::kSchedulingSlack);
  ASSERT_FALSE(m0.ok());
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(m0.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(m0.status().message(),
              MatchesRegex("rank 0 \\(127\\.0\\.0\\.1:[0-9]+\\) waited 500 ms "
                           "for rank 2 to connect"));
  EXPECT_EQ(r1.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(r1.status().message(), HasSubstr("for rank 2 to connect"));
}

// A peer that stays silent: kTimeout naming it, once the timeout passed;
// the error is sticky.
TEST(TcpMeshTest, ASilentPeerTimesOutAndTheErrorSticks) {
  MemoryStore store;
  auto meshes = FormMesh(2, &store, std::chrono::milliseconds(300));
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  int32_t got = 0;
  TcpMesh::Transfer recv;
  recv.from = 1;
  recv.recv = {{&got, sizeof(got)}};
  const auto start = std::chrono::steady_clock::now();
  Status silent = (*meshes[0])->Run(recv, "allreduce");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::milliseconds(300) + testing::kSchedulingSlack);
  EXPECT_EQ(silent.code(), StatusCode::kTimeout);
  EXPECT_THAT(silent.message(),
              MatchesRegex("rank 1 \\(127\\.0\\.0\\.1:[0-9]+\\) sent nothing "
                           "for 300 ms during allreduce"));
  Status again = (*meshes[0])->Run(recv, "barrier");
  EXPECT_EQ(again.code(), silent.code());
  EXPECT_EQ(again.message(), silent.message());
  EXPECT_EQ((*meshes[0])->error().message(), silent.message());
}

// A peer that closes its end: kPeerFailure naming it, at once.
TEST(TcpMeshTest, APeerThatClosesIsNamed) {
  MemoryStore store;
  auto meshes = FormMesh(2, &store);
  for (auto& m : meshes) ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    meshes[1]->reset();
  });
  std::vector<char> big(1 << 20);
  TcpMesh::Transfer t;
  t.to = t.from = 1;
  t.send = {{big.data(), static_cast<int64_t>(big.size())}};
  t.recv = {{big.data(), static_cast<int64_t>(big.size())}};
  Status closed = (*meshes[0])->Run(t, "allgatherv");
  closer.join();
  EXPECT_EQ(closed.code(), StatusCode::kPeerFailure);
  EXPECT_THAT(closed.message(),
              MatchesRegex("rank 1 \\(127\\.0\\.0\\.1:[0-9]+\\) closed the "
                           "connection during allgatherv"));
}

}  // namespace
}  // namespace kolo
