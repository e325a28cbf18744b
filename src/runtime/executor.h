// Executor: runs one fusion batch on the engine and fills the operations'
// outputs. It is the only runtime stage that moves tensor data.
//
// A fused allreduce copies each tensor into the fusion buffer, reduces the
// buffer in place with one engine call, divides once for an average (by the
// ranks that contributed, which excludes joined ranks), and copies the
// results out. A joined rank takes part with zeros of the announced size.
// The other collectives run one engine call each.
//
// Thread-safety: none; owned by the runtime's thread.
#ifndef KOLO_RUNTIME_EXECUTOR_H_
#define KOLO_RUNTIME_EXECUTOR_H_

#include <memory>
#include <vector>

#include "collectives/backend.h"
#include "kolo/kolo.h"
#include "kolo/runtime.h"
#include "runtime/coordinator.h"
#include "runtime/handle_state.h"
#include "runtime/runtime_metrics.h"
#include "runtime/timeline.h"

namespace kolo {

// This rank's side of one operation: its buffers and the handle to fill.
struct LocalOperation {
  TensorSpec spec;
  const void* send = nullptr;
  void* recv = nullptr;
  std::shared_ptr<internal::HandleState> handle;
  SteadyTime enqueued;
  SteadyTime announced;
};

class Executor {
 public:
  // `backend` may be null in a one-rank world; `timeline` and `metrics`
  // may be null.
  Executor(const WorldInfo& world, Backend* backend, Timeline* timeline,
           RuntimeStats* stats, const RuntimeMetrics* metrics = nullptr);

  // The timeline from now on (null: none); the runtime's thread swaps it
  // between batches.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

  // Runs `operations` (one batch, all ready on every rank); locals[i] is
  // this rank's side of operations[i], null when this rank has joined.
  // An error means the engine failed and the job cannot go on.
  Status Run(const std::vector<const ReadyOperation*>& operations,
             const std::vector<LocalOperation*>& locals);

 private:
  Status RunAllreduce(const std::vector<const ReadyOperation*>& operations,
                      const std::vector<LocalOperation*>& locals);
  Status RunOne(const ReadyOperation& operation, LocalOperation* local);
  // Times one engine call into the statistics and the timeline.
  Status Engine(const std::vector<const ReadyOperation*>& operations,
                const std::function<Status()>& call);
  void Phase(const std::vector<const ReadyOperation*>& operations,
             const char* phase, bool begin);

  const WorldInfo world_;
  Backend* const backend_;
  Timeline* timeline_;
  RuntimeStats* const stats_;
  const RuntimeMetrics* const metrics_;
  std::vector<char> fusion_buffer_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_EXECUTOR_H_
