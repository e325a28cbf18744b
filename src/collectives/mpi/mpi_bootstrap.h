// Finding the store without KOLO_STORE_ADDR. A job started by mpirun, srun
// or another PMI launcher already has a channel between its ranks: MPI's
// own bootstrap. When such a job runs a non-MPI engine (shm, gloo, tcp) and
// nobody said where the store is, rank 0 hosts it on an address of its own
// and tells the others the address and a fresh secret with one broadcast
// over MPI_COMM_WORLD; the launcher's channel is as trusted as the
// launcher. Only this file's .cc and mpi_backend.cc touch MPI.
#ifndef KOLO_COLLECTIVES_MPI_MPI_BOOTSTRAP_H_
#define KOLO_COLLECTIVES_MPI_MPI_BOOTSTRAP_H_

#include <string>

#include "kolo/status.h"

namespace kolo {

// Every rank returns rank 0's `payload` (ignored elsewhere). Starts MPI if
// it has not started. kInvalidArgument naming the CMake option when kolo
// was built without MPI.
StatusOr<std::string> BroadcastFromRankZeroOverMpi(const std::string& payload);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_MPI_BOOTSTRAP_H_
