// Finding the store without KOLO_STORE_ADDR. A job started by mpirun, srun
// or another PMI launcher already has a channel between its ranks: MPI's
// own bootstrap. When such a job runs a non-MPI engine (shm, gloo, tcp) and
// nobody said where the store is, rank 0 hosts it on an address of its own
// and tells the others the address and a fresh secret with one broadcast
// over MPI_COMM_WORLD; the launcher's channel is as trusted as the
// launcher. This file's .cc, mpi_backend.cc and mpi_peer_link.cc are the
// only ones that touch MPI, and they start it through StartMpi.
#ifndef KOLO_COLLECTIVES_MPI_MPI_BOOTSTRAP_H_
#define KOLO_COLLECTIVES_MPI_MPI_BOOTSTRAP_H_

#include <string>

#include "kolo/status.h"

namespace kolo {

// Every rank returns rank 0's `payload` (ignored elsewhere). Starts MPI if
// it has not started. kInvalidArgument naming the CMake option when kolo
// was built without MPI.
StatusOr<std::string> BroadcastFromRankZeroOverMpi(const std::string& payload);

// Starts MPI (asking for MPI_THREAD_MULTIPLE) unless someone has, and
// returns the thread level it runs at. MPI starts once per process and
// cannot start again after it ends, so kolo::Shutdown() leaves it running
// (a later kolo::Init() reuses it) and it ends when the process does.
// Defined only where kolo is built with MPI.
StatusOr<int> StartMpi();

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_MPI_BOOTSTRAP_H_
