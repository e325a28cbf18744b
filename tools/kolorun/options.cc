#include "options.h"

#include <CLI/CLI.hpp>
#include <cstddef>

namespace kolo {
namespace kolorun {
namespace {

// Far beyond what one host runs; it only keeps the rank arithmetic in int32.
constexpr int64_t kMaxRanks = 1 << 16;
constexpr int64_t kMaxTimeoutSeconds = int64_t{7} * 24 * 3600;

// CLI11 only knows one-letter short flags, so `-np` would read as `-n -p`.
// kolorun takes the spelling mpirun and horovodrun users type and hands
// CLI11 the long form.
std::string CanonicalFlag(const std::string& arg) {
  if (arg == "-np") return "--np";
  if (arg.rfind("-np=", 0) == 0) return "-" + arg;
  return arg;
}

StatusOr<std::pair<std::string, std::string>> ParseEnvAssignment(
    const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--env expects K=V, got '" + text + "'");
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

}  // namespace

const char* LauncherName(LauncherKind kind) {
  return kind == LauncherKind::kMpirun ? "mpirun" : "kolorun";
}

std::string Usage() {
  return "Usage: kolorun -np N [options] [--] program [args...]\n"
         "\n"
         "Starts N ranks of `program` on this host, hosts their rendezvous\n"
         "store, and prefixes every line they print with [rank]<stdout>: or\n"
         "[rank]<stderr>:. When one rank fails, the others are stopped.\n"
         "\n"
         "Options:\n"
         "  -np N               number of ranks (required, >= 1)\n"
         "  --backend B         shm, gloo or mpi (default: $KOLO_BACKEND, "
         "else shm);\n"
         "                      shm: shared memory, gloo: TCP, mpi: MPI (its "
         "ranks\n"
         "                      are always started by mpirun)\n"
         "  --launcher L        kolorun or mpirun: what starts the ranks "
         "(default:\n"
         "                      mpirun for --backend mpi, else kolorun). "
         "mpirun with\n"
         "                      shm or gloo gives kolo's runtime those "
         "engines in an\n"
         "                      MPI world, e.g. for kolo-bench collectives "
         "--peer mpi\n"
         "  --bind-to B         core (default, but none for gloo): each rank "
         "runs\n"
         "                      on its own block of cores when there are at\n"
         "                      least as many cores as ranks; none: anywhere\n"
         "                      (mpirun binds itself)\n"
         "  --env K=V           set K=V in every rank's environment "
         "(repeatable)\n"
         "  --timeout S         seconds a rank waits for its peers before it\n"
         "                      reports them as failed (KOLO_TIMEOUT_S, "
         "default " +
         std::to_string(kDefaultTimeout.count()) +
         ")\n"
         "  --timeline-filename F  rank 0 writes a Chrome-trace timeline of\n"
         "                      the runtime to F (KOLO_TIMELINE)\n"
         "  --mpi-args \"...\"    extra arguments for mpirun (--launcher "
         "mpirun or\n"
         "                      --backend mpi)\n"
         "  --verbose           print the store address, each rank's command\n"
         "                      and each rank's exit\n"
         "  -h, --help          print this help\n";
}

std::vector<std::string> SplitOnWhitespace(const std::string& text) {
  std::vector<std::string> pieces;
  std::string current;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!current.empty()) pieces.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) pieces.push_back(std::move(current));
  return pieces;
}

StatusOr<LaunchOptions> ParseOptions(const std::vector<std::string>& argv,
                                     const EnvLookup& env) {
  LaunchOptions options;
  std::string np_text;
  std::string backend_text;
  std::string launcher_text;
  std::string bind_text;
  std::string timeout_text;
  std::string mpi_args_text;
  std::vector<std::string> env_texts;

  CLI::App app("kolorun", "kolorun");
  app.set_help_flag();  // kolorun prints its own usage text
  app.add_flag("-h,--help", options.help);
  app.add_option("--np", np_text)->allow_extra_args(false);
  app.add_option("--backend", backend_text)->allow_extra_args(false);
  app.add_option("--launcher", launcher_text)->allow_extra_args(false);
  app.add_option("--bind-to", bind_text)->allow_extra_args(false);
  app.add_option("--env", env_texts)->allow_extra_args(false);
  app.add_option("--timeout", timeout_text)->allow_extra_args(false);
  app.add_option("--mpi-args", mpi_args_text)->allow_extra_args(false);
  app.add_option("--timeline-filename", options.timeline_path)
      ->allow_extra_args(false);
  app.add_flag("--verbose", options.verbose);
  // Parsing stops at the first argument that is not kolorun's: the program.
  app.prefix_command();

  std::vector<std::string> args;
  for (size_t i = 1; i < argv.size(); ++i)
    args.push_back(CanonicalFlag(argv[i]));
  // CLI11 consumes its argument vector from the back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--np: 1 required TEXT missing"; name the flag as typed.
    std::string flag = e.what();
    flag = flag.substr(0, flag.find(':'));
    if (flag == "--np") flag = "-np";
    return InvalidArgument(flag + " expects a value");
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  if (options.help) return options;

  // CLI11 leaves unknown flags and, from the program on, everything.
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() != "--" && rest.front().size() > 1 &&
      rest.front()[0] == '-') {
    return InvalidArgument("unknown flag '" + rest.front() + "' (see --help)");
  }
  // Now what is left is a suffix of argv; take it from the original so that
  // the program's own arguments reach it unchanged.
  std::vector<std::string> tail(
      argv.end() - static_cast<ptrdiff_t>(rest.size()), argv.end());
  if (!tail.empty() && tail.front() == "--") tail.erase(tail.begin());

  if (np_text.empty()) {
    if (app.count("--np") > 0) {
      return InvalidArgument("-np must be a positive integer, got ''");
    }
    return InvalidArgument("-np N is required (see --help)");
  }
  StatusOr<int64_t> np = ParseInt(np_text, 1, kMaxRanks, "-np");
  if (!np.ok()) {
    return InvalidArgument("-np must be a positive integer, got '" + np_text +
                           "'");
  }
  options.num_ranks = static_cast<int32_t>(*np);

  if (backend_text.empty()) {
    std::optional<std::string> from_env = env(env::kBackend);
    if (from_env && !from_env->empty()) {
      StatusOr<BackendKind> kind = ParseBackend(*from_env);
      if (!kind.ok()) {
        return InvalidArgument(
            std::string("environment variable ") + env::kBackend +
            " must be shm, gloo or mpi, got '" + *from_env + "'");
      }
      options.backend = *kind;
    }
  } else {
    StatusOr<BackendKind> kind = ParseBackend(backend_text);
    if (!kind.ok()) {
      return InvalidArgument("--backend must be shm, gloo or mpi, got '" +
                             backend_text + "'");
    }
    options.backend = *kind;
  }

  // MPI's ranks must come from mpirun; the other engines run either way.
  if (app.count("--launcher") == 0) {
    options.launcher = options.backend == BackendKind::kMpi
                           ? LauncherKind::kMpirun
                           : LauncherKind::kKolorun;
  } else if (launcher_text == "mpirun") {
    options.launcher = LauncherKind::kMpirun;
  } else if (launcher_text == "kolorun") {
    if (options.backend == BackendKind::kMpi) {
      return InvalidArgument(
          "--launcher kolorun cannot start --backend mpi: MPI ranks are "
          "started by mpirun (drop --launcher, or use --launcher mpirun)");
    }
    options.launcher = LauncherKind::kKolorun;
  } else {
    return InvalidArgument("--launcher must be kolorun or mpirun, got '" +
                           launcher_text + "'");
  }

  if (app.count("--bind-to") > 0) {
    if (bind_text == "core") {
      options.bind_to = BindTo::kCore;
    } else if (bind_text == "none") {
      options.bind_to = BindTo::kNone;
    } else {
      return InvalidArgument("--bind-to must be core or none, got '" +
                             bind_text + "'");
    }
  } else if (options.backend == BackendKind::kGloo) {
    // Bound, a rank's Gloo event-loop thread shares the core of the thread
    // whose sends it serves, and spins there (it polls while that thread
    // holds the connection's lock) until the scheduler preempts it: 4 KiB
    // allreduces took 5.7-7.2 ms bound against 1.1-3.2 ms unbound.
    options.bind_to = BindTo::kNone;
  }

  for (const std::string& text : env_texts) {
    KOLO_ASSIGN_OR_RETURN(auto assignment, ParseEnvAssignment(text));
    options.env.push_back(std::move(assignment));
  }

  if (app.count("--timeout") > 0) {
    StatusOr<int64_t> timeout =
        ParseInt(timeout_text, 1, kMaxTimeoutSeconds, "--timeout");
    if (!timeout.ok()) {
      return InvalidArgument(
          "--timeout must be a positive number of seconds, got '" +
          timeout_text + "'");
    }
    options.timeout_seconds = *timeout;
  }

  if (app.count("--timeline-filename") > 0 && options.timeline_path.empty()) {
    return InvalidArgument("--timeline-filename expects a file name");
  }

  if (app.count("--mpi-args") > 0) {
    if (options.launcher != LauncherKind::kMpirun) {
      return InvalidArgument(
          "--mpi-args needs mpirun to start the ranks: --launcher mpirun or "
          "--backend mpi");
    }
    options.mpi_args = SplitOnWhitespace(mpi_args_text);
  }

  if (tail.empty()) {
    return InvalidArgument("no program given: kolorun -np N program [args...]");
  }
  options.command = std::move(tail);
  return options;
}

}  // namespace kolorun
}  // namespace kolo
