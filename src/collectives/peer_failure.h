// Naming the dead rank. Engines report a lost peer as a socket error or a
// timeout, by address at best. The store server knows better: each rank
// holds one connection to it, and a connection that closes without a
// goodbye is recorded under kFailedRanksKey. ExplainPeerFailure reads that
// key (waiting briefly: the news may trail the engine's error by a few
// milliseconds) and puts the rank in the error.
#ifndef KOLO_COLLECTIVES_PEER_FAILURE_H_
#define KOLO_COLLECTIVES_PEER_FAILURE_H_

#include <string>

#include "kolo/metrics.h"
#include "kolo/status.h"
#include "store/store.h"

namespace kolo {

// Returns `status` with `context` in front and, for a lost peer, the rank
// the store saw leave first (and any that left after it). `store` may be
// null.
// kolo_peer_failures_total, which ExplainPeerFailure counts for each lost
// peer it explains.
const metrics::Counter& PeerFailuresCounter();

Status ExplainPeerFailure(const Status& status, Store* store,
                          const std::string& context);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_PEER_FAILURE_H_
