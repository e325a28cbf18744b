// Turns kolorun's options into the processes to start.
//
// --launcher kolorun (shm and gloo by default): one process per rank, each
// told its place in the job through KOLO_RANK, KOLO_SIZE, KOLO_LOCAL_*,
// KOLO_CROSS_* (one host: local = global, cross = 0 of 1) and where the store
// kolorun hosts is.
//
// --launcher mpirun (always for mpi): one mpirun, as horovodrun does it. The
// ranks learn their place from mpirun's OMPI_COMM_WORLD_* variables; kolorun
// only exports the store and the settings, KOLO_BACKEND among them (so the
// runtime may run shm or gloo in an MPI world), with -x, and asks for tagged
// output, which it rewrites into its own tags.
#ifndef KOLO_TOOLS_KOLORUN_JOB_H_
#define KOLO_TOOLS_KOLORUN_JOB_H_

#include <memory>
#include <string>
#include <vector>

#include "kolo_internal/store.h"
#include "launcher.h"
#include "options.h"

namespace kolo {
namespace kolorun {

// What every process of a job needs to know about the store kolorun hosts.
struct StoreInfo {
  std::string address;  // "127.0.0.1:40123"
  std::string secret;
};

// The store a kolorun hosts for its job, and what its workers are told.
struct HostedStore {
  std::unique_ptr<TcpStoreServer> server;
  StoreInfo info;
};

// Starts a job's store on `host`, on a port the OS chooses, with `secret`
// (a fresh one per job, so that one job's workers cannot join another's
// store). The error names the address.
StatusOr<HostedStore> StartJobStore(const std::string& host,
                                    const std::string& secret);

// The CPUs this process may run on, ascending (a cpuset or taskset may
// allow fewer than the machine has); empty when the kernel does not say.
std::vector<int> UsableCores();

// The cores each of `ranks` ranks is bound to, given the cores this process
// may use: with --bind-to core and at least as many cores as ranks, rank r
// gets the r-th of `ranks` equal blocks (cores / ranks each; leftovers stay
// unused), so no rank's threads migrate onto a neighbour's core. A rank's
// helper threads (its runtime, its data loader) then share its own cores
// instead of interrupting another rank's compute, and every rank sees the
// same interference, so the ranks run in step. With more ranks than cores,
// or --bind-to none, every rank gets an empty list: no binding.
std::vector<std::vector<int>> CoreBlocks(const std::vector<int>& usable_cores,
                                         int32_t ranks, BindTo bind_to);

// The variables as (name, value), in the order they are set; a later one
// overrides an earlier one of the same name.
using EnvList = std::vector<std::pair<std::string, std::string>>;

// Where one host's ranks sit in the job: ranks first_rank to
// first_rank + local_size - 1 of `size`.
struct HostRanks {
  std::string host;  // as the host list names it; empty for a one-host job
  int32_t first_rank = 0;
  int32_t local_size = 0;
  int32_t size = 0;
  int32_t cross_rank = 0;
  int32_t cross_size = 1;
};

// What every rank of the job is told besides its place: where the store
// is, its secret, the backend, the timeout and the timeline, then the
// user's --env and -x (which win).
EnvList JobSettings(const LaunchOptions& options, const StoreInfo& store);

// One process per rank of `ranks`: `program_path` with `command`'s
// arguments, the environment `base_env` plus the rank's place, then
// `settings`. `core_blocks` (CoreBlocks) has one entry per local rank. On a
// host of a multi-host job the messages name the host: "rank 5 on h2".
std::vector<ProcessSpec> BuildHostRanks(
    const HostRanks& ranks, const std::string& program_path,
    const std::vector<std::string>& command, const EnvList& settings,
    const std::vector<std::string>& base_env,
    const std::vector<std::vector<int>>& core_blocks);

// `program_path` is options.command[0] resolved by FindExecutable;
// `base_env` is kolorun's own environment ("K=V").
// `usable_cores` are the CPUs kolorun may run on; each rank is bound to its
// block of them (CoreBlocks).
std::vector<ProcessSpec> BuildRankJob(
    const LaunchOptions& options, const std::string& program_path,
    const StoreInfo& store, const std::vector<std::string>& base_env,
    const std::vector<int>& usable_cores = {});

// `mpirun_path` is mpirun resolved by FindExecutable; `as_root` adds
// --allow-run-as-root, without which mpirun refuses to start as root.
ProcessSpec BuildMpiJob(const LaunchOptions& options,
                        const std::string& mpirun_path, bool as_root,
                        const StoreInfo& store,
                        const std::vector<std::string>& base_env);

// Sets `name`=`value` in `env`, replacing an earlier value.
void SetEnv(std::vector<std::string>* env, const std::string& name,
            const std::string& value);
// Removes `name` from `env`.
void UnsetEnv(std::vector<std::string>* env, const std::string& name);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_JOB_H_
