#include "collectives/peer_failure.h"

#include <chrono>

#include "metrics/process_arena.h"
#include "store/tcp_store.h"

namespace kolo {
namespace {

// How long a survivor waits for the store to learn which peer died; the
// store hears of it when the dead process's socket closes, a moment after
// the engine's own error.
constexpr std::chrono::seconds kFailureNewsWait{3};

}  // namespace

const metrics::Counter& PeerFailuresCounter() {
  static const metrics::Counter failures = metrics::KoloCounter(
      "kolo_peer_failures_total",
      "Operations that failed because another rank died, left or stopped "
      "answering.");
  return failures;
}

Status ExplainPeerFailure(const Status& status, Store* store,
                          const std::string& context) {
  std::string culprit;
  const bool lost_peer = status.code() == StatusCode::kPeerFailure ||
                         status.code() == StatusCode::kTimeout;
  if (lost_peer) PeerFailuresCounter().Increment();
  if (store != nullptr && lost_peer) {
    StatusOr<std::string> failed =
        store->Get(kFailedRanksKey, kFailureNewsWait);
    if (failed.ok()) {
      // The first rank to leave is the likely cause; the others usually
      // left because of it.
      const size_t comma = failed->find(',');
      culprit = "rank " + failed->substr(0, comma) +
                " is gone (process exited or lost its connection)";
      if (comma != std::string::npos)
        culprit += ", then ranks " + failed->substr(comma + 1);
      culprit += "; ";
    } else if (failed.status().code() != StatusCode::kTimeout) {
      culprit = "the rendezvous store is unreachable as well (" +
                failed.status().message() + "); ";
    }
  }
  return Status(status.code(), context + ": " + culprit + status.message());
}

}  // namespace kolo
