#include "runtime/runtime.h"

#include <pthread.h>

#include <algorithm>
#include <set>

#include "collectives/peer_failure.h"
#include "common/logging.h"
#include "runtime/fusion.h"
#include "runtime/handle_state.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

// An idle rank still ticks this often, so ranks waiting for it keep
// progressing and its stall inspector keeps watching.
constexpr std::chrono::milliseconds kIdleTick{100};
}  // namespace

StatusOr<std::unique_ptr<Runtime>> Runtime::Start(
    const RuntimeOptions& options, std::unique_ptr<Backend> backend,
    std::shared_ptr<Store> store, std::unique_ptr<DirectPath> direct) {
  if (options.world.size > 1 && backend == nullptr) {
    return InvalidArgument("the runtime needs an engine for " +
                           std::to_string(options.world.size) + " ranks");
  }
  if (options.world.size > 1) {
    // Ranks that fuse or cache differently would run different engine calls.
    const int64_t mine[2] = {options.fusion_threshold_bytes,
                             options.cache_capacity};
    std::vector<int64_t> all(2 * options.world.size);
    KOLO_RETURN_IF_ERROR(backend->Allgatherv(
        mine, all.data(), std::vector<int64_t>(options.world.size, 2),
        DataType::kInt64));
    for (int32_t r = 0; r < options.world.size; ++r) {
      if (all[2 * r] != mine[0] || all[2 * r + 1] != mine[1]) {
        return InvalidArgument(
            "rank " + std::to_string(r) +
            " runs with KOLO_FUSION_THRESHOLD=" + std::to_string(all[2 * r]) +
            " and KOLO_CACHE_CAPACITY=" + std::to_string(all[2 * r + 1]) +
            ", rank " + std::to_string(options.world.rank) + " with " +
            std::to_string(mine[0]) + " and " + std::to_string(mine[1]) +
            ": every rank needs the same values");
      }
    }
  }
  std::unique_ptr<Timeline> timeline;
  if (!options.timeline_path.empty() && options.world.rank == 0) {
    KOLO_ASSIGN_OR_RETURN(
        timeline, Timeline::Open(options.timeline_path, options.world.rank,
                                 options.timeline_section));
  }
  std::unique_ptr<Runtime> runtime(
      new Runtime(options, std::move(backend), std::move(store),
                  std::move(timeline), std::move(direct)));
  runtime->thread_ = std::thread([r = runtime.get()] { r->Loop(); });
  return runtime;
}

Runtime::Runtime(const RuntimeOptions& options,
                 std::unique_ptr<Backend> backend, std::shared_ptr<Store> store,
                 std::unique_ptr<Timeline> timeline,
                 std::unique_ptr<DirectPath> direct)
    : options_(options),
      backend_(std::move(backend)),
      store_(std::move(store)),
      timeline_(std::move(timeline)),
      timeline_active_(!options.timeline_path.empty()),
      direct_(std::move(direct)),
      spin_style_(RanksOutnumberCores(options.world.local_size)
                      ? SpinStyle::kYieldEveryWait
                      : SpinStyle::kYield),
      doorbell_(std::make_shared<Doorbell>(this)),
      cache_(options.cache_capacity),
      coordinator_(options.world.size, &cache_),
      report_codec_(options.world.size, options.cache_capacity),
      stall_inspector_(options.stall_warning, options.stall_shutdown),
      metrics_(options.engine_name),
      executor_(options.world, backend_.get(), timeline_.get(), &loop_stats_,
                &metrics_) {}

Runtime::~Runtime() { (void)Shutdown(); }

StatusOr<Handle> Runtime::Enqueue(TensorSpec spec, const void* send, void* recv,
                                  CompletionCallback callback) {
  StatusOr<std::vector<Handle>> handles =
      EnqueueGroup({std::move(spec)}, {send}, {recv}, std::move(callback));
  if (!handles.ok()) return handles.status();
  return handles->front();
}

StatusOr<std::vector<Handle>> Runtime::EnqueueGroup(
    std::vector<TensorSpec> specs, std::vector<const void*> sends,
    std::vector<void*> recvs, CompletionCallback callback) {
  std::vector<std::unique_ptr<LocalOperation>> operations;
  std::vector<Handle> handles;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name.empty())
      return InvalidArgument("an operation needs a non-empty name");
    if (specs[i].count < 0) {
      return InvalidArgument("operation '" + specs[i].name +
                             "': negative element count " +
                             std::to_string(specs[i].count));
    }
    auto local = std::make_unique<LocalOperation>();
    local->spec = std::move(specs[i]);
    local->send = sends[i];
    local->recv = recvs[i];
    local->handle =
        std::make_shared<internal::HandleState>(local->spec.name, callback);
    local->handle->spin_style = spin_style_;
    local->handle->on_wait = [bell = std::weak_ptr<Doorbell>(doorbell_)] {
      if (std::shared_ptr<Doorbell> b = bell.lock()) {
        MutexLock lock(&b->mutex);
        if (b->runtime != nullptr) b->runtime->WaiterArrived();
      }
    };
    local->enqueued = Clock::now();
    handles.emplace_back(local->handle);
    operations.push_back(std::move(local));
  }
  bool wake_runtime = false;
  {
    MutexLock lock(&mutex_);
    if (!sticky_error_.ok()) return sticky_error_;
    if (stopped_ || shutdown_requested_) {
      return FailedPrecondition("kolo is shutting down; no new operations");
    }
    std::set<std::string> names;
    for (const auto& op : operations) {
      if (names_in_use_.count(op->spec.name) ||
          !names.insert(op->spec.name).second) {
        return InvalidArgument("operation '" + op->spec.name +
                               "' is already pending on rank " +
                               std::to_string(options_.world.rank) +
                               "; wait for it before reusing the name");
      }
    }
    // The runtime's thread waits for work only while its queue is empty;
    // between ticks with work in hand it waits for the cycle's end or a
    // waiting caller. Waking it for every operation of a step would cost a
    // futex call and a context switch each, for a wait it resumes at once.
    wake_runtime = queue_.empty();
    for (auto& op : operations) {
      names_in_use_[op->spec.name] = true;
      queue_.push_back(std::move(op));
    }
    work_queued_.store(true, std::memory_order_release);
  }
  // After the push: a lease opening meanwhile sees the queued work.
  if (direct_) direct_->Close();
  if (wake_runtime) wake_.NotifyAll();
  return handles;
}

StatusOr<int32_t> Runtime::Join() {
  MutexLock lock(&mutex_);
  if (!sticky_error_.ok()) return sticky_error_;
  if (stopped_) return FailedPrecondition("kolo has shut down");
  join_requested_ = true;
  last_joined_.reset();
  if (direct_) direct_->Close();
  wake_.NotifyAll();
  while (!last_joined_.has_value() && !stopped_) joined_all_.Wait(&mutex_);
  if (!last_joined_)
    return sticky_error_.ok() ? Aborted("kolo shut down during Join()")
                              : sticky_error_;
  return *last_joined_;
}

void Runtime::WaiterArrived() {
  {
    MutexLock lock(&mutex_);
    waiter_arrived_ = true;
  }
  wake_.NotifyAll();
}

Status Runtime::SetTimeline(const std::string& path) {
  std::unique_ptr<Timeline> timeline;
  if (!path.empty() && options_.world.rank == 0) {
    KOLO_ASSIGN_OR_RETURN(timeline, Timeline::Open(path, options_.world.rank));
  }
  {
    MutexLock lock(&mutex_);
    if (!sticky_error_.ok()) return sticky_error_;
    if (stopped_ || shutdown_requested_)
      return FailedPrecondition("kolo has shut down");
    incoming_timeline_ = std::move(timeline);
    incoming_timeline_active_ = !path.empty();
    timeline_change_ = true;
  }
  // A lease keeps the runtime's thread from ticking: end it, as new work
  // does.
  if (direct_) direct_->Close();
  wake_.NotifyAll();
  MutexLock lock(&mutex_);
  while (timeline_change_ && !stopped_) timeline_taken_.Wait(&mutex_);
  if (timeline_change_) return FailedPrecondition("kolo has shut down");
  return Status::Ok();
}

Status Runtime::Shutdown() {
  {
    MutexLock lock(&doorbell_->mutex);
    doorbell_->runtime = nullptr;
  }
  {
    MutexLock lock(&mutex_);
    shutdown_requested_ = true;
  }
  if (direct_) direct_->Close();
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (timeline_) timeline_->Flush();
  MutexLock lock(&mutex_);
  return sticky_error_;
}

RuntimeStats Runtime::stats() const {
  RuntimeStats stats;
  {
    MutexLock lock(&mutex_);
    stats = stats_;
  }
  if (direct_) {
    const RuntimeStats direct = direct_->stats();
    stats.operations += direct.operations;
    stats.direct_operations += direct.direct_operations;
    stats.bytes += direct.bytes;
    stats.collectives += direct.collectives;
    stats.collective_seconds += direct.collective_seconds;
  }
  return stats;
}

Status Runtime::sticky_error() const {
  MutexLock lock(&mutex_);
  return sticky_error_;
}

void Runtime::Loop() {
  pthread_setname_np(pthread_self(), "kolo-runtime");
  auto last_tick = Clock::now();
  bool busy = false;
  while (true) {
    WaitForWork(busy, last_tick);
    last_tick = Clock::now();
    if (!Tick()) break;
    if (lease_due_) {
      if (!LeaseIdleTime()) break;
      busy = false;
      continue;
    }
    MutexLock lock(&mutex_);
    busy = !pending_.empty() || join_requested_ || shutdown_requested_;
  }
}

bool Runtime::LeaseIdleTime() {
  bool work;
  {
    MutexLock lock(&mutex_);
    work = !queue_.empty() || join_requested_ || shutdown_requested_ ||
           timeline_change_;
  }
  // After Open: work enqueued before it is seen here, work after it closes
  // the lease in Enqueue.
  if (work) direct_->Close();
  while (!direct_->AwaitClose(kIdleTick)) {
  }
  const Status failure = direct_->failure();
  if (failure.ok()) return true;
  FailEverything(failure);
  return false;
}

void Runtime::WaitForWork(bool busy, Clock::time_point last_tick) {
  if (busy) {
    // Paced: operations arriving meanwhile join this tick's fusion, unless
    // a caller is already waiting for the result.
    const Clock::time_point deadline = last_tick + options_.cycle_time;
    MutexLock lock(&mutex_);
    while (!waiter_arrived_ && !shutdown_requested_) {
      if (!wake_.WaitUntil(&mutex_, deadline)) break;
    }
    waiter_arrived_ = false;
    return;
  }
  // Idle: start at once when work arrives, or tick for the other ranks.
  const Clock::time_point began = Clock::now();
  const bool arrived = idle_spin_.Spin(
      [&] { return work_queued_.load(std::memory_order_acquire); }, spin_style_,
      began);
  MutexLock lock(&mutex_);
  if (!arrived) {
    const Clock::time_point deadline = last_tick + kIdleTick;
    while (queue_.empty() && !join_requested_ && !shutdown_requested_ &&
           !timeline_change_) {
      if (!wake_.WaitUntil(&mutex_, deadline)) break;
    }
  }
  idle_spin_.Finished(began);
  waiter_arrived_ = false;
}

bool Runtime::Tick() {
  const SteadyTime start = Clock::now();
  CycleReport mine = Drain(start);
  const bool announced_any = Announce(start, &mine);
  StatusOr<std::vector<CycleReport>> reports = Exchange(mine);
  const SteadyTime decided_at = Clock::now();
  const double negotiation =
      std::chrono::duration<double>(decided_at - start).count();
  loop_stats_.negotiation_seconds += negotiation;
  ++loop_stats_.cycles;
  metrics_.Negotiated(negotiation);
  if (!reports.ok())
    return Stop(NamePeerFailure(reports.status().WithContext("negotiation")));
  if (std::any_of(reports->begin(), reports->end(),
                  [](const CycleReport& r) { return r.stalled; })) {
    return Stop(StallShutdown(decided_at));
  }
  const CycleDecision decision =
      Decide(*reports, start, decided_at, announced_any);
  DecideLease(*reports);
  if (!Execute(decision, decided_at)) return false;
  FinishJoin(decision);
  InspectStalls(decided_at);
  return KeepRunning(decision, mine.shutting_down);
}

CycleReport Runtime::Drain(SteadyTime start) {
  CycleReport mine;
  std::unique_ptr<Timeline> retired;
  {
    MutexLock lock(&mutex_);
    work_queued_.store(false, std::memory_order_relaxed);
    while (!queue_.empty()) {
      std::unique_ptr<LocalOperation> op = std::move(queue_.front());
      queue_.pop_front();
      unannounced_.push_back(op.get());
      const std::string name = op->spec.name;
      pending_[name] = std::move(op);
    }
    mine.joined = join_requested_;
    mine.shutting_down = shutdown_requested_;
    if (timeline_change_) {
      // The old timeline is flushed and closed when `retired` goes, after
      // the lock.
      retired = std::move(timeline_);
      timeline_ = std::move(incoming_timeline_);
      timeline_active_ = incoming_timeline_active_;
      executor_.set_timeline(timeline_.get());
      timeline_change_ = false;
      timeline_taken_.NotifyAll();
    }
  }
  mine.stalled = stall_inspector_.stalled();
  mine.direct_ready = direct_ && !timeline_active_ && !mine.joined &&
                      !mine.shutting_down && !mine.stalled;
  if (mine.shutting_down && shutdown_since_ == SteadyTime())
    shutdown_since_ = start;
  return mine;
}

bool Runtime::Announce(SteadyTime start, CycleReport* mine) {
  for (LocalOperation* op : unannounced_) {
    const int32_t bit = cache_.Lookup(op->spec, options_.world.rank);
    if (bit >= 0) {
      mine->cached_bits.push_back(bit);
    } else {
      mine->specs.push_back(op->spec);
    }
    op->announced = start;
    if (timeline_) {
      timeline_->Begin(op->spec.name, "NEGOTIATE", op->enqueued);
      timeline_->End(op->spec.name, start);
      timeline_->Begin(op->spec.name, "WAIT_FOR_OTHERS", start);
    }
  }
  const bool announced_any = !unannounced_.empty();
  unannounced_.clear();
  std::sort(mine->cached_bits.begin(), mine->cached_bits.end());
  return announced_any;
}

StatusOr<std::vector<CycleReport>> Runtime::Exchange(const CycleReport& mine) {
  const int32_t size = options_.world.size;
  if (size == 1) return std::vector<CycleReport>{mine};

  // Every rank's fixed record: flags and cache bits.
  std::vector<uint64_t> record;
  std::string payload;
  report_codec_.Encode(mine, &record, &payload);
  const int64_t record_words = report_codec_.record_words();
  std::vector<uint64_t> records(record_words * size);
  KOLO_RETURN_IF_ERROR(backend_->Allgatherv(
      record.data(), records.data(),
      std::vector<int64_t>(size, record_words * 8), DataType::kUInt8));
  std::vector<CycleReport> reports;
  KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> payload_sizes,
                        report_codec_.DecodeRecords(records, &reports));
  if (payload_sizes.empty()) return reports;

  // Full specs, only when some rank announced one.
  int64_t total = 0;
  for (int64_t bytes : payload_sizes) total += bytes;
  std::string everything(total, '\0');
  KOLO_RETURN_IF_ERROR(backend_->Allgatherv(payload.data(), everything.data(),
                                            payload_sizes, DataType::kUInt8));
  KOLO_RETURN_IF_ERROR(
      report_codec_.DecodePayloads(everything, payload_sizes, &reports));
  return reports;
}

CycleDecision Runtime::Decide(const std::vector<CycleReport>& reports,
                              SteadyTime start, SteadyTime decided_at,
                              bool announced_any) {
  CycleDecision decision = coordinator_.Decide(reports, decided_at);
  loop_stats_.cache_hits += decision.cache_hits;
  loop_stats_.cache_misses += decision.cache_misses;
  metrics_.CacheLookups(decision.cache_hits, decision.cache_misses);
  if (timeline_ && (announced_any || !decision.ready.empty())) {
    timeline_->Mark("cycle", start);
  }
  return decision;
}

void Runtime::DecideLease(const std::vector<CycleReport>& reports) {
  // Nothing announced anywhere is left after this tick (the coordinator's
  // table is the same on every rank), and every rank can lease: all ranks
  // lease together. The lease opens before this tick's operations complete,
  // so that a caller woken by one and calling again at once finds it open.
  lease_due_ = direct_ && coordinator_.pending() == 0 &&
               std::all_of(reports.begin(), reports.end(),
                           [](const CycleReport& r) { return r.direct_ready; });
  if (lease_due_) direct_->Open();
}

bool Runtime::Execute(const CycleDecision& decision, SteadyTime decided_at) {
  const int64_t cutoff = backend_ ? backend_->FusionCutoffBytes() : 0;
  for (const Batch& batch :
       PlanFusion(decision.ready, options_.fusion_threshold_bytes, cutoff)) {
    if (!ExecuteBatch(decision.ready, batch, decided_at)) return false;
  }
  return true;
}

bool Runtime::ExecuteBatch(const std::vector<ReadyOperation>& ready,
                           const Batch& batch, SteadyTime decided_at) {
  std::vector<const ReadyOperation*> operations;
  std::vector<LocalOperation*> locals;
  for (size_t index : batch.operations) {
    const ReadyOperation& op = ready[index];
    auto it = pending_.find(op.name);
    LocalOperation* local = it == pending_.end() ? nullptr : it->second.get();
    if (local != nullptr) {
      const double waited =
          std::chrono::duration<double>(decided_at - local->announced).count();
      loop_stats_.wait_for_others_seconds += waited;
      metrics_.WaitedForOthers(waited);
      if (timeline_) timeline_->End(op.name, decided_at);
    }
    operations.push_back(&op);
    locals.push_back(local);
  }
  if (!operations.front()->error.ok()) {
    // Failed negotiation: every rank that has the operation reports why.
    for (LocalOperation* local : locals) {
      if (local != nullptr) Complete(local, operations.front()->error, 0);
    }
    return true;
  }
  Status ran = executor_.Run(operations, locals);
  if (!ran.ok()) {
    return Stop(NamePeerFailure(ran.WithContext(
        std::string(CollectiveName(operations.front()->specs[0].collective)) +
        " of '" + operations.front()->name + "'")));
  }
  for (size_t i = 0; i < operations.size(); ++i) {
    coordinator_.Completed(*operations[i]);
    if (locals[i] != nullptr) {
      Complete(locals[i], Status::Ok(),
               operations[i]->specs[options_.world.rank].bytes());
    }
  }
  return true;
}

void Runtime::FinishJoin(const CycleDecision& decision) {
  if (!decision.all_joined) return;
  MutexLock lock(&mutex_);
  join_requested_ = false;
  last_joined_ = decision.last_joined_rank;
  joined_all_.NotifyAll();
}

bool Runtime::KeepRunning(const CycleDecision& decision, bool shutting_down) {
  {
    MutexLock lock(&mutex_);
    stats_ = loop_stats_;
    if (!sticky_error_.ok()) return false;
  }
  if (decision.all_shutting_down) return Stop(Status::Ok());
  if (shutting_down && Clock::now() - shutdown_since_ > options_.timeout) {
    KOLO_LOG(WARNING) << "leaving after waiting "
                      << options_.timeout.count() / 1000
                      << " s for the other ranks to shut down";
    return Stop(Status::Ok());
  }
  return true;
}

bool Runtime::Stop(const Status& error) {
  FailEverything(error);
  return false;
}

void Runtime::Complete(LocalOperation* local, const Status& status,
                       int64_t bytes) {
  const std::string name = local->spec.name;
  if (status.ok()) {
    ++loop_stats_.operations;
    loop_stats_.bytes += bytes;
  } else {
    ++loop_stats_.errors;
  }
  metrics_.Completed(local->spec.collective, bytes, status.ok());
  {
    // The name is free again, and the statistics count the operation,
    // before anyone learns of the completion: a waiter may read them or
    // reuse the name at once (the next training step).
    MutexLock lock(&mutex_);
    names_in_use_.erase(name);
    stats_ = loop_stats_;
  }
  local->handle->Complete(status);
  pending_.erase(name);
}

void Runtime::FailEverything(const Status& error) {
  std::deque<std::unique_ptr<LocalOperation>> queued;
  {
    MutexLock lock(&mutex_);
    if (sticky_error_.ok()) sticky_error_ = error;
    stopped_ = true;
    queued.swap(queue_);
    names_in_use_.clear();
    stats_ = loop_stats_;
  }
  // Peers waiting in a lease for this rank go back to their runtimes.
  if (direct_) direct_->Close();
  joined_all_.NotifyAll();
  timeline_taken_.NotifyAll();
  const Status reason =
      error.ok() ? Aborted("kolo shut down before the operation ran") : error;
  for (auto& op : queued) op->handle->Complete(reason);
  for (auto& [name, op] : pending_) op->handle->Complete(reason);
  pending_.clear();
  unannounced_.clear();
}

Status Runtime::NamePeerFailure(const Status& status) {
  return ExplainPeerFailure(status, store_.get(),
                            "rank " + std::to_string(options_.world.rank));
}

void Runtime::InspectStalls(SteadyTime now) {
  if (!stall_inspector_.Due(now)) return;
  for (const std::string& warning : stall_inspector_.Inspect(
           coordinator_.Waiting(now, stall_inspector_.warning_time()), now)) {
    KOLO_LOG(WARNING) << warning;
    metrics_.StallWarning();
  }
}

Status Runtime::StallShutdown(SteadyTime now) const {
  // What waits here matters only when the verdict is another rank's.
  if (stall_inspector_.stalled()) return stall_inspector_.ShutdownError({});
  return stall_inspector_.ShutdownError(
      coordinator_.Waiting(now, Clock::duration::zero()));
}

}  // namespace kolo
