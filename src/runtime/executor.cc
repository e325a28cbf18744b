#include "runtime/executor.h"

#include <cstring>
#include <functional>
#include <numeric>

#include "common/reduce.h"

namespace kolo {
namespace {

int32_t Contributors(const ReadyOperation& op) {
  int32_t count = 0;
  for (bool joined : op.joined) count += joined ? 0 : 1;
  return count;
}

}  // namespace

Executor::Executor(const WorldInfo& world, Backend* backend, Timeline* timeline,
                   RuntimeStats* stats, const RuntimeMetrics* metrics)
    : world_(world),
      backend_(backend),
      timeline_(timeline),
      stats_(stats),
      metrics_(metrics) {}

void Executor::Phase(const std::vector<const ReadyOperation*>& operations,
                     const char* phase, bool begin) {
  if (timeline_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  for (const ReadyOperation* op : operations) {
    if (begin) {
      timeline_->Begin(op->name, phase, now);
    } else {
      timeline_->End(op->name, now);
    }
  }
}

Status Executor::Engine(const std::vector<const ReadyOperation*>& operations,
                        const std::function<Status()>& call) {
  Phase(operations, "COLLECTIVE", true);
  const auto start = std::chrono::steady_clock::now();
  Status status = world_.size > 1 ? call() : Status::Ok();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  stats_->collective_seconds += seconds;
  ++stats_->collectives;
  if (operations.size() > 1) ++stats_->fused_batches;
  if (metrics_ != nullptr) {
    int64_t bytes = 0;
    for (const ReadyOperation* op : operations) {
      bytes += op->specs[world_.rank].bytes();
    }
    metrics_->EngineCall(operations.front()->specs[world_.rank].collective,
                         bytes, seconds,
                         static_cast<int64_t>(operations.size()));
  }
  Phase(operations, "COLLECTIVE", false);
  return status;
}

Status Executor::Run(const std::vector<const ReadyOperation*>& operations,
                     const std::vector<LocalOperation*>& locals) {
  const TensorSpec& spec = operations.front()->specs[0];
  if (spec.collective == Collective::kAllreduce)
    return RunAllreduce(operations, locals);
  return RunOne(*operations.front(), locals.front());
}

Status Executor::RunAllreduce(
    const std::vector<const ReadyOperation*>& operations,
    const std::vector<LocalOperation*>& locals) {
  const TensorSpec& first = operations.front()->specs[0];
  const DataType type = first.type;
  const int64_t element = DataTypeSize(type);
  const int32_t contributors = Contributors(*operations.front());
  int64_t total = 0;
  for (const ReadyOperation* op : operations)
    total += op->specs[world_.rank].count;
  if (total == 0) return Status::Ok();

  // A lone tensor of this rank reduces straight between its own buffers.
  if (operations.size() == 1 && locals.front() != nullptr) {
    LocalOperation* local = locals.front();
    const bool average = first.op == ReduceOp::kAverage;
    if (world_.size == 1) {
      if (local->send != local->recv)
        std::memmove(local->recv, local->send, total * element);
      if (average) DivideInPlace(type, local->recv, total, contributors);
      return Status::Ok();
    }
    // An average lets the engine divide within its own last pass.
    return Engine(operations, [&] {
      return average ? backend_->AllreduceAndDivide(local->send, local->recv,
                                                    total, type, contributors)
                     : backend_->Allreduce(local->send, local->recv, total,
                                           type, first.op);
    });
  }

  if (static_cast<int64_t>(fusion_buffer_.size()) < total * element) {
    fusion_buffer_.resize(total * element);
  }
  Phase(operations, "COPY_IN", true);
  int64_t offset = 0;
  for (size_t i = 0; i < operations.size(); ++i) {
    const int64_t bytes = operations[i]->specs[world_.rank].count * element;
    if (bytes == 0) {
      // An empty tensor's pointer may be null, which memcpy must never see.
    } else if (locals[i] != nullptr) {
      std::memcpy(fusion_buffer_.data() + offset, locals[i]->send, bytes);
    } else {
      std::memset(fusion_buffer_.data() + offset, 0, bytes);  // joined: zeros
    }
    offset += bytes;
  }
  Phase(operations, "COPY_IN", false);
  KOLO_RETURN_IF_ERROR(Engine(operations, [&] {
    return backend_->Allreduce(fusion_buffer_.data(), fusion_buffer_.data(),
                               total, type, first.op);
  }));
  Phase(operations, "COPY_OUT", true);
  offset = 0;
  for (size_t i = 0; i < operations.size(); ++i) {
    const int64_t count = operations[i]->specs[world_.rank].count;
    if (locals[i] != nullptr && count > 0) {
      // An average divides on the way out: one pass over the data, not two.
      if (first.op == ReduceOp::kAverage) {
        DivideInto(type, locals[i]->recv, fusion_buffer_.data() + offset, count,
                   contributors);
      } else {
        std::memcpy(locals[i]->recv, fusion_buffer_.data() + offset,
                    count * element);
      }
    }
    offset += count * element;
  }
  Phase(operations, "COPY_OUT", false);
  return Status::Ok();
}

Status Executor::RunOne(const ReadyOperation& op, LocalOperation* local) {
  const std::vector<const ReadyOperation*> just_this = {&op};
  const TensorSpec& mine = op.specs[world_.rank];
  const DataType type = mine.type;
  const int64_t element = DataTypeSize(type);
  // Allgather and alltoall fill a new output with counts[r] elements from
  // each rank r; when nothing is sent there is nothing to run, and alone a
  // rank's output is what it sends.
  auto exchange = [&](const std::vector<int64_t>& counts, int64_t sent,
                      const std::function<Status()>& call) -> Status {
    const int64_t total =
        std::accumulate(counts.begin(), counts.end(), int64_t{0});
    local->handle->output.resize(total * element);
    local->handle->output_counts = counts;
    if (sent == 0) return Status::Ok();
    if (world_.size == 1) {
      std::memcpy(local->handle->output.data(), local->send, total * element);
      return Status::Ok();
    }
    return Engine(just_this, call);
  };
  switch (mine.collective) {
    case Collective::kAllgather: {
      std::vector<int64_t> counts;
      for (const TensorSpec& s : op.specs) counts.push_back(s.count);
      const int64_t sent =
          std::accumulate(counts.begin(), counts.end(), int64_t{0});
      return exchange(counts, sent, [&] {
        return backend_->Allgatherv(local->send, local->handle->output.data(),
                                    counts, type);
      });
    }
    case Collective::kBroadcast:
      if (mine.count == 0) return Status::Ok();
      return Engine(just_this, [&] {
        return backend_->Broadcast(local->recv, mine.count, type, mine.root);
      });
    case Collective::kAlltoall: {
      std::vector<int64_t> recv_counts;
      int64_t sent = 0;
      for (const TensorSpec& s : op.specs) {
        recv_counts.push_back(s.splits[world_.rank]);
        for (int64_t c : s.splits) sent += c;
      }
      return exchange(recv_counts, sent, [&] {
        return backend_->Alltoallv(local->send, mine.splits,
                                   local->handle->output.data(), recv_counts,
                                   type);
      });
    }
    case Collective::kReducescatter: {
      const int64_t block = mine.count / world_.size;
      local->handle->output.resize(block * element);
      local->handle->output_counts.assign(world_.size, block);
      if (block == 0) return Status::Ok();
      if (world_.size == 1) {
        std::memcpy(local->handle->output.data(), local->send, block * element);
      } else {
        KOLO_RETURN_IF_ERROR(Engine(just_this, [&] {
          return backend_->Reducescatter(
              local->send, local->handle->output.data(), block, type, mine.op);
        }));
      }
      if (mine.op == ReduceOp::kAverage) {
        DivideInPlace(type, local->handle->output.data(), block, world_.size);
      }
      return Status::Ok();
    }
    case Collective::kBarrier:
      // Agreeing that every rank reached it was the barrier.
      return Status::Ok();
    default:
      return Internal("the runtime cannot run " +
                      std::string(CollectiveName(mine.collective)));
  }
}

}  // namespace kolo
