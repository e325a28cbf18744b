#include "options.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kolo {
namespace kolorun {
namespace {

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
      Parse({"-np", "4", "--backend", "mpi", "--env", "A=1", "--env", "B=x=y",
             "--timeout", "9", "--mpi-args", " --bind-to  none ", "--verbose",
             "prog", "a", "-np", "2"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->num_ranks, 4);
  EXPECT_EQ(options->backend, BackendKind::kMpi);
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
  StatusOr<LaunchOptions> mpi = Parse({"-np", "2", "--backend", "mpi", "prog"});
  ASSERT_TRUE(mpi.ok()) << mpi.status().ToString();
  EXPECT_EQ(mpi->launcher, LauncherKind::kMpirun);

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
  EXPECT_NE(mpi_by_kolorun.status().message().find(
                "--launcher kolorun cannot start --backend mpi"),
            std::string::npos)
      << mpi_by_kolorun.status().message();
  StatusOr<LaunchOptions> args_without_mpirun =
      Parse({"-np", "2", "--mpi-args", "-x A", "prog"});
  ASSERT_FALSE(args_without_mpirun.ok());
  EXPECT_NE(args_without_mpirun.status().message().find("--launcher mpirun"),
            std::string::npos);
}

TEST(ParseOptionsTest, BackendDefaultsToTheEnvironmentAndTheFlagWins) {
  StatusOr<LaunchOptions> from_env =
      Parse({"-np", "1", "prog"}, {{"KOLO_BACKEND", "mpi"}});
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->backend, BackendKind::kMpi);
  StatusOr<LaunchOptions> flag = Parse(
      {"-np", "1", "--backend", "gloo", "prog"}, {{"KOLO_BACKEND", "mpi"}});
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->backend, BackendKind::kGloo);
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
           {{"-x", "-np", "2", "p"}, "unknown flag '-x' (see --help)"},
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
  EXPECT_EQ(Parse({"-np", "2", "--backend", "gloo", "prog"})->bind_to,
            BindTo::kNone);
  EXPECT_EQ(
      Parse({"-np", "2", "--backend", "gloo", "--bind-to", "core", "prog"})
          ->bind_to,
      BindTo::kCore);
  StatusOr<LaunchOptions> bad =
      Parse({"-np", "2", "--bind-to", "socket", "prog"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--bind-to must be core or none, got 'socket'");
}

TEST(SplitOnWhitespaceTest, DropsEmptyPieces) {
  EXPECT_EQ(SplitOnWhitespace("  a \tb  c "),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitOnWhitespace("   ").empty());
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
