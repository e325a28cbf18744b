// A worker for kolorun's tests: does one scripted thing per run, chosen by
// argv, so that each test states what the ranks do in its own command line.
//
//   print LINES           LINES lines to stdout, one to stderr, then a last
//                         stdout line without '\n'
//   env NAME...           NAME=value (or "NAME unset") per name
//   args ARG...           "arg ARG" per argument, to show what reached it
//   rank                  "rank R of S"
//   exit-rank R CODE      rank R exits with CODE; the others sleep 60 s
//   kill-rank R SIGNAL    rank R raises SIGNAL; the others sleep 60 s
//   sleep PIDFILE         forks a child; both append "worker PID" or
//                         "child PID" to PIDFILE and sleep 60 s
//   store                 joins the store kolorun hosts, sets rank/R, waits
//                         for every rank's key and prints "store ok"
//   allreduce MS          kolo::Init(), allreduces for MS milliseconds,
//                         counting each in test_worker_allreduces_total,
//                         prints its KOLO_METRICS_DIR and "allreduces N",
//                         then kolo::Shutdown()
//
// The rank comes from KOLO_RANK, or from OMPI_COMM_WORLD_RANK under mpirun.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "kolo/kolo.h"
#include "kolo/metrics.h"
#include "store/tcp_store.h"

namespace {

int EnvInt(const char* kolo_name, const char* mpi_name, int fallback) {
  const char* value = std::getenv(kolo_name);
  if (value == nullptr) value = std::getenv(mpi_name);
  return value != nullptr ? std::atoi(value) : fallback;
}

int Rank() { return EnvInt(kolo::env::kRank, "OMPI_COMM_WORLD_RANK", -1); }
int Size() { return EnvInt(kolo::env::kSize, "OMPI_COMM_WORLD_SIZE", -1); }

void SleepSeconds(int seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

void AppendPid(const char* path, const char* role) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path);
    std::exit(1);
  }
  std::string line = std::string(role) + " " + std::to_string(getpid()) + "\n";
  // One write with O_APPEND: lines of concurrent writers do not mix.
  if (write(fd, line.data(), line.size()) !=
      static_cast<ssize_t>(line.size())) {
    std::perror(path);
    std::exit(1);
  }
  close(fd);
}

int Print(int lines) {
  int rank = Rank();
  for (int i = 0; i < lines; ++i) std::printf("line %d of rank %d\n", i, rank);
  std::fprintf(stderr, "err of rank %d\n", rank);
  std::printf("partial rank %d", rank);
  return 0;
}

// One line written in two flushed pieces with a pause between, so that
// mpirun reads them apart and the other ranks' pieces fall in between.
int PrintInPieces() {
  std::printf("first half of rank %d, ", Rank());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::printf("second half of rank %d\n", Rank());
  return 0;
}

int ExitOrKill(int chosen, int value, bool kill_itself) {
  int rank = Rank();
  if (rank != chosen) {
    std::printf("rank %d sleeping\n", rank);
    std::fflush(stdout);
    SleepSeconds(60);
    return 0;
  }
  // Let the others start, so that kolorun has someone to stop.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("rank %d failing\n", rank);
  std::fflush(stdout);
  if (kill_itself) {
    raise(value);
    SleepSeconds(60);  // a signal the test did not expect to be ignored
  }
  return value;
}

int SleepWithChild(const char* pidfile) {
  pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  AppendPid(pidfile, child == 0 ? "child" : "worker");
  SleepSeconds(60);
  return 0;
}

int JoinStore() {
  std::string host;
  int port = 0;
  const char* address = std::getenv(kolo::env::kStoreAddr);
  const char* secret = std::getenv(kolo::env::kStoreSecret);
  if (address == nullptr || secret == nullptr) {
    std::fprintf(stderr, "KOLO_STORE_ADDR or KOLO_STORE_SECRET unset\n");
    return 1;
  }
  kolo::Status parsed = kolo::ParseHostPortInto(address, &host, &port);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.ToString().c_str());
    return 1;
  }
  int rank = Rank();
  int size = Size();
  auto client = kolo::TcpStoreClient::Connect(host, port, secret, rank,
                                              std::chrono::seconds(10));
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("rank/" + std::to_string(r));
  kolo::Status status = (*client)->Set("rank/" + std::to_string(rank), "here");
  if (status.ok()) status = (*client)->Wait(keys, std::chrono::seconds(10));
  if (status.ok()) status = (*client)->Close();
  if (!status.ok()) {
    std::fprintf(stderr, "store: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("store ok rank %d of %d\n", rank, size);
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: kolorun_worker print|env|args|rank|exit-rank|"
               "kill-rank|sleep|store ...\n");
  return 2;
}

}  // namespace

int Allreduces(int milliseconds) {
  kolo::Status status = kolo::Init();
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  kolo::StatusOr<kolo::metrics::Counter> counted = kolo::metrics::GetCounter(
      "test_worker_allreduces_total", "Allreduces of the test worker.");
  std::vector<float> values(1024, 1.0f);
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(milliseconds);
  int64_t done = 0;
  // Every rank runs the same number: rank 0 decides when to stop.
  for (bool more = true; more; ++done) {
    float go = std::chrono::steady_clock::now() < end ? 1.0f : 0.0f;
    status = kolo::Allreduce(&go, &go, 1, kolo::DataType::kFloat32,
                             kolo::ReduceOp::kMin);
    if (status.ok()) {
      status = kolo::Allreduce(values.data(), values.data(),
                               static_cast<int64_t>(values.size()),
                               kolo::DataType::kFloat32, kolo::ReduceOp::kSum);
    }
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
    counted->Increment();
    more = go > 0;
    if (done % 50 == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const char* dir = std::getenv("KOLO_METRICS_DIR");
  std::printf("metrics dir %s\nallreduces %lld\n", dir ? dir : "unset",
              static_cast<long long>(done));
  std::fflush(stdout);
  return kolo::Shutdown().ok() ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string command = argv[1];
  if (command == "print" && argc == 3) return Print(std::atoi(argv[2]));
  if (command == "print-in-pieces") return PrintInPieces();
  if (command == "env") {
    for (int i = 2; i < argc; ++i) {
      const char* value = std::getenv(argv[i]);
      if (value == nullptr) {
        std::printf("%s unset\n", argv[i]);
      } else {
        std::printf("%s=%s\n", argv[i], value);
      }
    }
    return 0;
  }
  if (command == "args") {
    for (int i = 2; i < argc; ++i) std::printf("arg %s\n", argv[i]);
    return 0;
  }
  if (command == "rank") {
    std::printf("rank %d of %d\n", Rank(), Size());
    return 0;
  }
  if (command == "exit-rank" && argc == 4) {
    return ExitOrKill(std::atoi(argv[2]), std::atoi(argv[3]), false);
  }
  if (command == "kill-rank" && argc == 4) {
    return ExitOrKill(std::atoi(argv[2]), std::atoi(argv[3]), true);
  }
  if (command == "sleep" && argc == 3) return SleepWithChild(argv[2]);
  if (command == "store") return JoinStore();
  if (command == "allreduce" && argc == 3)
    return Allreduces(std::atoi(argv[2]));
  return Usage();
}
