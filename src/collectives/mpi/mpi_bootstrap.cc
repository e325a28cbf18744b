#include "collectives/mpi/mpi_bootstrap.h"

#include <cstdint>
#include <cstdlib>

#ifdef KOLO_WITH_MPI
#include <mpi.h>
#endif

namespace kolo {

#ifdef KOLO_WITH_MPI

StatusOr<int> StartMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
    return provided;
  }
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) !=
      MPI_SUCCESS) {
    return Internal("MPI_Init_thread failed");
  }
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  return provided;
}

StatusOr<std::string> BroadcastFromRankZeroOverMpi(const std::string& payload) {
  Status started = StartMpi().status();
  if (!started.ok()) {
    return started.WithContext("looking for the store's address");
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // The length first, so that the text may be any size.
  int64_t length = rank == 0 ? static_cast<int64_t>(payload.size()) : 0;
  if (MPI_Bcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return PeerFailure("MPI_Bcast of the store's address failed");
  }
  std::string text = rank == 0 ? payload : std::string(length, '\0');
  if (MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0,
                MPI_COMM_WORLD) != MPI_SUCCESS) {
    return PeerFailure("MPI_Bcast of the store's address failed");
  }
  return text;
}

#else

StatusOr<std::string> BroadcastFromRankZeroOverMpi(const std::string&) {
  return InvalidArgument(
      "finding rank 0's store without KOLO_STORE_ADDR needs MPI, which was "
      "not built (configure with -DKOLO_WITH_MPI=ON), or set KOLO_STORE_ADDR");
}

#endif

}  // namespace kolo
