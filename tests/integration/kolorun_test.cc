// kolorun end to end: real kolorun processes starting real workers
// (workers/kolorun_worker.cc), checked by what they print, how they exit and
// how long that takes. Every run is bounded: a kolorun that outlives its
// limit is SIGKILLed, which takes its workers with it (PR_SET_PDEATHSIG), and
// the test fails.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job.h"
#include "testing/child_process.h"
#include "testing/engines.h"
#include "testing/requirements.h"

namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = KOLORUN_WORKER_PATH;
// kolorun_worker's sleepers sleep 60 s; a job whose failure or signal
// stops them (after kolorun's grace periods, 3 s at most) ends within half
// of that, a margin no scheduling delay reaches, while one that waited
// for them would not.
constexpr double kSleepersStoppedWithin = 30.0;

using kolo::testing::ChildProcess;
using kolo::testing::Lines;
using kolo::testing::OnPath;
using kolo::testing::RunResult;

// kolorun with `args`, KOLO_BACKEND cleared unless `env` sets it.
class Kolorun : public ChildProcess {
 public:
  explicit Kolorun(const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env = {})
      : ChildProcess(WithKolorun(args), env) {}

 private:
  static std::vector<std::string> WithKolorun(
      const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kKolorun};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

RunResult RunKolorun(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {}) {
  return Kolorun(args, env).Wait(std::chrono::seconds(30));
}

// As kolorun counts them.
int UsableCoreCount() {
  const size_t cores = kolo::kolorun::UsableCores().size();
  return cores > 0 ? static_cast<int>(cores)
                   : static_cast<int>(std::thread::hardware_concurrency());
}

// Alive and not a zombie: a worker's orphaned child may wait a moment for
// init to reap it.
bool IsAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return kill(pid, 0) == 0;
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() &&
         text[paren + 2] != 'Z';
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "kolorun_test_" + std::to_string(getpid()) +
         "_" + name;
}

// The pids `worker sleep` wrote, by role ("worker" or "child").
std::multimap<std::string, pid_t> ReadPids(const std::string& path) {
  std::multimap<std::string, pid_t> pids;
  std::ifstream file(path);
  std::string role;
  pid_t pid;
  while (file >> role >> pid) pids.emplace(role, pid);
  return pids;
}

// Waits until both workers of `kolorun -np 2 worker sleep` and their
// children have written their pids.
std::multimap<std::string, pid_t> WaitForSleepers(const std::string& pidfile) {
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  while (ReadPids(pidfile).size() < 4 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ReadPids(pidfile);
}

bool WaitUntilDead(pid_t pid, std::chrono::milliseconds limit) {
  Clock::time_point deadline = Clock::now() + limit;
  while (IsAlive(pid) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !IsAlive(pid);
}

// The values the ranks printed for `name` with `worker env`, by rank.
std::map<int, std::string> ValuesByRank(const std::string& out,
                                        const std::string& name) {
  std::map<int, std::string> values;
  for (const std::string& line : Lines(out)) {
    int rank = -1;
    char rest[512] = {0};
    if (std::sscanf(line.c_str(), "[%d]<stdout>: %511[^\n]", &rank, rest) != 2)
      continue;
    std::string text = rest;
    if (text.rfind(name + "=", 0) == 0)
      values[rank] = text.substr(name.size() + 1);
  }
  return values;
}

TEST(KolorunTest, AllRanksSucceedAndEveryLineIsTagged) {
  RunResult r = RunKolorun({"-np", "3", kWorker, "print", "2"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out = Lines(r.out);
  std::vector<std::string> err = Lines(r.err);
  EXPECT_EQ(out.size(), 9u) << r.out;
  for (int rank = 0; rank < 3; ++rank) {
    std::string tag = "[" + std::to_string(rank) + "]";
    for (int i = 0; i < 2; ++i) {
      EXPECT_THAT(out, Contains(tag + "<stdout>: line " + std::to_string(i) +
                                " of rank " + std::to_string(rank)));
    }
    // The unterminated last line comes out whole, on a line of its own.
    EXPECT_THAT(
        out, Contains(tag + "<stdout>: partial rank " + std::to_string(rank)));
    EXPECT_THAT(
        err, Contains(tag + "<stderr>: err of rank " + std::to_string(rank)));
  }
  for (const std::string& line : out) {
    EXPECT_TRUE(line.size() > 12 && line[0] == '[' &&
                line.substr(2, 11) == "]<stdout>: ")
        << line;
  }
}

TEST(KolorunTest, EachRankSeesItsPlaceAndTheUserEnv) {
  RunResult r = RunKolorun({"-np",
                            "2",
                            "--env",
                            "FOO=bar",
                            "--env",
                            "EQ=a=b",
                            "--timeout",
                            "7",
                            kWorker,
                            "env",
                            "KOLO_RANK",
                            "KOLO_SIZE",
                            "KOLO_LOCAL_RANK",
                            "KOLO_LOCAL_SIZE",
                            "KOLO_CROSS_RANK",
                            "KOLO_CROSS_SIZE",
                            "KOLO_STORE_HOSTED",
                            "KOLO_BACKEND",
                            "KOLO_TIMEOUT_S",
                            "KOLO_STORE_ADDR",
                            "FOO",
                            "EQ"});
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto expect_all = [&](const std::string& name, const std::string& value) {
    std::map<int, std::string> expected = {{0, value}, {1, value}};
    EXPECT_EQ(ValuesByRank(r.out, name), expected) << name << "\n" << r.out;
  };
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_RANK"),
            (std::map<int, std::string>{{0, "0"}, {1, "1"}}));
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_LOCAL_RANK"),
            (std::map<int, std::string>{{0, "0"}, {1, "1"}}));
  expect_all("KOLO_SIZE", "2");
  expect_all("KOLO_LOCAL_SIZE", "2");
  expect_all("KOLO_CROSS_RANK", "0");
  expect_all("KOLO_CROSS_SIZE", "1");
  expect_all("KOLO_STORE_HOSTED", "1");
  expect_all("KOLO_BACKEND", "shm");  // the default on one host
  expect_all("KOLO_TIMEOUT_S", "7");
  expect_all("FOO", "bar");
  expect_all("EQ", "a=b");
  std::map<int, std::string> addresses = ValuesByRank(r.out, "KOLO_STORE_ADDR");
  ASSERT_EQ(addresses.size(), 2u);
  EXPECT_EQ(addresses[0], addresses[1]);
  EXPECT_THAT(addresses[0], StartsWith("127.0.0.1:"));
  EXPECT_NE(addresses[0], "127.0.0.1:0");
}

// Each rank reports the CPUs it may use, as the kernel lists them for a
// single CPU ("3") or a range ("0-1").
std::map<int, std::string> CoresByRank(int ranks,
                                       const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"-np", std::to_string(ranks)};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(),
              {"/bin/sh", "-c",
               "echo \"cores=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "
               "/proc/self/status)\""});
  RunResult r = RunKolorun(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ValuesByRank(r.out, "cores");
}

TEST(KolorunTest, RanksAreBoundToTheirOwnCoresWhenTheyFit) {
  const std::vector<int> own = kolo::kolorun::UsableCores();
  ASSERT_GE(own.size(), 2u) << "needs two cores";
  std::map<int, std::string> bound = CoresByRank(2, {});
  ASSERT_EQ(bound.size(), 2u);
  // With 2 or 3 cores each rank gets one, listed as itself.
  if (own.size() < 4) {
    EXPECT_EQ(bound[0], std::to_string(own[0]));
    EXPECT_EQ(bound[1], std::to_string(own[1]));
  } else {
    EXPECT_NE(bound[0], bound[1]);
  }
  // --bind-to none, and more ranks than cores, leave kolorun's own set.
  std::map<int, std::string> free = CoresByRank(2, {"--bind-to", "none"});
  std::map<int, std::string> crowded =
      CoresByRank(static_cast<int>(own.size()) + 1, {});
  for (const auto& [rank, cores] : free) EXPECT_EQ(cores, free[0]) << rank;
  for (const auto& [rank, cores] : crowded) EXPECT_EQ(cores, free[0]) << rank;
  EXPECT_EQ(crowded.size(), own.size() + 1);
  // Gloo's ranks stay unbound unless asked (its event loop would share a
  // caller's core).
  if (kolo::testing::EngineBuilt("gloo")) {
    std::map<int, std::string> gloo = CoresByRank(2, {"--backend", "gloo"});
    ASSERT_EQ(gloo.size(), 2u);
    for (const auto& [rank, cores] : gloo) EXPECT_EQ(cores, free[0]) << rank;
    EXPECT_EQ(CoresByRank(2, {"--backend", "gloo", "--bind-to", "core"}),
              bound);
  }
  if (own.size() == 2) {
    EXPECT_EQ(free[0], std::to_string(own[0]) + "-" + std::to_string(own[1]));
  }
}

TEST(KolorunTest, TimeoutDefaultsToThirtySeconds) {
  RunResult r = RunKolorun({"-np", "1", kWorker, "env", "KOLO_TIMEOUT_S"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_TIMEOUT_S"),
            (std::map<int, std::string>{{0, "30"}}));
}

TEST(KolorunTest, StoreSecretIsRandomAndNewPerJob) {
  std::vector<std::string> secrets;
  for (int job = 0; job < 2; ++job) {
    RunResult r = RunKolorun({"-np", "2", kWorker, "env", "KOLO_STORE_SECRET"});
    ASSERT_FALSE(r.timed_out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::map<int, std::string> values =
        ValuesByRank(r.out, "KOLO_STORE_SECRET");
    ASSERT_EQ(values.size(), 2u) << r.out;
    EXPECT_EQ(values[0], values[1]);
    EXPECT_EQ(values[0].size(), 32u) << values[0];
    for (char c : values[0])
      EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << c;
    secrets.push_back(values[0]);
  }
  EXPECT_NE(secrets[0], secrets[1]);
}

TEST(KolorunTest, RanksReachTheStoreKolorunHosts) {
  RunResult r = RunKolorun({"-np", "3", kWorker, "store"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(Lines(r.out), Contains("[" + std::to_string(rank) +
                                       "]<stdout>: store ok rank " +
                                       std::to_string(rank) + " of 3"))
        << r.out << r.err;
  }
}

TEST(KolorunTest, ProgramArgumentsAreNotKolorunFlags) {
  RunResult r = RunKolorun(
      {"-np", "1", kWorker, "args", "-np", "5", "--verbose", "--", "x"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(r.out), (std::vector<std::string>{
                              "[0]<stdout>: arg -np", "[0]<stdout>: arg 5",
                              "[0]<stdout>: arg --verbose",
                              "[0]<stdout>: arg --", "[0]<stdout>: arg x"}));
  EXPECT_EQ(r.err, "");
}

TEST(KolorunTest, DoubleDashEndsKolorunFlags) {
  RunResult r = RunKolorun({"-np", "1", "--", kWorker, "rank"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(r.out),
            (std::vector<std::string>{"[0]<stdout>: rank 0 of 1"}));
}

TEST(KolorunTest, FailingRankStopsTheJobWithItsCode) {
  RunResult r = RunKolorun({"-np", "3", kWorker, "exit-rank", "1", "3"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(Lines(r.err), Contains("kolorun: rank 1 exited with code 3"))
      << r.err;
  // The others would sleep 60 s: they were stopped after the grace period
  // (3 s), well before.
  EXPECT_LT(r.seconds, kSleepersStoppedWithin);
  EXPECT_THAT(Lines(r.out), Contains("[1]<stdout>: rank 1 failing"));
  EXPECT_THAT(Lines(r.out), Contains("[0]<stdout>: rank 0 sleeping"));
}

TEST(KolorunTest, KilledRankIsNamedWithItsSignal) {
  RunResult r = RunKolorun({"-np", "2", kWorker, "kill-rank", "1", "9"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  EXPECT_THAT(Lines(r.err),
              Contains("kolorun: rank 1 was killed by signal 9 (Killed)"))
      << r.err;
  EXPECT_LT(r.seconds, kSleepersStoppedWithin);
}

// kolorun forwards `signal` and leaves no worker, nor a worker's child,
// running.
void ExpectSignalStopsEverything(int signal) {
  std::string pidfile = TempPath("pids_" + std::to_string(signal));
  unlink(pidfile.c_str());
  Kolorun kolorun({"-np", "2", kWorker, "sleep", pidfile});
  std::multimap<std::string, pid_t> pids = WaitForSleepers(pidfile);
  ASSERT_EQ(pids.count("worker"), 2u);
  ASSERT_EQ(pids.count("child"), 2u);
  for (const auto& [role, pid] : pids)
    EXPECT_TRUE(IsAlive(pid)) << role << " " << pid;

  kolorun.Signal(signal);
  RunResult r = kolorun.Wait();
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + signal) << r.err;
  EXPECT_LT(r.seconds, kSleepersStoppedWithin);
  for (const auto& [role, pid] : pids) {
    // kolorun reaped the workers; their children are orphans that init
    // reaps, which may take a moment.
    EXPECT_TRUE(WaitUntilDead(pid, std::chrono::seconds(2)))
        << role << " " << pid << " survived signal " << signal;
    if (IsAlive(pid)) kill(pid, SIGKILL);
  }
  unlink(pidfile.c_str());
}

TEST(KolorunTest, SigtermReachesEveryWorker) {
  ExpectSignalStopsEverything(SIGTERM);
}

TEST(KolorunTest, SigintReachesEveryWorker) {
  ExpectSignalStopsEverything(SIGINT);
}

TEST(KolorunTest, KilledKolorunTakesItsWorkersWithIt) {
  std::string pidfile = TempPath("pids_sigkill");
  unlink(pidfile.c_str());
  Kolorun kolorun({"-np", "2", kWorker, "sleep", pidfile});
  std::multimap<std::string, pid_t> pids = WaitForSleepers(pidfile);
  ASSERT_EQ(pids.size(), 4u);
  kolorun.Signal(SIGKILL);
  RunResult r = kolorun.Wait();
  EXPECT_EQ(r.signal, SIGKILL);
  for (const auto& [role, pid] : pids) {
    // PR_SET_PDEATHSIG reaches the workers only; fork clears it in their
    // children, which the test cleans up itself.
    if (role == "worker") {
      EXPECT_TRUE(WaitUntilDead(pid, std::chrono::seconds(3)))
          << "worker " << pid;
    }
    if (IsAlive(pid)) kill(pid, SIGKILL);
  }
  unlink(pidfile.c_str());
}

struct BadCommandLine {
  std::vector<std::string> args;
  std::string message;
  int exit_code;
};

class KolorunBadCommandLineTest
    : public ::testing::TestWithParam<BadCommandLine> {};

TEST_P(KolorunBadCommandLineTest, FailsWithOneLineNamingTheCause) {
  const BadCommandLine& bad = GetParam();
  std::vector<std::string> args;
  for (const std::string& arg : bad.args)
    args.push_back(arg == "WORKER" ? kWorker : arg);
  RunResult r = RunKolorun(args);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, bad.exit_code) << r.err;
  EXPECT_EQ(Lines(r.err),
            (std::vector<std::string>{"kolorun: " + bad.message}));
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Flags, KolorunBadCommandLineTest,
    ::testing::Values(
        BadCommandLine{{"-np", "0", "WORKER", "rank"},
                       "-np must be a positive integer, got '0'",
                       2},
        BadCommandLine{{"-np", "abc", "WORKER", "rank"},
                       "-np must be a positive integer, got 'abc'",
                       2},
        BadCommandLine{{"-np", "-2", "WORKER", "rank"},
                       "-np must be a positive integer, got '-2'",
                       2},
        BadCommandLine{{"WORKER", "rank"}, "-np N is required (see --help)", 2},
        BadCommandLine{{"-np"}, "-np expects a value", 2},
        BadCommandLine{{"-np", "1", "--env"}, "--env expects a value", 2},
        BadCommandLine{{"-np", "1", "--mpi-args", "-x", "WORKER"},
                       "--mpi-args needs mpirun to start the ranks: "
                       "--launcher mpirun or --backend mpi",
                       2},
        BadCommandLine{{"-np", "1", "--metrics-port", "70000", "WORKER"},
                       "--metrics-port must be a TCP port from 0 (the OS "
                       "chooses) to 65535, got '70000'",
                       2},
        BadCommandLine{{"-np", "1", "--bogus", "WORKER"},
                       "unknown flag '--bogus' (see --help)",
                       2},
        BadCommandLine{{"-np", "1"},
                       "no program given: kolorun -np N program [args...]",
                       2},
        BadCommandLine{{"-np", "1", "--env", "NOEQUALS", "WORKER"},
                       "--env expects K=V, got 'NOEQUALS'",
                       2},
        BadCommandLine{{"-np", "1", "--backend", "nccl", "WORKER"},
                       "--backend must be shm, tcp, gloo or mpi, got 'nccl'",
                       2},
        BadCommandLine{
            {"-np", "1", "--timeout", "0", "WORKER"},
            "--timeout must be a positive number of seconds, got '0'",
            2},
        BadCommandLine{{"-np", "1", "no-such-program-kolo"},
                       "program 'no-such-program-kolo' not found",
                       127},
        BadCommandLine{{"-np", "1", "./no/such/dir/prog"},
                       "program './no/such/dir/prog' not found",
                       127}));

TEST(KolorunTest, BadBackendInEnvironmentIsNamed) {
  RunResult r =
      RunKolorun({"-np", "1", kWorker, "rank"}, {{"KOLO_BACKEND", "ucx"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), (std::vector<std::string>{
                              "kolorun: environment variable "
                              "KOLO_BACKEND must be shm, tcp, gloo or mpi, "
                              "got 'ucx'"}));
}

// An agent reads its orders a line at a time: an endless line is refused
// once it passes the bound on a message, not read into memory for as long
// as it goes on.
TEST(KolorunTest, AnAgentRefusesALineWithoutEnd) {
  RunResult r = kolo::testing::RunProgram(
      {"/bin/sh", "-c",
       std::string("cat /dev/zero | ") + kKolorun + " --agent"},
      {}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.err.substr(0, 400);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("expected a 'preflight' message"));
}

TEST(KolorunTest, HelpPrintsUsage) {
  RunResult r = RunKolorun({"--help"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("Usage: kolorun -np N"));
  EXPECT_EQ(r.err, "");
}

TEST(KolorunTest, OversubscriptionIsAllowedAndSaidOnce) {
  int cores = UsableCoreCount();
  int np = cores + 1;
  RunResult r = RunKolorun({"-np", std::to_string(np), kWorker, "rank"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string expected = "kolorun: -np " + std::to_string(np) +
                         " oversubscribes " + std::to_string(cores) +
                         (cores == 1 ? " core" : " cores");
  EXPECT_EQ(Lines(r.err), (std::vector<std::string>{expected}));
  EXPECT_EQ(Lines(r.out).size(), static_cast<size_t>(np));
}

TEST(KolorunTest, VerboseNamesStoreCommandsAndExits) {
  RunResult r = RunKolorun({"--verbose", "-np", "2", kWorker, "rank"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> err = Lines(r.err);
  EXPECT_THAT(
      err, Contains(AllOf(StartsWith("kolorun: store listening on 127.0.0.1:"),
                          HasSubstr("backend shm"))));
  for (int rank = 0; rank < 2; ++rank) {
    std::string name = "kolorun: rank " + std::to_string(rank);
    // On two cores or more each rank is bound to its own, and says which.
    EXPECT_THAT(
        err, Contains(AllOf(StartsWith(name + " (cores "),
                            EndsWith("): " + std::string(kWorker) + " rank"))))
        << r.err;
    EXPECT_THAT(err, Contains(name + " exited with code 0")) << r.err;
  }
}

// kolorun's mpi engine, only where kolo was built with MPI
// (tests/integration/kolorun.cmake defines KOLORUN_TEST_WITH_MPI).
#ifdef KOLORUN_TEST_WITH_MPI
class KolorunMpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KOLO_REQUIRE_OR_SKIP(OnPath("mpirun"), "mpirun on PATH (openmpi-bin)");
  }
};

TEST_F(KolorunMpiTest, OutputIsTaggedLikeGloo) {
  RunResult r = RunKolorun({"-np", "2", "--backend", "mpi", kWorker, "rank"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out = Lines(r.out);
  EXPECT_THAT(out, Contains("[0]<stdout>: rank 0 of 2")) << r.out << r.err;
  EXPECT_THAT(out, Contains("[1]<stdout>: rank 1 of 2")) << r.out << r.err;
}

TEST_F(KolorunMpiTest, PartialLinesAndStderrAreTagged) {
  RunResult r =
      RunKolorun({"-np", "2", "--backend", "mpi", kWorker, "print", "1"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::string tag = "[" + std::to_string(rank) + "]";
    EXPECT_THAT(Lines(r.out), Contains(tag + "<stdout>: line 0 of rank " +
                                       std::to_string(rank)))
        << r.out;
    EXPECT_THAT(Lines(r.out), Contains(tag + "<stdout>: partial rank " +
                                       std::to_string(rank)))
        << r.out;
    EXPECT_THAT(Lines(r.err),
                Contains(tag + "<stderr>: err of rank " + std::to_string(rank)))
        << r.err;
  }
}

TEST_F(KolorunMpiTest, ALineWrittenInPiecesStaysWhole) {
  // mpirun tags each piece as it reads it; kolorun joins a rank's pieces.
  RunResult r =
      RunKolorun({"-np", "3", "--backend", "mpi", kWorker, "print-in-pieces"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string n = std::to_string(rank);
    EXPECT_THAT(Lines(r.out),
                Contains("[" + n + "]<stdout>: first half of rank " + n +
                         ", second half of rank " + n))
        << r.out;
  }
  EXPECT_EQ(Lines(r.out).size(), 3u) << r.out;
}

TEST_F(KolorunMpiTest, RanksGetTheStoreAndNotKolorunRanks) {
  RunResult r = RunKolorun({"-np", "2", "--backend", "mpi", "--env", "FOO=bar",
                            kWorker, "env", "KOLO_BACKEND", "KOLO_STORE_HOSTED",
                            "KOLO_RANK", "FOO", "KOLO_STORE_SECRET"},
                           {{"KOLO_RANK", "7"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_BACKEND"),
            (std::map<int, std::string>{{0, "mpi"}, {1, "mpi"}}));
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_STORE_HOSTED"),
            (std::map<int, std::string>{{0, "1"}, {1, "1"}}));
  EXPECT_EQ(ValuesByRank(r.out, "FOO"),
            (std::map<int, std::string>{{0, "bar"}, {1, "bar"}}));
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_STORE_SECRET")[0].size(), 32u);
  EXPECT_THAT(Lines(r.out), Contains("[0]<stdout>: KOLO_RANK unset")) << r.out;
}

TEST_F(KolorunMpiTest, BackendDefaultsToTheEnvironment) {
  RunResult r = RunKolorun({"-np", "1", kWorker, "env", "KOLO_BACKEND"},
                           {{"KOLO_BACKEND", "mpi"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ValuesByRank(r.out, "KOLO_BACKEND"),
            (std::map<int, std::string>{{0, "mpi"}}));
}

TEST_F(KolorunMpiTest, FailingRankFailsTheJob) {
  RunResult r = RunKolorun(
      {"-np", "2", "--backend", "mpi", kWorker, "exit-rank", "1", "3"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("kolorun: mpirun exited with code")) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST_F(KolorunMpiTest, MissingMpirunIsNamed) {
  RunResult r = RunKolorun({"-np", "1", "--backend", "mpi", kWorker, "rank"},
                           {{"PATH", "/nonexistent"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(
      Lines(r.err),
      (std::vector<std::string>{
          "kolorun: mpirun not found on PATH; --backend mpi starts the job "
          "through it"}));
}
#endif  // KOLORUN_TEST_WITH_MPI

}  // namespace
