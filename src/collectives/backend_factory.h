// The one place that turns a job's engine settings into a Backend: which
// engine a job runs on (EnginePlan), and building it. kolo::Init and
// kolo-bench's raw engines both come through here, so a new engine is
// added in one switch.
#ifndef KOLO_COLLECTIVES_BACKEND_FACTORY_H_
#define KOLO_COLLECTIVES_BACKEND_FACTORY_H_

#include <memory>
#include <optional>

#include "collectives/backend.h"
#include "collectives/topology.h"
#include "kolo/options.h"
#include "store/store.h"

namespace kolo {

// What a job runs on once the hosts are known.
struct EnginePlan {
  // The flat engine, or the network engine between hosts when
  // hierarchical. A job asked to run on shm that spans hosts runs on kolo's
  // TCP engine between them (Gloo only when asked for by name: its small
  // collectives cost milliseconds, tcp/tcp_backend.cc says why).
  BackendKind backend = BackendKind::kGloo;
  // Allreduce in three stages: shm inside each host, `backend` between one
  // leader per host.
  bool hierarchical = false;
  // Several hosts: shared memory reaches only part of the job.
  bool spans_hosts = false;
};

// `topology` is null where the job has no store (MPI alone): the
// launcher's description then stands and the job is taken as one host.
EnginePlan PlanEngine(const EngineConfig& engine, const HostTopology* topology);

// Builds the engine `plan` names for `options.world`; null for a world of
// one rank (nothing to move). `store` carries the rendezvous of tcp, gloo,
// shm and hierarchical engines under options.store_prefix; `topology` is
// needed when plan.hierarchical. An engine that was not built is an
// InvalidArgument naming its CMake option.
StatusOr<std::unique_ptr<Backend>> CreateBackend(const EnginePlan& plan,
                                                 const BackendOptions& options,
                                                 std::shared_ptr<Store> store,
                                                 const HostTopology* topology);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_BACKEND_FACTORY_H_
