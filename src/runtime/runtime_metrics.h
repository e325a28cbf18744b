// The runtime's Prometheus series (kolo/metrics.h), one object per runtime
// (and per direct path), all of whose handles are registered when it is
// built, so that the background loop only adds to atomics.
//
//   kolo_operations_total{op}             tensors completed, by collective
//   kolo_operation_bytes_total{op}        their bytes on this rank
//   kolo_operation_errors_total           tensors completed with an error
//   kolo_engine_calls_total{op,engine}    engine calls that moved data
//   kolo_engine_bytes_total{op,engine}    bytes handed to those calls
//   kolo_engine_call_seconds{op,engine}   time inside them (histogram)
//   kolo_fusion_batches_total             engine calls carrying >1 tensor
//   kolo_fused_tensors_total              tensors carried by those calls
//   kolo_negotiation_seconds              one readiness exchange (histogram)
//   kolo_wait_for_others_seconds          a tensor announced here, until
//                                         every rank had announced it
//   kolo_response_cache_hits_total, kolo_response_cache_misses_total
//   kolo_stall_warnings_total
//
// Peer failures (kolo_peer_failures_total) are counted where they are
// explained (collectives/peer_failure.cc), elastic resets
// (kolo_elastic_resets_total) by the elastic worker, and kolo_info by
// Init().
//
// Thread-safety: any thread (the handles are atomics).
#ifndef KOLO_RUNTIME_RUNTIME_METRICS_H_
#define KOLO_RUNTIME_RUNTIME_METRICS_H_

#include <array>
#include <cstdint>
#include <string>

#include "collectives/collective.h"
#include "kolo/metrics.h"

namespace kolo {

class RuntimeMetrics {
 public:
  // `engine`: "shm", "gloo", "mpi", "tcp" or "hierarchical".
  explicit RuntimeMetrics(const std::string& engine);

  void EngineCall(Collective collective, int64_t bytes, double seconds,
                  int64_t tensors) const;
  void Completed(Collective collective, int64_t bytes, bool ok) const;
  void Negotiated(double seconds) const { negotiation_.Observe(seconds); }
  void WaitedForOthers(double seconds) const {
    wait_for_others_.Observe(seconds);
  }
  void CacheLookups(int64_t hits, int64_t misses) const;
  void StallWarning() const { stall_warnings_.Increment(); }

 private:
  static constexpr int kCollectives =
      static_cast<int>(Collective::kBarrier) + 1;
  struct PerCollective {
    metrics::Counter operations;
    metrics::Counter operation_bytes;
    metrics::Counter engine_calls;
    metrics::Counter engine_bytes;
    metrics::Histogram engine_seconds;
  };
  std::array<PerCollective, kCollectives> by_collective_;
  metrics::Counter errors_;
  metrics::Counter fusion_batches_;
  metrics::Counter fused_tensors_;
  metrics::Histogram negotiation_;
  metrics::Histogram wait_for_others_;
  metrics::Counter cache_hits_;
  metrics::Counter cache_misses_;
  metrics::Counter stall_warnings_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_RUNTIME_METRICS_H_
