#include "collectives/backend_factory.h"

#include <utility>

#include "collectives/peer_links.h"
#include "transport/peer_link.h"

namespace kolo {

// Engines left out of the build still link: their factories say which
// CMake option builds them.
#ifndef KOLO_WITH_MPI
StatusOr<std::unique_ptr<Backend>> CreateMpiBackend(const BackendOptions&) {
  return InvalidArgument(
      "backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
}
StatusOr<std::unique_ptr<Backend>> CreateMpiSubBackend(const BackendOptions&,
                                                       bool) {
  return InvalidArgument(
      "backend 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
}
StatusOr<std::unique_ptr<PeerLink>> CreateMpiPeerLink(const PeerLinkOptions&) {
  return InvalidArgument(
      "peer link 'mpi' was not built (configure with -DKOLO_WITH_MPI=ON)");
}
#endif
#ifndef KOLO_WITH_GLOO
StatusOr<std::unique_ptr<Backend>> CreateGlooBackend(const BackendOptions&,
                                                     std::shared_ptr<Store>) {
  return InvalidArgument(
      "backend 'gloo' was not built (configure with -DKOLO_WITH_GLOO=ON)");
}
StatusOr<std::unique_ptr<PeerLink>> CreateGlooPeerLink(const PeerLinkOptions&,
                                                       std::shared_ptr<Store>) {
  return InvalidArgument(
      "peer link 'gloo' was not built (configure with -DKOLO_WITH_GLOO=ON)");
}
#endif

EnginePlan PlanEngine(const EngineConfig& engine,
                      const HostTopology* topology) {
  EnginePlan plan;
  plan.backend = engine.backend;
  plan.spans_hosts = topology != nullptr && topology->HostCount() > 1;
  if (!plan.spans_hosts) return plan;
  plan.hierarchical =
      engine.hierarchical_allreduce.value_or(topology->LargestHost() > 1);
  if (plan.backend == BackendKind::kShm) plan.backend = BackendKind::kTcp;
  return plan;
}

StatusOr<std::unique_ptr<Backend>> CreateBackend(const EnginePlan& plan,
                                                 const BackendOptions& options,
                                                 std::shared_ptr<Store> store,
                                                 const HostTopology* topology) {
  if (plan.hierarchical) {
    if (topology == nullptr)
      return InvalidArgument("hierarchical allreduce needs the host table");
    return CreateHierarchicalBackend(options, std::move(store), *topology,
                                     plan.backend);
  }
  if (plan.backend == BackendKind::kMpi) return CreateMpiBackend(options);
  if (options.world.size == 1) return std::unique_ptr<Backend>();
  switch (plan.backend) {
    case BackendKind::kShm: return CreateShmBackend(options, std::move(store));
    case BackendKind::kTcp: return CreateTcpBackend(options, std::move(store));
    default: return CreateGlooBackend(options, std::move(store));
  }
}

}  // namespace kolo
