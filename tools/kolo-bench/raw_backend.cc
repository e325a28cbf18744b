#include "raw_backend.h"

#include <fmt/format.h>

#include <utility>

#include "kolo_internal/config.h"
#include "kolo_internal/store.h"

namespace kolo::bench {

StatusOr<std::unique_ptr<Backend>> CreateRawMpiBackend() {
  KOLO_ASSIGN_OR_RETURN(InitOptions config, InitOptions::FromEnvironment());
  const std::string& launcher = config.world.launcher;
  // kolorun's own ranks, or a lone process, are no MPI world: MPI_Init
  // would make each a world of one (or fail looking for a launcher).
  if (launcher == "kolorun" || launcher == "none") {
    const std::string started_by =
        launcher == "kolorun"
            ? fmt::format("kolorun started this rank itself ({} is set)",
                          env::kRank)
            : std::string("this process was started without a launcher");
    return InvalidArgument(fmt::format(
        "an MPI engine needs ranks started by mpirun, but {}: run `kolorun "
        "-np N --launcher mpirun [--backend shm|gloo|mpi] kolo-bench ...`, "
        "or mpirun itself",
        started_by));
  }
  BackendOptions options;
  options.world = config.world.ranks;
  options.timeout = config.engine.timeout;
  EnginePlan plan;
  plan.backend = BackendKind::kMpi;
  return CreateBackend(plan, options, nullptr, nullptr);
}

StatusOr<std::unique_ptr<Backend>> CreateRawStoreBackend(
    BackendKind kind, const std::string& store_prefix) {
  if (kind != BackendKind::kGloo && kind != BackendKind::kShm &&
      kind != BackendKind::kTcp) {
    return InvalidArgument(fmt::format(
        "a {} engine does not rendezvous through the store (tcp, gloo or shm "
        "do)",
        BackendName(kind)));
  }
  KOLO_ASSIGN_OR_RETURN(InitOptions config, InitOptions::FromEnvironment());
  if (config.store.host.empty()) {
    return InvalidArgument(fmt::format(
        "a {} engine needs the job's rendezvous store, and {} is not set: "
        "start the job with kolorun (any --launcher), or set {}=host:port "
        "for rank 0 to host it",
        BackendName(kind), env::kStoreAddr, env::kStoreAddr));
  }
  StatusOr<std::unique_ptr<TcpStoreClient>> store = TcpStoreClient::Connect(
      config.store.host, config.store.port, config.store.secret, Rank(),
      config.engine.timeout);
  if (!store.ok()) {
    return store.status().WithContext(
        fmt::format("connecting to the store at {}:{} ({})", config.store.host,
                    config.store.port, env::kStoreAddr));
  }
  std::shared_ptr<TcpStoreClient> shared_store(std::move(store).value());
  BackendOptions options;
  options.world = World();
  options.timeout = config.engine.timeout;
  options.gloo_hostname = config.engine.gloo_hostname;
  options.job_secret = config.store.secret;
  options.store_prefix = store_prefix;
  options.shm_area_bytes = config.engine.shm_area_bytes;
  EnginePlan plan;
  plan.backend = kind;
  StatusOr<std::unique_ptr<Backend>> backend =
      CreateBackend(plan, options, shared_store, nullptr);
  // The rendezvous is over either way. A goodbye keeps the store from
  // counting this rank as failed.
  (void)shared_store->Close();
  if (!backend.ok()) {
    return backend.status().WithContext(
        fmt::format("creating a {} backend", BackendName(kind)));
  }
  return backend;
}

}  // namespace kolo::bench
