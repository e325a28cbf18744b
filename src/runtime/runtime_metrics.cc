#include "runtime/runtime_metrics.h"

#include "collectives/peer_failure.h"
#include "metrics/process_arena.h"

namespace kolo {

using metrics::KoloCounter;
using metrics::KoloHistogram;

RuntimeMetrics::RuntimeMetrics(const std::string& engine)
    : errors_(KoloCounter("kolo_operation_errors_total",
                          "Tensors whose operation completed with an error.")),
      fusion_batches_(KoloCounter(
          "kolo_fusion_batches_total",
          "Engine calls that carried more than one tensor (fused).")),
      fused_tensors_(KoloCounter("kolo_fused_tensors_total",
                                 "Tensors carried by fused engine calls.")),
      negotiation_(
          KoloHistogram("kolo_negotiation_seconds",
                        "One readiness exchange between the ranks' runtimes.")),
      wait_for_others_(KoloHistogram(
          "kolo_wait_for_others_seconds",
          "From this rank announcing a tensor until every rank had.")),
      cache_hits_(KoloCounter("kolo_response_cache_hits_total",
                              "Tensors announced by a response-cache bit.")),
      cache_misses_(KoloCounter("kolo_response_cache_misses_total",
                                "Tensors announced in full.")),
      stall_warnings_(KoloCounter(
          "kolo_stall_warnings_total",
          "Warnings that some rank has not called an operation others "
          "wait on.")) {
  for (int c = static_cast<int>(Collective::kAllreduce); c < kCollectives;
       ++c) {
    const std::string op = CollectiveName(static_cast<Collective>(c));
    PerCollective& per = by_collective_[c];
    per.operations =
        KoloCounter("kolo_operations_total",
                    "Tensors whose operation completed.", {{"op", op}});
    per.operation_bytes =
        KoloCounter("kolo_operation_bytes_total",
                    "Bytes of completed tensors on this rank.", {{"op", op}});
    per.engine_calls = KoloCounter("kolo_engine_calls_total",
                                   "Engine calls that moved tensor data.",
                                   {{"op", op}, {"engine", engine}});
    per.engine_bytes = KoloCounter("kolo_engine_bytes_total",
                                   "Bytes this rank handed to engine calls.",
                                   {{"op", op}, {"engine", engine}});
    per.engine_seconds = KoloHistogram("kolo_engine_call_seconds",
                                       "Time inside one engine call.",
                                       {{"op", op}, {"engine", engine}});
  }
  // Present from the start, so that a dashboard shows a healthy job's zero
  // rather than no data.
  PeerFailuresCounter();
}

void RuntimeMetrics::EngineCall(Collective collective, int64_t bytes,
                                double seconds, int64_t tensors) const {
  const PerCollective& per = by_collective_[static_cast<int>(collective)];
  per.engine_calls.Increment();
  per.engine_bytes.Increment(static_cast<double>(bytes));
  per.engine_seconds.Observe(seconds);
  if (tensors > 1) {
    fusion_batches_.Increment();
    fused_tensors_.Increment(static_cast<double>(tensors));
  }
}

void RuntimeMetrics::Completed(Collective collective, int64_t bytes,
                               bool ok) const {
  if (!ok) {
    errors_.Increment();
    return;
  }
  const PerCollective& per = by_collective_[static_cast<int>(collective)];
  per.operations.Increment();
  per.operation_bytes.Increment(static_cast<double>(bytes));
}

void RuntimeMetrics::CacheLookups(int64_t hits, int64_t misses) const {
  cache_hits_.Increment(static_cast<double>(hits));
  cache_misses_.Increment(static_cast<double>(misses));
}

}  // namespace kolo
