#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>
#include <tuple>

#include "kolo_internal/net.h"

namespace kolo {
namespace kolorun {
namespace {

// Far beyond what one host runs; it only keeps the rank arithmetic in int32.
constexpr int64_t kMaxRanks = 1 << 16;
constexpr int64_t kMaxTimeoutSeconds = int64_t{7} * 24 * 3600;

// An engine kolo knows, whether or not this build has it.
bool IsKnownEngine(const std::string& name) {
  return name == "shm" || name == "tcp" || name == "gloo" || name == "mpi";
}

// CLI11 only knows one-letter short flags, so `-np` would read as `-n -p`.
// kolorun takes the spelling mpirun and horovodrun users type and hands
// CLI11 the long form.
std::string CanonicalFlag(const std::string& arg) {
  for (const char* flag : {"-np", "-np-per-node"}) {
    const std::string single(flag);
    if (arg == single) return "-" + single;
    if (arg.rfind(single + "=", 0) == 0) return "-" + arg;
  }
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

// -x NAME takes kolorun's value of NAME; -x NAME=VALUE sets it, as mpirun's
// -x does.
StatusOr<std::pair<std::string, std::string>> ParseForwardedVariable(
    const std::string& text, const EnvLookup& env) {
  if (text.empty() || text[0] == '=') {
    return InvalidArgument("-x expects NAME or NAME=VALUE, got '" + text + "'");
  }
  size_t eq = text.find('=');
  if (eq != std::string::npos) {
    return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
  }
  std::optional<std::string> value = env(text.c_str());
  if (!value) {
    return InvalidArgument("-x " + text + ": " + text +
                           " is not set in kolorun's environment");
  }
  return std::make_pair(text, *value);
}

StatusOr<int32_t> ParseCount(const std::string& text, int64_t min, int64_t max,
                             const std::string& flag) {
  StatusOr<int64_t> value = ParseInt(text, min, max, flag);
  if (!value.ok()) {
    return InvalidArgument(flag + " must be an integer from " +
                           std::to_string(min) + " to " + std::to_string(max) +
                           ", got '" + text + "'");
  }
  return static_cast<int32_t>(*value);
}

// A flag's number of seconds, from 1 to a week.
StatusOr<int64_t> ParseSeconds(const std::string& text,
                               const std::string& flag) {
  StatusOr<int64_t> value = ParseInt(text, 1, kMaxTimeoutSeconds, flag);
  if (!value.ok()) {
    return InvalidArgument(
        flag + " must be a positive number of seconds, got '" + text + "'");
  }
  return value;
}

// The checks of the per-node form (torchrun's model): every node runs
// kolorun with the same --nnodes, --rendezvous and --np-per-node.
Status CheckPerNodeOptions(const CLI::App& app, LaunchOptions* options,
                           const std::string& np_text) {
  for (const char* needed : {"--node-rank", "--rendezvous", "--np-per-node"}) {
    if (app.count(needed) == 0) {
      return InvalidArgument(std::string("--nnodes needs ") + needed +
                             " as well (see --help)");
    }
  }
  if (options->node_rank >= options->nnodes) {
    return InvalidArgument("--node-rank " + std::to_string(options->node_rank) +
                           " is outside the " +
                           std::to_string(options->nnodes) +
                           " nodes of --nnodes (0 to " +
                           std::to_string(options->nnodes - 1) + ")");
  }
  std::string host;
  int port = 0;
  Status address = ParseHostPortInto(options->rendezvous, &host, &port);
  if (!address.ok()) {
    return InvalidArgument("--rendezvous expects HOST:PORT, got '" +
                           options->rendezvous + "'");
  }
  if (!options->hosts.empty()) {
    return InvalidArgument(
        "--nnodes starts the ranks of this node only; -H and --hostfile "
        "belong to the form where one kolorun starts every host");
  }
  const int64_t total =
      int64_t{options->nnodes} * int64_t{options->np_per_node};
  if (total > kMaxRanks) {
    return InvalidArgument("--nnodes times --np-per-node is " +
                           std::to_string(total) + " ranks, more than " +
                           std::to_string(kMaxRanks));
  }
  if (!np_text.empty() && options->num_ranks != total) {
    return InvalidArgument(
        "-np " + np_text + " disagrees with --nnodes " +
        std::to_string(options->nnodes) + " times --np-per-node " +
        std::to_string(options->np_per_node) + " = " + std::to_string(total));
  }
  options->num_ranks = static_cast<int32_t>(total);
  if (options->launcher != LauncherKind::kKolorun) {
    return InvalidArgument(
        "--nnodes starts the ranks with kolorun itself; it cannot run "
        "--backend mpi or --launcher mpirun (use mpirun or srun directly)");
  }
  return Status::Ok();
}

// The texts of the elastic flags, in the order CheckElasticOptions reads.
struct ElasticTexts {
  std::string min_np, max_np, reset_limit, elastic_timeout, heartbeat_timeout,
      cooldown;
};

Status CheckElasticOptions(const CLI::App& app, LaunchOptions* options,
                           const std::string& np_text,
                           const ElasticTexts& texts) {
  const char* elastic_only[] = {"--min-np",
                                "--max-np",
                                "--host-discovery-script",
                                "--reset-limit",
                                "--elastic-timeout",
                                "--heartbeat-timeout",
                                "--blacklist-cooldown"};
  if (!options->elastic) {
    for (const char* flag : elastic_only) {
      if (app.count(flag) > 0) {
        return InvalidArgument(std::string(flag) +
                               " belongs to elastic jobs: add --elastic");
      }
    }
    return Status::Ok();
  }
  if (options->nnodes > 0) {
    return InvalidArgument(
        "--elastic and --nnodes are two ways to run a job; give one");
  }
  if (options->launcher != LauncherKind::kKolorun) {
    return InvalidArgument(
        "--elastic starts its workers itself; it cannot run --backend mpi or "
        "--launcher mpirun (MPI's world cannot change size)");
  }
  if (!options->host_discovery_script.empty() && !options->hosts.empty()) {
    return InvalidArgument(
        "--host-discovery-script and -H/--hostfile both name the hosts; give "
        "one");
  }
  if (app.count("--host-discovery-script") > 0 &&
      options->host_discovery_script.empty()) {
    return InvalidArgument("--host-discovery-script expects a command");
  }
  if (np_text.empty() && options->hosts.empty()) {
    return InvalidArgument("--elastic needs -np N (the workers to start with)");
  }
  const int32_t np = options->num_ranks;
  options->min_np = np;
  options->max_np = np;
  if (app.count("--min-np") > 0) {
    KOLO_ASSIGN_OR_RETURN(options->min_np,
                          ParseCount(texts.min_np, 1, kMaxRanks, "--min-np"));
  }
  if (app.count("--max-np") > 0) {
    KOLO_ASSIGN_OR_RETURN(options->max_np,
                          ParseCount(texts.max_np, 1, kMaxRanks, "--max-np"));
  }
  if (options->min_np > np || options->max_np < np) {
    return InvalidArgument("--min-np " + std::to_string(options->min_np) +
                           " <= -np " + std::to_string(np) + " <= --max-np " +
                           std::to_string(options->max_np) + " does not hold");
  }
  if (app.count("--reset-limit") > 0) {
    KOLO_ASSIGN_OR_RETURN(
        options->reset_limit,
        ParseCount(texts.reset_limit, 0, kMaxRanks * 1024, "--reset-limit"));
  }
  struct Seconds {
    const char* flag;
    const std::string& text;
    int64_t* value;
  };
  for (const Seconds& seconds :
       {Seconds{"--elastic-timeout", texts.elastic_timeout,
                &options->elastic_timeout_seconds},
        Seconds{"--heartbeat-timeout", texts.heartbeat_timeout,
                &options->heartbeat_timeout_seconds},
        Seconds{"--blacklist-cooldown", texts.cooldown,
                &options->blacklist_cooldown_seconds}}) {
    if (app.count(seconds.flag) == 0) continue;
    KOLO_ASSIGN_OR_RETURN(*seconds.value,
                          ParseSeconds(seconds.text, seconds.flag));
  }
  return Status::Ok();
}

// The values of kolorun's flags as typed, before they are checked.
struct FlagTexts {
  std::string np, servers, backend, launcher, bind_to, timeout, mpi_args,
      metrics_port;
  std::vector<std::string> env, forwarded;
  std::string hosts, hostfile, ssh_port, start_timeout;
  std::string nnodes, node_rank, np_per_node;
  ElasticTexts elastic;
};

// Every flag kolorun takes: those without a value, then those with one
// (into `texts` where the value is checked later, else straight into
// `options`).
void DeclareFlags(CLI::App* app, LaunchOptions* options, FlagTexts* texts) {
  const std::pair<const char*, bool*> switches[] = {
      {"-h,--help", &options->help},
      {"--version", &options->version},
      {"--verbose", &options->verbose},
      {"--agent", &options->agent},
      {"--elastic", &options->elastic}};
  for (const auto& [name, value] : switches) app->add_flag(name, *value);
  ElasticTexts& elastic = texts->elastic;
  const std::pair<const char*, std::string*> with_value[] = {
      {"--np", &texts->np},
      {"--backend", &texts->backend},
      {"--launcher", &texts->launcher},
      {"--bind-to", &texts->bind_to},
      {"--timeout", &texts->timeout},
      {"--mpi-args", &texts->mpi_args},
      {"--metrics-port", &texts->metrics_port},
      {"--servers", &texts->servers},
      {"--metrics-address", &options->metrics_address},
      {"--job-name", &options->job_name},
      {"--timeline-filename", &options->timeline_path},
      {"-H,--hosts", &texts->hosts},
      {"--hostfile", &texts->hostfile},
      {"--ssh-port", &texts->ssh_port},
      {"--ssh-identity-file", &options->ssh_identity_file},
      {"--ssh-config-file", &options->ssh_config_file},
      {"--remote-shell", &options->remote_shell},
      {"--start-timeout", &texts->start_timeout},
      {"--network-interface", &options->network_interface},
      {"--nnodes", &texts->nnodes},
      {"--node-rank", &texts->node_rank},
      {"--rendezvous", &options->rendezvous},
      {"--np-per-node", &texts->np_per_node},
      {"--secret-file", &options->secret_file},
      {"--min-np", &elastic.min_np},
      {"--max-np", &elastic.max_np},
      {"--host-discovery-script", &options->host_discovery_script},
      {"--reset-limit", &elastic.reset_limit},
      {"--elastic-timeout", &elastic.elastic_timeout},
      {"--heartbeat-timeout", &elastic.heartbeat_timeout},
      {"--blacklist-cooldown", &elastic.cooldown}};
  for (const auto& [name, value] : with_value)
    app->add_option(name, *value)->allow_extra_args(false);
  // Repeatable.
  app->add_option("--env", texts->env)->allow_extra_args(false);
  app->add_option("-x", texts->forwarded)->allow_extra_args(false);
}

Status ParseCommandLine(const std::vector<std::string>& argv, CLI::App* app) {
  std::vector<std::string> args;
  for (size_t i = 1; i < argv.size(); ++i)
    args.push_back(CanonicalFlag(argv[i]));
  // CLI11 consumes its argument vector from the back.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app->parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--np: 1 required TEXT missing"; name the flag as typed.
    std::string flag = e.what();
    flag = flag.substr(0, flag.find(':'));
    if (flag == "--np") flag = "-np";
    if (flag == "--np-per-node") flag = "-np-per-node";
    return InvalidArgument(flag + " expects a value");
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  return Status::Ok();
}

// What follows kolorun's flags: the program and its arguments, exactly as
// given (empty when none is).
StatusOr<std::vector<std::string>> ProgramAndItsArguments(
    const CLI::App& app, const std::vector<std::string>& argv) {
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
  return tail;
}

Status ResolveHosts(const CLI::App& app, const FlagTexts& texts,
                    LaunchOptions* options) {
  if (!texts.hosts.empty() && !texts.hostfile.empty()) {
    return InvalidArgument("-H and --hostfile both name the hosts; give one");
  }
  if (app.count("-H") > 0) {
    KOLO_ASSIGN_OR_RETURN(options->hosts, ParseHostList(texts.hosts));
  } else if (app.count("--hostfile") > 0) {
    if (texts.hostfile.empty())
      return InvalidArgument("--hostfile expects a file");
    KOLO_ASSIGN_OR_RETURN(options->hosts, ReadHostfile(texts.hostfile));
  }
  return Status::Ok();
}

// -np (or the hosts' slots) and --servers.
Status ResolveRanks(const CLI::App& app, const FlagTexts& texts, bool per_node,
                    LaunchOptions* options) {
  if (texts.np.empty()) {
    if (app.count("--np") > 0) {
      return InvalidArgument("-np must be a positive integer, got ''");
    }
    // Like mpirun, a host list without -np fills every slot.
    if (options->hosts.empty() && !per_node) {
      return InvalidArgument("-np N is required (see --help)");
    }
    int64_t slots = 0;
    for (const HostSlots& host : options->hosts) slots += host.slots;
    options->num_ranks = static_cast<int32_t>(std::min(slots, kMaxRanks));
  } else {
    StatusOr<int64_t> np = ParseInt(texts.np, 1, kMaxRanks, "-np");
    if (!np.ok()) {
      return InvalidArgument("-np must be a positive integer, got '" +
                             texts.np + "'");
    }
    options->num_ranks = static_cast<int32_t>(*np);
  }
  if (app.count("--servers") > 0) {
    // -np counts the workers; the servers come on top, as the last ranks.
    KOLO_ASSIGN_OR_RETURN(int64_t servers,
                          ParseInt(texts.servers, 1, kMaxRanks, "--servers"));
    if (texts.np.empty() || options->elastic) {
      return InvalidArgument(
          "--servers K needs -np N (the workers) and a fixed world, not "
          "--elastic or a host list's slots");
    }
    options->servers = static_cast<int32_t>(servers);
    options->num_ranks += options->servers;
  }
  if (!options->hosts.empty()) {
    // Only to report a job that does not fit before anything starts.
    KOLO_RETURN_IF_ERROR(
        PlaceRanks(options->hosts, options->num_ranks).status());
  }
  return Status::Ok();
}

// `text` as a backend; `where` names it in errors ("--backend",
// "environment variable KOLO_BACKEND"), and `where_unbuilt` where the
// engine is one this build lacks.
StatusOr<BackendKind> ParseBackendNamed(const std::string& text,
                                        const std::string& where,
                                        const std::string& where_unbuilt) {
  StatusOr<BackendKind> kind = ParseBackend(text);
  if (!kind.ok() && IsKnownEngine(text)) {
    // gloo or mpi in a build without it: say so, and how to build it.
    return InvalidArgument(where_unbuilt + ": " + kind.status().message());
  }
  if (!kind.ok()) {
    return InvalidArgument(where + " must be shm, tcp, gloo or mpi, got '" +
                           text + "'");
  }
  return kind;
}

Status ResolveBackend(const std::string& text, const EnvLookup& env,
                      LaunchOptions* options) {
  if (!text.empty()) {
    KOLO_ASSIGN_OR_RETURN(
        options->backend,
        ParseBackendNamed(text, "--backend", "--backend " + text));
    return Status::Ok();
  }
  std::optional<std::string> from_env = env(env::kBackend);
  if (from_env && !from_env->empty()) {
    const std::string where =
        std::string("environment variable ") + env::kBackend;
    KOLO_ASSIGN_OR_RETURN(options->backend,
                          ParseBackendNamed(*from_env, where, where));
  }
  return Status::Ok();
}

// MPI's ranks must come from mpirun; the other engines run either way.
Status ResolveLauncher(const CLI::App& app, const std::string& text,
                       LaunchOptions* options) {
  if (app.count("--launcher") == 0) {
    options->launcher = options->backend == BackendKind::kMpi
                            ? LauncherKind::kMpirun
                            : LauncherKind::kKolorun;
  } else if (text == "mpirun") {
    options->launcher = LauncherKind::kMpirun;
  } else if (text == "kolorun") {
    if (options->backend == BackendKind::kMpi) {
      return InvalidArgument(
          "--launcher kolorun cannot start --backend mpi: MPI ranks are "
          "started by mpirun (drop --launcher, or use --launcher mpirun)");
    }
    options->launcher = LauncherKind::kKolorun;
  } else {
    return InvalidArgument("--launcher must be kolorun or mpirun, got '" +
                           text + "'");
  }
  return Status::Ok();
}

Status ResolveBindTo(const CLI::App& app, const std::string& text,
                     LaunchOptions* options) {
  if (app.count("--bind-to") > 0) {
    if (text == "core") {
      options->bind_to = BindTo::kCore;
    } else if (text == "none") {
      options->bind_to = BindTo::kNone;
    } else {
      return InvalidArgument("--bind-to must be core or none, got '" + text +
                             "'");
    }
  } else if (options->backend == BackendKind::kGloo ||
             !options->hosts.empty()) {
    // Across hosts as well: binding has not been measured there with kolo's
    // tcp engine, the default between hosts, and Gloo may be asked for.
    // Bound, a rank's Gloo event-loop thread shares the core of the thread
    // whose sends it serves, and spins there (it polls while that thread
    // holds the connection's lock) until the scheduler preempts it: 4 KiB
    // allreduces took 5.7-7.2 ms bound against 1.1-3.2 ms unbound.
    options->bind_to = BindTo::kNone;
  }
  return Status::Ok();
}

// --env and -x.
Status ResolveEnvironment(const FlagTexts& texts, const EnvLookup& env,
                          LaunchOptions* options) {
  for (const std::string& text : texts.env) {
    KOLO_ASSIGN_OR_RETURN(auto assignment, ParseEnvAssignment(text));
    options->env.push_back(std::move(assignment));
  }
  for (const std::string& text : texts.forwarded) {
    KOLO_ASSIGN_OR_RETURN(auto assignment, ParseForwardedVariable(text, env));
    options->forwarded_names.push_back(assignment.first);
    options->env.push_back(std::move(assignment));
  }
  return Status::Ok();
}

// How the agents are reached: ssh, --remote-shell, --start-timeout,
// --network-interface.
Status ResolveRemoteFlags(const CLI::App& app, const FlagTexts& texts,
                          LaunchOptions* options) {
  if (app.count("--ssh-port") > 0) {
    KOLO_ASSIGN_OR_RETURN(options->ssh_port,
                          ParseCount(texts.ssh_port, 1, 65535, "--ssh-port"));
  }
  if (app.count("--start-timeout") > 0) {
    KOLO_ASSIGN_OR_RETURN(options->start_timeout_seconds,
                          ParseSeconds(texts.start_timeout, "--start-timeout"));
  }
  if (app.count("--network-interface") > 0) {
    KOLO_RETURN_IF_ERROR(
        InterfaceSpec::Parse(options->network_interface, "--network-interface")
            .status());
  }
  if (app.count("--remote-shell") > 0 &&
      options->remote_shell.find("{host}") == std::string::npos) {
    return InvalidArgument(
        "--remote-shell needs {host} where the host name goes, got '" +
        options->remote_shell + "'");
  }
  return Status::Ok();
}

Status ResolvePerNode(const CLI::App& app, const FlagTexts& texts,
                      bool per_node, LaunchOptions* options) {
  if (!per_node) {
    for (const char* flag :
         {"--node-rank", "--rendezvous", "--np-per-node", "--secret-file"}) {
      if (app.count(flag) > 0) {
        return InvalidArgument(std::string(flag) +
                               " belongs to the per-node form: add --nnodes");
      }
    }
    return Status::Ok();
  }
  KOLO_ASSIGN_OR_RETURN(options->nnodes,
                        ParseCount(texts.nnodes, 1, kMaxRanks, "--nnodes"));
  if (app.count("--node-rank") > 0) {
    KOLO_ASSIGN_OR_RETURN(
        options->node_rank,
        ParseCount(texts.node_rank, 0, kMaxRanks - 1, "--node-rank"));
  }
  if (app.count("--np-per-node") > 0) {
    KOLO_ASSIGN_OR_RETURN(
        options->np_per_node,
        ParseCount(texts.np_per_node, 1, kMaxRanks, "-np-per-node"));
  }
  return CheckPerNodeOptions(app, options, texts.np);
}

// What every rank is told: --timeout, the metrics, the timeline,
// --mpi-args.
Status ResolveJobFlags(const CLI::App& app, const FlagTexts& texts,
                       LaunchOptions* options) {
  if (app.count("--timeout") > 0) {
    KOLO_ASSIGN_OR_RETURN(options->timeout_seconds,
                          ParseSeconds(texts.timeout, "--timeout"));
  }
  if (app.count("--metrics-port") > 0) {
    StatusOr<int64_t> port =
        ParseInt(texts.metrics_port, 0, 65535, "--metrics-port");
    if (!port.ok()) {
      return InvalidArgument(
          "--metrics-port must be a TCP port from 0 (the OS chooses) to "
          "65535, got '" +
          texts.metrics_port + "'");
    }
    options->metrics_port = static_cast<int>(*port);
  }
  for (const auto& [flag, value, what] :
       {std::make_tuple("--metrics-address", &options->metrics_address,
                        "an address"),
        std::make_tuple("--job-name", &options->job_name, "a name"),
        std::make_tuple("--timeline-filename", &options->timeline_path,
                        "a file name")}) {
    if (app.count(flag) > 0 && value->empty()) {
      return InvalidArgument(std::string(flag) + " expects " + what);
    }
  }
  if (app.count("--mpi-args") > 0) {
    if (options->launcher != LauncherKind::kMpirun) {
      return InvalidArgument(
          "--mpi-args needs mpirun to start the ranks: --launcher mpirun or "
          "--backend mpi");
    }
    options->mpi_args = SplitOnWhitespace(texts.mpi_args);
  }
  return Status::Ok();
}

}  // namespace

const char* LauncherName(LauncherKind kind) {
  return kind == LauncherKind::kMpirun ? "mpirun" : "kolorun";
}

namespace {

// The sections of Usage(), in its order.
std::string UsageSynopsis() {
  return "Usage: kolorun -np N [options] [--] program [args...]\n"
         "       kolorun [-np N] -H h1:2,h2:2 | --hostfile F [options] "
         "program...\n"
         "       kolorun --nnodes M --node-rank I --rendezvous HOST:PORT\n"
         "               --np-per-node K [options] program...\n"
         "\n"
         "Starts N ranks of `program` on this host (or on the hosts given),\n"
         "hosts their rendezvous store, and prefixes every line they print\n"
         "with [rank]<stdout>: or [rank]<stderr>:. When one rank fails, the\n"
         "others are stopped.\n"
         "\n";
}

std::string UsageJobOptions() {
  return "Options:\n"
         "  -np N               number of ranks (>= 1; required unless hosts\n"
         "                      are given, whose slots it then fills)\n"
         "  --servers K         also start K parameter servers, ranks "
         "N..N+K-1\n"
         "                      (KOLO_ROLE=server|worker, KOLO_SERVERS=K)\n"
         "  --backend B         shm, tcp, gloo or mpi (default: $KOLO_BACKEND, "
         "else shm);\n"
         "                      shm: shared memory (tcp between hosts), tcp: "
         "kolo's\n"
         "                      TCP engine, gloo: Gloo's TCP, mpi: MPI (its "
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
         "  --metrics-port P    serve the metrics of this host's ranks at\n"
         "                      http://ADDRESS:P/metrics (Prometheus) and a\n"
         "                      live page of the job at http://ADDRESS:P/;\n"
         "                      0: the OS chooses (the URL is printed)\n"
         "  --metrics-address A where the metrics listen (default "
         "127.0.0.1, or\n"
         "                      each host's job address across hosts)\n"
         "  --job-name NAME     the job label of the metrics (default: the\n"
         "                      program's name)\n"
         "  --mpi-args \"...\"    extra arguments for mpirun (--launcher "
         "mpirun or\n"
         "                      --backend mpi)\n"
         "  -x NAME[=VALUE]     pass NAME (kolorun's value, or VALUE) to "
         "every\n"
         "                      rank, on every host (repeatable)\n"
         "  --verbose           print the store address, each rank's command\n"
         "                      and each rank's exit\n"
         "\n";
}

std::string UsageHostOptions() {
  return "Hosts (one kolorun agent per host starts that host's ranks):\n"
         "  -H, --hosts LIST    h1:2,h2:2 (host:slots; a host without :N has "
         "1)\n"
         "  --hostfile F        one host per line: `host slots=N`, # comments\n"
         "  --ssh-port P        ssh to the hosts on port P\n"
         "  --ssh-identity-file F  ssh with this private key\n"
         "  --ssh-config-file F ssh with this configuration file (ssh -F)\n"
         "  --remote-shell T    start each host's agent with the command T\n"
         "                      instead of ssh: {host} is replaced by the "
         "host;\n"
         "                      {command}, if present, by the agent's command\n"
         "                      as one shell string, else the agent's argv "
         "is\n"
         "                      appended (e.g. 'ip netns exec {host}')\n"
         "  --start-timeout S   seconds for every host to answer the "
         "preflight\n"
         "                      (default " +
         std::to_string(kDefaultStartTimeoutSeconds) +
         ")\n"
         "  --network-interface I  interface names and/or CIDR subnets, comma\n"
         "                      separated (eth1, 10.1.0.0/24); default: the\n"
         "                      addresses through which the hosts reach each "
         "other\n"
         "\n";
}

std::string UsagePerNodeOptions() {
  return "Per node (the cluster starts one kolorun per node):\n"
         "  --nnodes M          number of nodes\n"
         "  --node-rank I       this node's index, 0 to M-1; node 0 hosts the\n"
         "                      store\n"
         "  --rendezvous H:P    where node 0's store listens\n"
         "  -np-per-node K      ranks on each node\n"
         "  --secret-file F     the job secret every node shares, at least\n"
         "                      16 bytes (else $KOLO_JOB_SECRET)\n"
         "\n";
}

std::string UsageElasticOptions() {
  return "Elastic (workers may die, freeze or join; the program uses\n"
         "kolo::elastic::Run):\n"
         "  --elastic           run an elastic job\n"
         "  --min-np A          fewest workers to train with (default -np)\n"
         "  --max-np B          most workers (default -np)\n"
         "  --host-discovery-script S  prints the hosts available now, one\n"
         "                      `host:slots` per line; run every second\n"
         "  --reset-limit R     end the job after more than R resets\n"
         "  --elastic-timeout S seconds to wait for --min-np workers "
         "(default 600)\n"
         "  --heartbeat-timeout S  evict a worker silent this long (default "
         "3)\n"
         "  --blacklist-cooldown S  seconds a failing host gets no workers\n"
         "                      (default 60)\n"
         "  --version           print kolo's version and what it was built\n"
         "                      with (LibTorch, CUDA, NCCL, engines)\n"
         "  -h, --help          print this help\n";
}

}  // namespace

std::string Usage() {
  return UsageSynopsis() + UsageJobOptions() + UsageHostOptions() +
         UsagePerNodeOptions() + UsageElasticOptions();
}

StatusOr<LaunchOptions> ParseOptions(const std::vector<std::string>& argv,
                                     const EnvLookup& env) {
  LaunchOptions options;
  FlagTexts texts;
  CLI::App app("kolorun", "kolorun");
  app.set_help_flag();  // kolorun prints its own usage text
  DeclareFlags(&app, &options, &texts);
  // Parsing stops at the first argument that is not kolorun's: the program.
  app.prefix_command();
  KOLO_RETURN_IF_ERROR(ParseCommandLine(argv, &app));
  if (options.help || options.version || options.agent) return options;
  KOLO_ASSIGN_OR_RETURN(std::vector<std::string> program,
                        ProgramAndItsArguments(app, argv));

  const bool per_node = app.count("--nnodes") > 0;
  KOLO_RETURN_IF_ERROR(ResolveHosts(app, texts, &options));
  KOLO_RETURN_IF_ERROR(ResolveRanks(app, texts, per_node, &options));
  KOLO_RETURN_IF_ERROR(ResolveBackend(texts.backend, env, &options));
  KOLO_RETURN_IF_ERROR(ResolveLauncher(app, texts.launcher, &options));
  KOLO_RETURN_IF_ERROR(ResolveBindTo(app, texts.bind_to, &options));
  KOLO_RETURN_IF_ERROR(ResolveEnvironment(texts, env, &options));
  KOLO_RETURN_IF_ERROR(ResolveRemoteFlags(app, texts, &options));
  KOLO_RETURN_IF_ERROR(ResolvePerNode(app, texts, per_node, &options));
  if (!options.hosts.empty() && options.launcher != LauncherKind::kKolorun) {
    return InvalidArgument(
        "-H and --hostfile start ranks through kolorun's own agents, which "
        "cannot start --backend mpi or --launcher mpirun; give mpirun its "
        "hosts with --mpi-args '--host ...'");
  }
  KOLO_RETURN_IF_ERROR(ResolveJobFlags(app, texts, &options));
  KOLO_RETURN_IF_ERROR(
      CheckElasticOptions(app, &options, texts.np, texts.elastic));

  if (program.empty()) {
    return InvalidArgument("no program given: kolorun -np N program [args...]");
  }
  options.command = std::move(program);
  return options;
}

}  // namespace kolorun
}  // namespace kolo
