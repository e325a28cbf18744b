#include "collectives/communicator.h"

#include <cstring>

#include "common/reduce.h"
#include "store/tcp_store.h"

namespace kolo {
namespace {

// How long a survivor waits for the store to learn which peer died; the
// store hears of it when the dead process's socket closes, a moment after
// the engine's own error.
constexpr std::chrono::seconds kFailureNewsWait{3};

bool LostPeer(const Status& status) {
  return status.code() == StatusCode::kPeerFailure ||
         status.code() == StatusCode::kTimeout;
}

int64_t Sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t v : values) total += v;
  return total;
}

// The per-call checks that need no other rank; an empty string means fine.
std::string CheckCount(int64_t count, const void* send, const void* recv) {
  if (count < 0) return "negative element count " + std::to_string(count);
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return "null buffer for " + std::to_string(count) + " elements";
  }
  return "";
}

std::string CheckCounts(const std::vector<int64_t>& counts, int32_t size,
                        const char* name) {
  if (static_cast<int32_t>(counts.size()) != size) {
    return std::string(name) + " has " + std::to_string(counts.size()) +
           " entries for " + std::to_string(size) + " ranks";
  }
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0) {
      return std::string(name) + "[" + std::to_string(r) + "] is negative";
    }
  }
  return "";
}

void CopyIfDifferent(void* to, const void* from, int64_t bytes) {
  if (to != from && bytes > 0) std::memmove(to, from, bytes);
}

}  // namespace

StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const CommunicatorOptions& options, std::shared_ptr<Store> store) {
  BackendOptions backend_options;
  backend_options.world = options.world;
  backend_options.timeout = options.timeout;
  backend_options.gloo_hostname = options.gloo_hostname;
  backend_options.store_prefix = options.store_prefix + "/gloo";
  std::unique_ptr<Backend> backend;
  if (options.backend == BackendKind::kMpi) {
    KOLO_ASSIGN_OR_RETURN(backend, CreateMpiBackend(backend_options));
  } else if (options.world.size > 1) {
    if (store == nullptr) {
      return InvalidArgument("the gloo backend needs a rendezvous store for " +
                             std::to_string(options.world.size) + " ranks");
    }
    KOLO_ASSIGN_OR_RETURN(backend, CreateGlooBackend(backend_options, store));
  }
  return std::unique_ptr<Communicator>(
      new Communicator(options, std::move(store), std::move(backend)));
}

Communicator::Communicator(const CommunicatorOptions& options,
                           std::shared_ptr<Store> store,
                           std::unique_ptr<Backend> backend)
    : world_(options.world),
      backend_kind_(options.backend),
      store_(std::move(store)),
      backend_(std::move(backend)) {}

CallDescriptor Communicator::Describe(Collective collective, int64_t count,
                                      int32_t data_type, int32_t reduce_op,
                                      int32_t root) {
  return MakeDescriptor(++sequence_, collective, count, data_type, reduce_op, root);
}

Status Communicator::GatherRecords(const void* mine, int64_t bytes, void* all) {
  std::vector<int64_t> counts(world_.size, bytes);
  return backend_->Allgatherv(mine, all, counts, DataType::kUInt8);
}

Status Communicator::Execute(
    CallDescriptor call, bool moves_data,
    const std::function<Status()>& exchange_counts,
    const std::function<Status()>& move_data) {
  if (!sticky_error_.ok()) return sticky_error_;
  if (world_.size > 1) {
    std::vector<CallDescriptor> all(world_.size);
    Status gathered = GatherRecords(&call, sizeof(call), all.data());
    if (!gathered.ok()) return Fail(gathered, call);
    KOLO_RETURN_IF_ERROR(CompareDescriptors(all));
    if (exchange_counts) {
      Status agreed = exchange_counts();
      if (LostPeer(agreed)) return Fail(agreed, call);
      KOLO_RETURN_IF_ERROR(agreed);
    }
  } else {
    KOLO_RETURN_IF_ERROR(CompareDescriptors({call}));
  }
  if (!moves_data) return Status::Ok();
  Status moved = move_data();
  // After a failed transfer the engine's state is unknown: make it stick.
  if (!moved.ok()) return Fail(moved, call);
  return Status::Ok();
}

Status Communicator::Fail(const Status& status, const CallDescriptor& call) {
  std::string culprit;
  if (store_ != nullptr && LostPeer(status)) {
    StatusOr<std::string> failed = store_->Get(kFailedRanksKey, kFailureNewsWait);
    if (failed.ok()) {
      // The first rank to leave is the likely cause; the others usually
      // left because of it.
      const size_t comma = failed->find(',');
      culprit = "rank " + failed->substr(0, comma) +
                " is gone (process exited or lost its connection)";
      if (comma != std::string::npos) {
        culprit += ", then ranks " + failed->substr(comma + 1);
      }
      culprit += "; ";
    } else if (failed.status().code() != StatusCode::kTimeout) {
      culprit = "the rendezvous store is unreachable as well (" +
                failed.status().message() + "); ";
    }
  }
  sticky_error_ = Status(
      status.code(),
      "rank " + std::to_string(world_.rank) + ": " +
          CollectiveName(static_cast<Collective>(call.collective)) + " #" +
          std::to_string(call.sequence) + " failed: " + culprit + status.message());
  return sticky_error_;
}

Status Communicator::Allreduce(const void* send, void* recv, int64_t count,
                               DataType type, ReduceOp op) {
  CallDescriptor call = Describe(Collective::kAllreduce, count,
                                 static_cast<int32_t>(type), static_cast<int32_t>(op));
  std::string problem = CheckCount(count, send, recv);
  if (!problem.empty()) MarkInvalid(&call, problem);
  return Execute(call, count > 0, nullptr, [&]() -> Status {
    if (world_.size == 1) {
      CopyIfDifferent(recv, send, count * DataTypeSize(type));
      return Status::Ok();
    }
    KOLO_RETURN_IF_ERROR(backend_->Allreduce(send, recv, count, type, op));
    if (op == ReduceOp::kAverage) DivideInPlace(type, recv, count, world_.size);
    return Status::Ok();
  });
}

Status Communicator::Allgather(const void* send, void* recv, int64_t count,
                               DataType type) {
  CallDescriptor call =
      Describe(Collective::kAllgather, count, static_cast<int32_t>(type));
  std::string problem = CheckCount(count, send, recv);
  if (!problem.empty()) MarkInvalid(&call, problem);
  return Execute(call, count > 0, nullptr, [&]() -> Status {
    if (world_.size == 1) {
      CopyIfDifferent(recv, send, count * DataTypeSize(type));
      return Status::Ok();
    }
    return backend_->Allgatherv(send, recv, std::vector<int64_t>(world_.size, count),
                                type);
  });
}

Status Communicator::Allgatherv(const void* send, int64_t send_count, void* recv,
                                const std::vector<int64_t>& recv_counts,
                                DataType type) {
  CallDescriptor call =
      Describe(Collective::kAllgatherv, send_count, static_cast<int32_t>(type));
  std::string problem = CheckCounts(recv_counts, world_.size, "recv_counts");
  if (problem.empty()) problem = CheckCount(Sum(recv_counts), send, recv);
  if (problem.empty() && send_count < 0) problem = "negative send_count";
  if (!problem.empty()) MarkInvalid(&call, problem);
  const int64_t total = problem.empty() ? Sum(recv_counts) : 0;

  auto exchange_counts = [&]() -> Status {
    // Every rank's recv_counts and own send count, to check them all alike.
    std::vector<int64_t> mine(recv_counts);
    mine.push_back(send_count);
    std::vector<int64_t> all(world_.size * mine.size());
    KOLO_RETURN_IF_ERROR(
        GatherRecords(mine.data(), mine.size() * sizeof(int64_t), all.data()));
    std::vector<std::vector<int64_t>> lists;
    std::vector<int64_t> sends;
    for (int32_t r = 0; r < world_.size; ++r) {
      auto begin = all.begin() + r * mine.size();
      lists.emplace_back(begin, begin + world_.size);
      sends.push_back(*(begin + world_.size));
    }
    return CheckAllgathervCounts(lists, sends);
  };
  return Execute(call, total > 0, exchange_counts, [&]() -> Status {
    if (world_.size == 1) {
      CopyIfDifferent(recv, send, send_count * DataTypeSize(type));
      return Status::Ok();
    }
    return backend_->Allgatherv(send, recv, recv_counts, type);
  });
}

Status Communicator::Broadcast(const void* send, void* recv, int64_t count,
                               DataType type, int32_t root) {
  CallDescriptor call = Describe(Collective::kBroadcast, count,
                                 static_cast<int32_t>(type), -1, root);
  std::string problem = CheckCount(count, world_.rank == root ? send : recv, recv);
  if (root < 0 || root >= world_.size) {
    problem = "root " + std::to_string(root) + " is not a rank of a " +
              std::to_string(world_.size) + "-rank world";
  }
  if (!problem.empty()) MarkInvalid(&call, problem);
  return Execute(call, count > 0, nullptr, [&]() -> Status {
    if (world_.rank == root) CopyIfDifferent(recv, send, count * DataTypeSize(type));
    if (world_.size == 1) return Status::Ok();
    return backend_->Broadcast(recv, count, type, root);
  });
}

Status Communicator::Alltoall(const void* send, void* recv, int64_t count,
                              DataType type) {
  CallDescriptor call =
      Describe(Collective::kAlltoall, count, static_cast<int32_t>(type));
  std::string problem = CheckCount(count, send, recv);
  if (!problem.empty()) MarkInvalid(&call, problem);
  return Execute(call, count > 0, nullptr, [&]() -> Status {
    if (world_.size == 1) {
      CopyIfDifferent(recv, send, count * DataTypeSize(type));
      return Status::Ok();
    }
    std::vector<int64_t> counts(world_.size, count);
    return backend_->Alltoallv(send, counts, recv, counts, type);
  });
}

Status Communicator::Alltoallv(const void* send,
                               const std::vector<int64_t>& send_counts,
                               void* recv,
                               const std::vector<int64_t>& recv_counts,
                               DataType type) {
  CallDescriptor call =
      Describe(Collective::kAlltoallv, 0, static_cast<int32_t>(type));
  std::string problem = CheckCounts(send_counts, world_.size, "send_counts");
  if (problem.empty()) problem = CheckCounts(recv_counts, world_.size, "recv_counts");
  if (problem.empty()) problem = CheckCount(Sum(send_counts), send, send);
  if (problem.empty()) problem = CheckCount(Sum(recv_counts), recv, recv);
  if (problem.empty() && send == recv && send_counts != recv_counts) {
    problem = "in-place alltoallv needs send_counts equal to recv_counts";
  }
  if (!problem.empty()) MarkInvalid(&call, problem);
  int64_t moved = 0;
  if (problem.empty()) moved = Sum(send_counts) + Sum(recv_counts);

  auto exchange_counts = [&]() -> Status {
    std::vector<int64_t> mine(send_counts);
    mine.insert(mine.end(), recv_counts.begin(), recv_counts.end());
    std::vector<int64_t> all(world_.size * mine.size());
    KOLO_RETURN_IF_ERROR(
        GatherRecords(mine.data(), mine.size() * sizeof(int64_t), all.data()));
    std::vector<std::vector<int64_t>> sends;
    std::vector<std::vector<int64_t>> recvs;
    bool any_data = false;
    for (int32_t r = 0; r < world_.size; ++r) {
      auto begin = all.begin() + r * mine.size();
      sends.emplace_back(begin, begin + world_.size);
      recvs.emplace_back(begin + world_.size, begin + 2 * world_.size);
      any_data = any_data || Sum(sends.back()) > 0;
    }
    // Ranks with nothing to move still take part when any rank moves data.
    moved = any_data ? 1 : 0;
    return CheckAlltoallvCounts(sends, recvs);
  };
  if (world_.size == 1) {
    return Execute(call, moved > 0, nullptr, [&]() -> Status {
      CopyIfDifferent(recv, send, send_counts[0] * DataTypeSize(type));
      return Status::Ok();
    });
  }
  // `moved` is decided by the count exchange, identically on every rank.
  return Execute(call, true, exchange_counts, [&]() -> Status {
    if (moved == 0) return Status::Ok();
    return backend_->Alltoallv(send, send_counts, recv, recv_counts, type);
  });
}

Status Communicator::Reducescatter(const void* send, void* recv,
                                   int64_t recv_count, DataType type,
                                   ReduceOp op) {
  CallDescriptor call = Describe(Collective::kReducescatter, recv_count,
                                 static_cast<int32_t>(type), static_cast<int32_t>(op));
  std::string problem = CheckCount(recv_count, send, recv);
  if (!problem.empty()) MarkInvalid(&call, problem);
  return Execute(call, recv_count > 0, nullptr, [&]() -> Status {
    if (world_.size == 1) {
      CopyIfDifferent(recv, send, recv_count * DataTypeSize(type));
      return Status::Ok();
    }
    KOLO_RETURN_IF_ERROR(backend_->Reducescatter(send, recv, recv_count, type, op));
    if (op == ReduceOp::kAverage) DivideInPlace(type, recv, recv_count, world_.size);
    return Status::Ok();
  });
}

Status Communicator::Barrier() {
  // The descriptor allgather is the barrier: no rank holds every descriptor
  // before every rank has sent its own.
  return Execute(Describe(Collective::kBarrier, 0), false, nullptr, nullptr);
}

}  // namespace kolo
