// The engines' PeerLinks (transport/peer_link.h), each beside its engine:
// collectives/shm/shm_peer_link.cc, tcp/tcp_peer_link.cc,
// gloo/gloo_peer_link.cc, mpi/mpi_peer_link.cc. An engine's link speaks
// its engine's way (shm rings, tcp streams, a Gloo context, an MPI
// communicator), so it lives where the engine does; the shared memory and
// sockets underneath stay in transport/ (shm_segments.h, futex.h,
// tcp_streams.h). CreatePeerLinkFor (collectives/point_to_point.h) picks
// one for a job.
#ifndef KOLO_COLLECTIVES_PEER_LINKS_H_
#define KOLO_COLLECTIVES_PEER_LINKS_H_

#include <memory>

#include "kolo/status.h"
#include "store/store.h"
#include "transport/peer_link.h"

namespace kolo {

// Each is collective over the ranks of `options`; `store` carries the
// rendezvous under keys the caller has already prefixed for this link.
StatusOr<std::unique_ptr<PeerLink>> CreateShmPeerLink(
    const PeerLinkOptions& options, Store* store);
StatusOr<std::unique_ptr<PeerLink>> CreateTcpPeerLink(
    const PeerLinkOptions& options, Store* store);
// InvalidArgument naming KOLO_WITH_GLOO / KOLO_WITH_MPI when not built.
StatusOr<std::unique_ptr<PeerLink>> CreateGlooPeerLink(
    const PeerLinkOptions& options, std::shared_ptr<Store> store);
// Over MPI_COMM_WORLD, whose ranks must be the link's ranks.
StatusOr<std::unique_ptr<PeerLink>> CreateMpiPeerLink(
    const PeerLinkOptions& options);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_PEER_LINKS_H_
