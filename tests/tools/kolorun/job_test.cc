#include "job.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kolo {
namespace kolorun {
namespace {

// A job secret kolorun would accept (at least kMinJobSecretBytes).
constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

std::string Value(const std::vector<std::string>& env,
                  const std::string& name) {
  std::string found = "<unset>";
  for (const std::string& var : env) {
    if (var.rfind(name + "=", 0) == 0) found = var.substr(name.size() + 1);
  }
  return found;
}

LaunchOptions TwoRanks() {
  LaunchOptions options;
  options.num_ranks = 2;
  options.timeout_seconds = 12;
  options.env = {{"USER_VAR", "u"}, {"KOLO_GLOO_HOSTNAME", "h"}};
  options.command = {"prog", "arg"};
  return options;
}

TEST(SetEnvTest, ReplacesAndAppends) {
  std::vector<std::string> env = {"A=1", "AB=2"};
  SetEnv(&env, "A", "3");
  SetEnv(&env, "C", "");
  EXPECT_EQ(env, (std::vector<std::string>{"A=3", "AB=2", "C="}));
  UnsetEnv(&env, "AB");
  EXPECT_EQ(env, (std::vector<std::string>{"A=3", "C="}));
}

TEST(BuildRankJobTest, TellsEachRankItsPlace) {
  StoreInfo store{"127.0.0.1:4242", kSecret};
  std::vector<ProcessSpec> specs = BuildRankJob(TwoRanks(), "/bin/prog", store,
                                                {"PATH=/bin", "KOLO_RANK=9"});
  ASSERT_EQ(specs.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const ProcessSpec& spec = specs[rank];
    const std::vector<std::string>& env = spec.child.env;
    std::string r = std::to_string(rank);
    EXPECT_EQ(spec.name, "rank " + r);
    EXPECT_EQ(spec.child.path, "/bin/prog");
    EXPECT_EQ(spec.child.argv, (std::vector<std::string>{"prog", "arg"}));
    EXPECT_EQ(spec.stdout_prefix, "[" + r + "]<stdout>: ");
    EXPECT_EQ(spec.stderr_prefix, "[" + r + "]<stderr>: ");
    EXPECT_EQ(Value(env, "PATH"), "/bin");
    EXPECT_EQ(Value(env, "KOLO_RANK"), r);
    EXPECT_EQ(Value(env, "KOLO_SIZE"), "2");
    EXPECT_EQ(Value(env, "KOLO_LOCAL_RANK"), r);
    EXPECT_EQ(Value(env, "KOLO_LOCAL_SIZE"), "2");
    EXPECT_EQ(Value(env, "KOLO_CROSS_RANK"), "0");
    EXPECT_EQ(Value(env, "KOLO_CROSS_SIZE"), "1");
    EXPECT_EQ(Value(env, "KOLO_STORE_ADDR"), "127.0.0.1:4242");
    EXPECT_EQ(Value(env, "KOLO_STORE_SECRET"), kSecret);
    EXPECT_EQ(Value(env, "KOLO_STORE_HOSTED"), "1");
    EXPECT_EQ(Value(env, "KOLO_BACKEND"), "shm");  // the default
    EXPECT_EQ(Value(env, "KOLO_TIMEOUT_S"), "12");
    EXPECT_EQ(Value(env, "USER_VAR"), "u");
    EXPECT_EQ(Value(env, "KOLO_GLOO_HOSTNAME"), "h");
  }
}

// kolorun -np 3 --servers 2: five ranks, the last two serve, and each
// rank's environment says which it is.
TEST(BuildRankJobTest, ServersAreTheLastRanksAndKnowIt) {
  StatusOr<LaunchOptions> options =
      ParseOptions({"kolorun", "-np", "3", "--servers", "2", "prog"},
                   [](const char*) { return std::optional<std::string>(); });
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->num_ranks, 5);
  EXPECT_EQ(options->servers, 2);
  std::vector<ProcessSpec> specs =
      BuildRankJob(*options, "/bin/prog", StoreInfo{"127.0.0.1:1", "s"}, {});
  ASSERT_EQ(specs.size(), 5u);
  for (int rank = 0; rank < 5; ++rank) {
    const std::vector<std::string>& env = specs[rank].child.env;
    EXPECT_EQ(Value(env, "KOLO_SIZE"), "5");
    EXPECT_EQ(Value(env, "KOLO_SERVERS"), "2");
    EXPECT_EQ(Value(env, "KOLO_ROLE"), rank < 3 ? "worker" : "server")
        << "rank " << rank;
  }
  // Without --servers no rank is told anything.
  std::vector<ProcessSpec> plain =
      BuildRankJob(TwoRanks(), "/bin/prog", StoreInfo{"127.0.0.1:1", "s"}, {});
  EXPECT_EQ(Value(plain[0].child.env, "KOLO_ROLE"), "<unset>");

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"kolorun", "-np", "2", "--servers", "0", "p"},
        std::vector<std::string>{"kolorun", "-np", "2", "--servers", "x", "p"},
        std::vector<std::string>{"kolorun", "-H", "a:2", "--servers", "1",
                                 "p"}}) {
    StatusOr<LaunchOptions> parsed = ParseOptions(
        bad, [](const char*) { return std::optional<std::string>(); });
    ASSERT_FALSE(parsed.ok()) << bad[4];
    EXPECT_NE(parsed.status().message().find("--servers"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(BuildMpiJobTest, ExportsTheStoreThroughMpirun) {
  LaunchOptions options = TwoRanks();
  options.backend = BackendKind::kMpi;
  options.mpi_args = {"--bind-to", "none"};
  StoreInfo store{"127.0.0.1:4242", kSecret};
  ProcessSpec spec = BuildMpiJob(options, "/usr/bin/mpirun", true, store,
                                 {"KOLO_RANK=9", "KOLO_SIZE=3"});
  EXPECT_EQ(spec.name, "mpirun");
  EXPECT_EQ(spec.format, LineFormat::kMpiTagged);
  EXPECT_EQ(spec.child.path, "/usr/bin/mpirun");
  EXPECT_EQ(spec.child.argv, (std::vector<std::string>{"mpirun",
                                                       "--allow-run-as-root",
                                                       "--oversubscribe",
                                                       "--tag-output",
                                                       "-np",
                                                       "2",
                                                       "-x",
                                                       "KOLO_STORE_ADDR",
                                                       "-x",
                                                       "KOLO_STORE_SECRET",
                                                       "-x",
                                                       "KOLO_STORE_HOSTED",
                                                       "-x",
                                                       "KOLO_BACKEND",
                                                       "-x",
                                                       "KOLO_TIMEOUT_S",
                                                       "-x",
                                                       "USER_VAR",
                                                       "-x",
                                                       "KOLO_GLOO_HOSTNAME",
                                                       "--mca",
                                                       "btl",
                                                       "self,vader,tcp",
                                                       "--bind-to",
                                                       "none",
                                                       "prog",
                                                       "arg"}));
  const std::vector<std::string>& env = spec.child.env;
  EXPECT_EQ(Value(env, "KOLO_RANK"), "<unset>");
  EXPECT_EQ(Value(env, "KOLO_SIZE"), "<unset>");
  EXPECT_EQ(Value(env, "KOLO_BACKEND"), "mpi");
  EXPECT_EQ(Value(env, "KOLO_STORE_SECRET"), kSecret);
  EXPECT_EQ(Value(env, "USER_VAR"), "u");

  ProcessSpec as_user =
      BuildMpiJob(options, "/usr/bin/mpirun", false, store, {});
  EXPECT_EQ(as_user.child.argv[1], "--oversubscribe");
}

// --launcher mpirun --backend shm: mpirun starts the ranks and they run
// kolo's runtime on shm, with the store kolorun hosts.
TEST(BuildMpiJobTest, CarriesAnyBackendToTheRanks) {
  LaunchOptions options = TwoRanks();
  options.backend = BackendKind::kShm;
  options.launcher = LauncherKind::kMpirun;
  StoreInfo store{"127.0.0.1:4242", kSecret};
  ProcessSpec spec = BuildMpiJob(options, "/usr/bin/mpirun", false, store, {});
  EXPECT_EQ(spec.name, "mpirun");
  EXPECT_EQ(Value(spec.child.env, "KOLO_BACKEND"), "shm");
  EXPECT_EQ(Value(spec.child.env, "KOLO_STORE_ADDR"), "127.0.0.1:4242");
  const std::vector<std::string>& argv = spec.child.argv;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "KOLO_BACKEND"), argv.end());
}

TEST(CoreBlocksTest, EachRankGetsItsOwnEqualBlock) {
  using Blocks = std::vector<std::vector<int>>;
  EXPECT_EQ(CoreBlocks({0, 1}, 2, BindTo::kCore), (Blocks{{0}, {1}}));
  EXPECT_EQ(CoreBlocks({0, 1}, 1, BindTo::kCore), (Blocks{{0, 1}}));
  // Cores a taskset allowed, in order; the leftover core stays unused.
  EXPECT_EQ(CoreBlocks({2, 3, 5, 7, 8}, 2, BindTo::kCore),
            (Blocks{{2, 3}, {5, 7}}));
  // More ranks than cores, or none asked: no binding at all.
  EXPECT_EQ(CoreBlocks({0, 1}, 3, BindTo::kCore), (Blocks{{}, {}, {}}));
  EXPECT_EQ(CoreBlocks({0, 1}, 2, BindTo::kNone), (Blocks{{}, {}}));
  EXPECT_EQ(CoreBlocks({}, 1, BindTo::kCore), (Blocks{{}}));
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
