#include "job.h"

#include <sched.h>

#include <algorithm>

#include "kolo_internal/config.h"

namespace kolo {
namespace kolorun {
namespace {

bool HasName(const std::string& var, const std::string& name) {
  return var.size() > name.size() && var.compare(0, name.size(), name) == 0 &&
         var[name.size()] == '=';
}

// Settings every process gets on both backends. The user's --env come last
// so that they win.
void SetJobSettings(const LaunchOptions& options, const StoreInfo& store,
                    std::vector<std::string>* env) {
  for (const auto& [name, value] : JobSettings(options, store))
    SetEnv(env, name, value);
}

}  // namespace

void SetEnv(std::vector<std::string>* env, const std::string& name,
            const std::string& value) {
  std::string entry = name + "=" + value;
  for (std::string& var : *env) {
    if (HasName(var, name)) {
      var = std::move(entry);
      return;
    }
  }
  env->push_back(std::move(entry));
}

void UnsetEnv(std::vector<std::string>* env, const std::string& name) {
  env->erase(std::remove_if(
                 env->begin(), env->end(),
                 [&](const std::string& var) { return HasName(var, name); }),
             env->end());
}

std::vector<int> UsableCores() {
  std::vector<int> cores;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cores.push_back(cpu);
  }
  return cores;
}

std::vector<std::vector<int>> CoreBlocks(const std::vector<int>& usable_cores,
                                         int32_t ranks, BindTo bind_to) {
  std::vector<std::vector<int>> blocks(static_cast<size_t>(std::max(ranks, 0)));
  const int32_t cores = static_cast<int32_t>(usable_cores.size());
  if (bind_to == BindTo::kNone || ranks <= 0 || ranks > cores) return blocks;
  const int32_t per_rank = cores / ranks;
  for (int32_t rank = 0; rank < ranks; ++rank) {
    blocks[rank].assign(usable_cores.begin() + rank * per_rank,
                        usable_cores.begin() + (rank + 1) * per_rank);
  }
  return blocks;
}

StatusOr<HostedStore> StartJobStore(const std::string& host,
                                    const std::string& secret) {
  StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(host, 0, secret);
  if (!server.ok()) {
    return server.status().WithContext("cannot start the store on " + host);
  }
  HostedStore store;
  store.server = std::move(server).value();
  store.info.address = host + ":" + std::to_string(store.server->port());
  store.info.secret = secret;
  return store;
}

EnvList JobSettings(const LaunchOptions& options, const StoreInfo& store) {
  EnvList settings = {
      {env::kStoreAddr, store.address},
      {env::kStoreSecret, store.secret},
      {env::kStoreHosted, "1"},
      {env::kBackend, BackendName(options.backend)},
      {env::kTimeoutSeconds, std::to_string(options.timeout_seconds)},
  };
  if (!options.timeline_path.empty())
    settings.emplace_back(env::kTimeline, options.timeline_path);
  if (options.servers > 0)
    settings.emplace_back(env::kServers, std::to_string(options.servers));
  settings.insert(settings.end(), options.env.begin(), options.env.end());
  return settings;
}

std::vector<ProcessSpec> BuildHostRanks(
    const HostRanks& ranks, const std::string& program_path,
    const std::vector<std::string>& command, const EnvList& settings,
    const std::vector<std::string>& base_env,
    const std::vector<std::vector<int>>& core_blocks) {
  std::vector<ProcessSpec> specs;
  const std::string where = ranks.host.empty() ? "" : " on " + ranks.host;
  for (int32_t local = 0; local < ranks.local_size; ++local) {
    const std::string rank_text = std::to_string(ranks.first_rank + local);
    ProcessSpec spec;
    spec.name = "rank " + rank_text + where;
    spec.child.path = program_path;
    spec.child.argv = command;
    spec.child.env = base_env;
    if (static_cast<size_t>(local) < core_blocks.size())
      spec.child.cores = core_blocks[local];
    std::vector<std::string>& env = spec.child.env;
    SetEnv(&env, env::kRank, rank_text);
    SetEnv(&env, env::kSize, std::to_string(ranks.size));
    SetEnv(&env, env::kLocalRank, std::to_string(local));
    SetEnv(&env, env::kLocalSize, std::to_string(ranks.local_size));
    SetEnv(&env, env::kCrossRank, std::to_string(ranks.cross_rank));
    SetEnv(&env, env::kCrossSize, std::to_string(ranks.cross_size));
    for (const auto& [name, value] : settings) {
      SetEnv(&env, name, value);
      // --servers K: the last K ranks of the world serve.
      if (name == env::kServers) {
        const bool server =
            ranks.first_rank + local >= ranks.size - std::stoi(value);
        SetEnv(&env, env::kRole, server ? "server" : "worker");
      }
    }
    spec.format = LineFormat::kPrefix;
    spec.stdout_prefix = "[" + rank_text + "]<stdout>: ";
    spec.stderr_prefix = "[" + rank_text + "]<stderr>: ";
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<ProcessSpec> BuildRankJob(const LaunchOptions& options,
                                      const std::string& program_path,
                                      const StoreInfo& store,
                                      const std::vector<std::string>& base_env,
                                      const std::vector<int>& usable_cores) {
  HostRanks ranks;
  ranks.local_size = options.num_ranks;
  ranks.size = options.num_ranks;
  return BuildHostRanks(
      ranks, program_path, options.command, JobSettings(options, store),
      base_env, CoreBlocks(usable_cores, options.num_ranks, options.bind_to));
}

ProcessSpec BuildMpiJob(const LaunchOptions& options,
                        const std::string& mpirun_path, bool as_root,
                        const StoreInfo& store,
                        const std::vector<std::string>& base_env) {
  ProcessSpec spec;
  spec.name = "mpirun";
  spec.child.path = mpirun_path;
  spec.child.env = base_env;
  // mpirun's ranks inherit its environment, and a stale KOLO_RANK (from a
  // kolorun this one runs inside) would take precedence over mpirun's own
  // OMPI_COMM_WORLD_* in every rank.
  for (const char* name : {env::kRank, env::kSize, env::kLocalRank,
                           env::kLocalSize, env::kCrossRank, env::kCrossSize}) {
    UnsetEnv(&spec.child.env, name);
  }
  SetJobSettings(options, store, &spec.child.env);

  std::vector<std::string>& argv = spec.child.argv;
  argv.push_back("mpirun");
  if (as_root) argv.push_back("--allow-run-as-root");
  // kolorun, like horovodrun, lets -np exceed the cores (it says so once).
  argv.push_back("--oversubscribe");
  argv.push_back("--tag-output");
  argv.push_back("-np");
  argv.push_back(std::to_string(options.num_ranks));
  for (const char* name :
       {env::kStoreAddr, env::kStoreSecret, env::kStoreHosted, env::kBackend,
        env::kTimeoutSeconds}) {
    argv.push_back("-x");
    argv.push_back(name);
  }
  if (!options.timeline_path.empty()) {
    argv.push_back("-x");
    argv.push_back(env::kTimeline);
  }
  for (const auto& assignment : options.env) {
    argv.push_back("-x");
    argv.push_back(assignment.first);
  }
  // Shared memory within the host, TCP otherwise; never the InfiniBand
  // probing that fails noisily on hosts without it.
  argv.push_back("--mca");
  argv.push_back("btl");
  argv.push_back("self,vader,tcp");
  argv.insert(argv.end(), options.mpi_args.begin(), options.mpi_args.end());
  argv.insert(argv.end(), options.command.begin(), options.command.end());

  spec.format = LineFormat::kMpiTagged;
  return spec;
}

}  // namespace kolorun
}  // namespace kolo
