#include "options.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/engines.h"

namespace kolo {
namespace kolorun {
namespace {

using testing::EngineBuilt;
using ::testing::HasSubstr;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

StatusOr<LaunchOptions> Parse(std::vector<std::string> args,
                              std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "kolorun");
  return ParseOptions(args, FakeEnv(std::move(env)));
}

TEST(ParseOptionsTest, ReadsEveryFlag) {
  StatusOr<LaunchOptions> options =
      Parse({"-np", "4", "--backend", "tcp", "--launcher", "mpirun", "--env",
             "A=1", "--env", "B=x=y", "--timeout", "9", "--mpi-args",
             " --bind-to  none ", "--verbose", "prog", "a", "-np", "2"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->num_ranks, 4);
  EXPECT_EQ(options->backend, BackendKind::kTcp);
  EXPECT_EQ(options->launcher, LauncherKind::kMpirun);
  using Pair = std::pair<std::string, std::string>;
  EXPECT_EQ(options->env, (std::vector<Pair>{{"A", "1"}, {"B", "x=y"}}));
  EXPECT_EQ(options->timeout_seconds, 9);
  EXPECT_TRUE(options->verbose);
  EXPECT_EQ(options->mpi_args, (std::vector<std::string>{"--bind-to", "none"}));
  EXPECT_EQ(options->command,
            (std::vector<std::string>{"prog", "a", "-np", "2"}));
}

TEST(ParseOptionsTest, Defaults) {
  StatusOr<LaunchOptions> options = Parse({"-np", "1", "prog"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->backend, BackendKind::kShm);
  EXPECT_EQ(options->timeout_seconds, 30);
  EXPECT_FALSE(options->verbose);
  EXPECT_TRUE(options->env.empty());
}

TEST(ParseOptionsTest, LauncherFollowsTheBackendUnlessGiven) {
  StatusOr<LaunchOptions> shm = Parse({"-np", "2", "prog"});
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  EXPECT_EQ(shm->launcher, LauncherKind::kKolorun);
  if (EngineBuilt("mpi")) {
    StatusOr<LaunchOptions> mpi =
        Parse({"-np", "2", "--backend", "mpi", "prog"});
    ASSERT_TRUE(mpi.ok()) << mpi.status().ToString();
    EXPECT_EQ(mpi->launcher, LauncherKind::kMpirun);
  }

  // shm's runtime in an MPI world, and --mpi-args with it.
  StatusOr<LaunchOptions> shm_under_mpirun =
      Parse({"-np", "2", "--launcher", "mpirun", "--backend", "shm",
             "--mpi-args", "--bind-to none", "prog"});
  ASSERT_TRUE(shm_under_mpirun.ok()) << shm_under_mpirun.status().ToString();
  EXPECT_EQ(shm_under_mpirun->launcher, LauncherKind::kMpirun);
  EXPECT_EQ(shm_under_mpirun->backend, BackendKind::kShm);
  EXPECT_EQ(shm_under_mpirun->mpi_args,
            (std::vector<std::string>{"--bind-to", "none"}));
  EXPECT_STREQ(LauncherName(shm_under_mpirun->launcher), "mpirun");
}

TEST(ParseOptionsTest, LauncherErrorsNameTheFlag) {
  StatusOr<LaunchOptions> bad =
      Parse({"-np", "2", "--launcher", "srun", "prog"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--launcher must be kolorun or mpirun, got 'srun'");
  StatusOr<LaunchOptions> mpi_by_kolorun =
      Parse({"-np", "2", "--launcher", "kolorun", "--backend", "mpi", "prog"});
  ASSERT_FALSE(mpi_by_kolorun.ok());
  EXPECT_THAT(mpi_by_kolorun.status().message(),
              HasSubstr(EngineBuilt("mpi")
                            ? "--launcher kolorun cannot start --backend mpi"
                            : "--backend mpi: backend 'mpi' was not built"));
  StatusOr<LaunchOptions> args_without_mpirun =
      Parse({"-np", "2", "--mpi-args", "-x A", "prog"});
  ASSERT_FALSE(args_without_mpirun.ok());
  EXPECT_NE(args_without_mpirun.status().message().find("--launcher mpirun"),
            std::string::npos);
}

TEST(ParseOptionsTest, BackendDefaultsToTheEnvironmentAndTheFlagWins) {
  StatusOr<LaunchOptions> from_env =
      Parse({"-np", "1", "prog"}, {{"KOLO_BACKEND", "tcp"}});
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->backend, BackendKind::kTcp);
  StatusOr<LaunchOptions> flag = Parse({"-np", "1", "--backend", "shm", "prog"},
                                       {{"KOLO_BACKEND", "tcp"}});
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->backend, BackendKind::kShm);
}

// gloo or mpi in a build without it: the error says so, and how to build it,
// rather than that the name is unknown.
TEST(ParseOptionsTest, EnginesThisBuildLacksAreNamed) {
  for (const std::string engine : {"gloo", "mpi"}) {
    StatusOr<LaunchOptions> flag =
        Parse({"-np", "1", "--backend", engine, "prog"});
    StatusOr<LaunchOptions> from_env =
        Parse({"-np", "1", "prog"}, {{"KOLO_BACKEND", engine}});
    if (EngineBuilt(engine)) {
      EXPECT_TRUE(flag.ok()) << flag.status().ToString();
      EXPECT_TRUE(from_env.ok()) << from_env.status().ToString();
      continue;
    }
    const std::string not_built = "backend '" + engine +
                                  "' was not built (configure with "
                                  "-DKOLO_WITH_" +
                                  (engine == "gloo" ? "GLOO" : "MPI") + "=ON)";
    ASSERT_FALSE(flag.ok()) << engine;
    EXPECT_EQ(flag.status().message(),
              "--backend " + engine + ": " + not_built);
    ASSERT_FALSE(from_env.ok()) << engine;
    EXPECT_EQ(from_env.status().message(),
              "environment variable KOLO_BACKEND: " + not_built);
  }
}

TEST(ParseOptionsTest, AcceptsEqualsForms) {
  StatusOr<LaunchOptions> options =
      Parse({"-np=3", "--env=K=V", "--", "-prog"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->num_ranks, 3);
  EXPECT_EQ(options->command, (std::vector<std::string>{"-prog"}));
}

TEST(ParseOptionsTest, Help) {
  StatusOr<LaunchOptions> options = Parse({"--help"});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->help);
}

// --version needs no program or -np, like --help.
TEST(ParseOptionsTest, Version) {
  StatusOr<LaunchOptions> options = Parse({"--version"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_TRUE(options->version);
  EXPECT_FALSE(options->help);
}

TEST(ParseOptionsTest, ErrorsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"-np", "x", "p"}, "-np must be a positive integer, got 'x'"},
           {{"-np", "99999999999", "p"},
            "-np must be a positive integer, got '99999999999'"},
           {{"-np"}, "-np expects a value"},
           {{"-np", "1", "--what", "p"}, "unknown flag '--what' (see --help)"},
           {{"--what", "-np", "2", "p"}, "unknown flag '--what' (see --help)"},
           {{"-np", "2", "-x", "KOLO_TEST_UNSET_VARIABLE", "p"},
            "-x KOLO_TEST_UNSET_VARIABLE: KOLO_TEST_UNSET_VARIABLE is not set "
            "in kolorun's environment"},
           {{"-np", "2", "-x", "=v", "p"},
            "-x expects NAME or NAME=VALUE, got '=v'"},
           {{"-np", "2", "-H", "a:1", "--hostfile", "f", "p"},
            "-H and --hostfile both name the hosts; give one"},
           {{"-np", "5", "-H", "h1:2,h2:2", "p"},
            "-np 5 is more than the 4 slots of the hosts (h1:2, h2:2)"},
           {{"-H", "h1:2", "--remote-shell", "ip netns exec", "p"},
            "--remote-shell needs {host} where the host name goes, got 'ip "
            "netns exec'"},
           {{"-np", "2", "--ssh-port", "0", "p"},
            "--ssh-port must be an integer from 1 to 65535, got '0'"},
           {{"-np", "2", "--start-timeout", "-1", "p"},
            "--start-timeout must be a positive number of seconds, got '-1'"},
           {{"-np", "2", "--rendezvous", "h:1", "p"},
            "--rendezvous belongs to the per-node form: add --nnodes"},
           {{"--nnodes", "2", "--node-rank", "0", "p"},
            "--nnodes needs --rendezvous as well (see --help)"},
           {{"--nnodes", "2", "--node-rank", "2", "--rendezvous", "h:1",
             "-np-per-node", "2", "p"},
            "--node-rank 2 is outside the 2 nodes of --nnodes (0 to 1)"},
           {{"--nnodes", "2", "--node-rank", "0", "--rendezvous", "h",
             "-np-per-node", "2", "p"},
            "--rendezvous expects HOST:PORT, got 'h'"},
           {{"-np", "3", "--nnodes", "2", "--node-rank", "0", "--rendezvous",
             "h:1", "-np-per-node", "2", "p"},
            "-np 3 disagrees with --nnodes 2 times --np-per-node 2 = 4"},
           {{"-H", "h1:2", "--launcher", "mpirun", "p"},
            "-H and --hostfile start ranks through kolorun's own agents, which "
            "cannot start --backend mpi or --launcher mpirun; give mpirun its "
            "hosts with --mpi-args '--host ...'"},
           {{"-np", "1", "--env", "=v", "p"}, "--env expects K=V, got '=v'"},
           {{"-np", "1", "--timeout", "soon", "p"},
            "--timeout must be a positive number of seconds, got 'soon'"},
           {{"-np", "1", "--"},
            "no program given: kolorun -np N program [args...]"},
       }) {
    StatusOr<LaunchOptions> options = Parse(c.args);
    ASSERT_FALSE(options.ok()) << c.message;
    EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(options.status().message(), c.message);
  }
}

TEST(ParseOptionsTest, BindTo) {
  EXPECT_EQ(Parse({"-np", "2", "prog"})->bind_to, BindTo::kCore);
  EXPECT_EQ(Parse({"-np", "2", "--bind-to", "none", "prog"})->bind_to,
            BindTo::kNone);
  EXPECT_EQ(Parse({"-np", "2", "--bind-to=core", "prog"})->bind_to,
            BindTo::kCore);
  // Gloo's event loop would share its caller's core: unbound unless asked.
  if (EngineBuilt("gloo")) {
    EXPECT_EQ(Parse({"-np", "2", "--backend", "gloo", "prog"})->bind_to,
              BindTo::kNone);
    EXPECT_EQ(
        Parse({"-np", "2", "--backend", "gloo", "--bind-to", "core", "prog"})
            ->bind_to,
        BindTo::kCore);
  }
  StatusOr<LaunchOptions> bad =
      Parse({"-np", "2", "--bind-to", "socket", "prog"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--bind-to must be core or none, got 'socket'");
}

TEST(ParseOptionsTest, Hosts) {
  StatusOr<LaunchOptions> options =
      Parse({"-H", "h1:2,h2:2", "--ssh-port", "2222", "--ssh-identity-file",
             "/k/id", "--start-timeout", "7", "--network-interface",
             "eth1,10.1.0.0/24", "-x", "A", "-x", "B=2", "prog"},
            {{"A", "from-kolorun"}});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  // Without -np, every slot.
  EXPECT_EQ(options->num_ranks, 4);
  ASSERT_EQ(options->hosts.size(), 2u);
  EXPECT_EQ(options->hosts[1].name, "h2");
  EXPECT_EQ(options->hosts[1].slots, 2);
  EXPECT_EQ(options->ssh_port, 2222);
  EXPECT_EQ(options->ssh_identity_file, "/k/id");
  EXPECT_EQ(options->start_timeout_seconds, 7);
  EXPECT_EQ(options->network_interface, "eth1,10.1.0.0/24");
  using Pair = std::pair<std::string, std::string>;
  EXPECT_EQ(options->env,
            (std::vector<Pair>{{"A", "from-kolorun"}, {"B", "2"}}));
  EXPECT_EQ(options->forwarded_names, (std::vector<std::string>{"A", "B"}));
  // Across hosts: unbound unless asked.
  EXPECT_EQ(options->bind_to, BindTo::kNone);
  EXPECT_EQ(Parse({"-np", "3", "-H", "h1:2,h2:2", "p"})->num_ranks, 3);
}

TEST(ParseOptionsTest, PerNode) {
  StatusOr<LaunchOptions> options = Parse(
      {"--nnodes", "3", "--node-rank", "2", "--rendezvous", "10.1.0.1:29500",
       "-np-per-node", "2", "--secret-file", "/s", "prog", "x"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->nnodes, 3);
  EXPECT_EQ(options->node_rank, 2);
  EXPECT_EQ(options->np_per_node, 2);
  EXPECT_EQ(options->num_ranks, 6);
  EXPECT_EQ(options->rendezvous, "10.1.0.1:29500");
  EXPECT_EQ(options->secret_file, "/s");
  EXPECT_EQ(options->command, (std::vector<std::string>{"prog", "x"}));
}

TEST(ParseOptionsTest, Elastic) {
  StatusOr<LaunchOptions> options =
      Parse({"--elastic", "-np", "4", "--min-np", "2", "--max-np", "6",
             "--reset-limit", "5", "--elastic-timeout", "30",
             "--heartbeat-timeout", "2", "--blacklist-cooldown", "10", "prog"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_TRUE(options->elastic);
  EXPECT_EQ(options->num_ranks, 4);
  EXPECT_EQ(options->min_np, 2);
  EXPECT_EQ(options->max_np, 6);
  EXPECT_EQ(options->reset_limit, 5);
  EXPECT_EQ(options->elastic_timeout_seconds, 30);
  EXPECT_EQ(options->heartbeat_timeout_seconds, 2);
  EXPECT_EQ(options->blacklist_cooldown_seconds, 10);

  StatusOr<LaunchOptions> defaults = Parse({"--elastic", "-np", "3", "prog"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->min_np, 3);
  EXPECT_EQ(defaults->max_np, 3);
  EXPECT_EQ(defaults->reset_limit, -1);
}

TEST(ParseOptionsTest, ElasticErrorsNameTheFlags) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--min-np", "2", "-np", "2", "prog"}, "--min-np belongs to elastic"},
      {{"--elastic", "-np", "2", "--min-np", "3", "prog"},
       "--min-np 3 <= -np 2 <= --max-np 2 does not hold"},
      {{"--elastic", "-np", "4", "--max-np", "3", "prog"}, "does not hold"},
      {{"--elastic", "-np", "2", "--heartbeat-timeout", "0", "prog"},
       "--heartbeat-timeout must be a positive number of seconds"},
      {{"--elastic", "-np", "2", "--launcher", "mpirun", "prog"},
       "MPI's world cannot change size"},
      {{"--elastic", "-np", "2", "-H", "a:2", "--host-discovery-script", "x",
        "prog"},
       "give one"},
  };
  for (const Case& c : cases) {
    StatusOr<LaunchOptions> options = Parse(c.args);
    ASSERT_FALSE(options.ok()) << c.message;
    EXPECT_THAT(options.status().message(), HasSubstr(c.message));
  }
}

TEST(ParseOptionsTest, AgentNeedsNothingElse) {
  StatusOr<LaunchOptions> options = Parse({"--agent"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_TRUE(options->agent);
}

TEST(SplitOnWhitespaceTest, DropsEmptyPieces) {
  EXPECT_EQ(SplitOnWhitespace("  a \tb  c "),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitOnWhitespace("   ").empty());
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
