// Raw engines: kolo's backends built by the bench itself, beside the
// runtime rather than inside it, so that a benchmark can time an engine call
// with no negotiation, fusion or completion around it. fusion's raw mode and
// collectives' --peer run on them.
//
// When each can be built:
//  - MPI: before the first kolo::Init(). MPI starts once per process and
//    stays up until it exits; starting it here, with the thread level the
//    runtime also asks for, makes the bench's MPI world independent of the
//    engine kolo's runtime runs on. It needs ranks started by mpirun (or
//    another MPI launcher): CreateRawMpiBackend refuses ranks that kolorun
//    started itself, naming how to start them instead.
//  - tcp, Gloo and shm: while kolo is initialized, since they rendezvous
//    through the job's store, which rank 0 hosts inside kolo::Init() when
//    kolorun does not host it. Each needs its own store prefix.
//
// Thread-safety: call from the thread that calls kolo::Init().
#ifndef KOLO_TOOLS_KOLO_BENCH_RAW_BACKEND_H_
#define KOLO_TOOLS_KOLO_BENCH_RAW_BACKEND_H_

#include <memory>
#include <string>

#include "kolo/kolo.h"
#include "kolo_internal/backend.h"

namespace kolo::bench {

// An MPI backend over MPI_COMM_WORLD. kInvalidArgument when the process was
// not started by an MPI launcher or MPI was not compiled in.
StatusOr<std::unique_ptr<Backend>> CreateRawMpiBackend();

// A tcp, gloo or shm backend over this job's world; kolo must be
// initialized. Rendezvous keys go under `store_prefix`, which must be the
// same on every rank and differ from every other backend's of the job.
StatusOr<std::unique_ptr<Backend>> CreateRawStoreBackend(
    BackendKind kind, const std::string& store_prefix);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_RAW_BACKEND_H_
