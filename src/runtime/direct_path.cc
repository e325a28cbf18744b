#include "runtime/direct_path.h"

#include <cstring>
#include <string_view>

#include "collectives/peer_failure.h"
#include "common/logging.h"
#include "common/reduce.h"
#include "runtime/coordinator.h"
#include "runtime/handle_state.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

// A post: this header, then the serialized spec of a call; the call's
// data, when it travels in the post, from kPostBytes on. The tag is
// written last: a rank that waits for the post polls the line that holds
// the rest of the header and the start of the spec.
struct PostHeader {
  std::atomic<uint64_t> tag;  // Tag(epoch, slot) of the slot posted in
  uint32_t kind;
  uint32_t spec_bytes;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "a post's tag is shared between processes");
constexpr uint32_t kCall = 1;
constexpr uint32_t kEnd = 2;

// A post holds one serialized spec in its first kPostBytes; their size is
// dominated by the per-rank counts of an alltoall (16 bytes a rank). A
// bigger spec ends the lease and goes through the runtime.
constexpr int64_t kPostBytes = 64 * 1024;
// Allreduces below the engine's threshold for reducing by slices (64 KiB,
// shm_backend.cc) reduce the whole buffer on every rank from every rank's
// copy, which the posts can hold as well as the engine's segments.
// The data's part of a post, and the largest allreduce that travels in it.
constexpr int64_t kPostDataAreaBytes = 64 * 1024;
constexpr int64_t kPostDataBytes = kPostDataAreaBytes - 1;

// The scalars each rank publishes in the posts' group.
constexpr int32_t kGaveUpSlot = 0;  // tag of the slot it gave up waiting in
constexpr int32_t kBeatSlot = 1;    // its runtime's beats while leased

constexpr std::chrono::milliseconds kSleepSlice{10};

PostHeader* HeaderIn(char* area) { return reinterpret_cast<PostHeader*>(area); }
const PostHeader* HeaderIn(const char* area) {
  return reinterpret_cast<const PostHeader*>(area);
}

// Slots of later leases compare greater.
uint64_t Tag(uint32_t epoch, uint32_t slot) {
  return (uint64_t{epoch} << 32) | slot;
}

}  // namespace

StatusOr<std::unique_ptr<DirectPath>> DirectPath::Create(
    const Options& options, std::shared_ptr<Store> store) {
  if (!store) return InvalidArgument("the direct path needs the store");
  ShmGroup::Options group;
  group.rank = options.world.rank;
  group.size = options.world.size;
  group.areas = 2;                                     // posts, by slot parity
  group.area_bytes = kPostBytes + kPostDataAreaBytes;  // spec, then data
  group.timeout = options.timeout;
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<ShmGroup> posts,
      ShmGroup::Create(group, *store, options.store_prefix + "/posts/"));
  BackendOptions engine_options;
  engine_options.world = options.world;
  engine_options.timeout = options.timeout;
  engine_options.shm_area_bytes = options.shm_area_bytes;
  engine_options.store_prefix = options.store_prefix + "/engine";
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<Backend> engine,
                        CreateShmBackend(engine_options, store));
  return std::unique_ptr<DirectPath>(new DirectPath(
      options, std::move(posts), std::move(engine), std::move(store)));
}

DirectPath::DirectPath(const Options& options, std::unique_ptr<ShmGroup> posts,
                       std::unique_ptr<Backend> engine,
                       std::shared_ptr<Store> store)
    : options_(options),
      posts_(std::move(posts)),
      engine_(std::move(engine)),
      store_(std::move(store)),
      executor_(options.world, engine_.get(), nullptr, &run_stats_, &metrics_) {
}

void DirectPath::Open() {
  MutexLock lock(&mutex_);
  if (!failure_.ok()) return;
  ++epoch_;
  slot_ = 0;
  open_ = true;
  in_flight_ = false;
  close_owed_ = false;
  posts_->Scalar(options_.world.rank, kBeatSlot)
      .fetch_add(1, std::memory_order_relaxed);
}

bool DirectPath::AwaitClose(std::chrono::milliseconds period) {
  Status alive;
  {
    MutexLock lock(&mutex_);
    const Clock::time_point deadline = Clock::now() + period;
    while (open_) {
      if (!closed_.WaitUntil(&mutex_, deadline)) break;
    }
    if (!open_) return true;
    posts_->Scalar(options_.world.rank, kBeatSlot)
        .fetch_add(1, std::memory_order_relaxed);
    // A call in flight watches its slot itself.
    if (in_flight_) return false;
    const Look look = Examine(epoch_, slot_, nullptr);
    if (look.verdict == Verdict::kEnd) {
      open_ = false;
      return true;
    }
    if (look.verdict == Verdict::kGaveUp) {
      (void)FailLease(Aborted(
          "stall: rank " + std::to_string(look.gave_up) +
          " gave up waiting for a synchronous call (KOLO_STALL_SHUTDOWN_S)"));
      return true;
    }
    for (int32_t r = 0; r < options_.world.size && alive.ok(); ++r) {
      alive = posts_->CheckAlive(r, "lease");
    }
    if (alive.ok()) return false;
    // The other survivors go back to their runtimes, which meet the loss in
    // their engines, instead of waiting here for this rank's next call.
    EndLease();
  }
  // The store may take a moment to name the rank; callers of Close need not
  // wait for it. The runtime's thread (this one) reads failure() only after.
  const Status explained =
      ExplainPeerFailure(alive, store_.get(), RankContext());
  MutexLock lock(&mutex_);
  (void)FailLease(explained);
  return true;
}

Status DirectPath::failure() const {
  MutexLock lock(&mutex_);
  return failure_;
}

void DirectPath::Close() {
  MutexLock lock(&mutex_);
  if (!open_) return;
  if (in_flight_) {
    close_owed_ = true;
    return;
  }
  EndLease();
}

RuntimeStats DirectPath::stats() const {
  MutexLock lock(&mutex_);
  return stats_;
}

void DirectPath::EndLease() {
  Post(kEnd, slot_, "");
  open_ = false;
  closed_.NotifyAll();
}

std::string DirectPath::RankContext() const {
  return "rank " + std::to_string(options_.world.rank);
}

void DirectPath::Post(uint32_t kind, uint32_t slot, const std::string& spec,
                      const void* data, int64_t data_bytes) {
  char* area =
      posts_->Area(options_.world.rank, static_cast<int32_t>(slot % 2));
  PostHeader* header = HeaderIn(area);
  header->kind = kind;
  header->spec_bytes = static_cast<uint32_t>(spec.size());
  std::memcpy(area + sizeof(PostHeader), spec.data(), spec.size());
  if (data_bytes > 0) std::memcpy(area + kPostBytes, data, data_bytes);
  header->tag.store(Tag(epoch_, slot), std::memory_order_release);
  posts_->RingDoorbell();
}

DirectPath::Look DirectPath::Examine(uint32_t epoch, uint32_t slot,
                                     std::vector<TensorSpec>* specs) const {
  Look look;
  const uint64_t tag = Tag(epoch, slot);
  const int32_t size = options_.world.size;
  const int32_t parity = static_cast<int32_t>(slot % 2);
  for (int32_t r = 0; r < size; ++r) {
    if (static_cast<uint64_t>(
            posts_->Scalar(r, kGaveUpSlot).load(std::memory_order_acquire)) ==
        tag) {
      look.verdict = Verdict::kGaveUp;
      look.gave_up = r;
      return look;
    }
    // The area of this slot's parity holds this slot's post or an older
    // one: a rank posts in it again only after every rank has posted in
    // the next slot, this one included.
    const PostHeader* header = HeaderIn(posts_->Area(r, parity));
    const uint64_t posted = header->tag.load(std::memory_order_acquire);
    if (posted < tag) {
      ++look.missing;
      continue;
    }
    if (posted == tag && header->kind == kEnd) {
      look.verdict = Verdict::kEnd;
      return look;
    }
  }
  if (look.missing > 0 || specs == nullptr) return look;

  // Every rank posted a call: run it if the specs agree and are valid, as
  // the coordinator would decide (identical specs can still be invalid: a
  // root out of range); otherwise the runtime reports why not. The
  // comparison is in place: a steady loop of calls allocates nothing.
  auto spec_of = [&](int32_t r) {
    const char* area = posts_->Area(r, parity);
    return std::string_view(area + sizeof(PostHeader),
                            HeaderIn(area)->spec_bytes);
  };
  look.identical = true;
  for (int32_t r = 0; r < size && look.identical; ++r) {
    look.identical = spec_of(r) == posted_spec_;
  }
  // The check formats every field: as long as a call's costs. A spec every
  // rank posted identically and that passed once passes again.
  if (look.identical && posted_spec_ == checked_spec_) {
    look.verdict = Verdict::kRun;
    return look;
  }
  specs->assign(look.identical ? 1 : size, TensorSpec());
  std::vector<const TensorSpec*> by_rank(size, nullptr);
  for (int32_t r = 0; r < size; ++r) {
    if (look.identical && r > 0) {
      by_rank[r] = &(*specs)[0];
      continue;
    }
    const std::string serialized(spec_of(r));
    size_t offset = 0;
    StatusOr<TensorSpec> parsed = ParseSpec(serialized, &offset);
    if (!parsed.ok()) {
      look.verdict = Verdict::kEnd;
      return look;
    }
    (*specs)[r] = *std::move(parsed);
    by_rank[r] = &(*specs)[r];
  }
  look.verdict =
      CheckSpecsAgree(by_rank, size).ok() ? Verdict::kRun : Verdict::kEnd;
  if (look.identical && look.verdict == Verdict::kRun) {
    checked_spec_ = posted_spec_;
  }
  return look;
}

std::vector<int32_t> DirectPath::MissingRanks(uint32_t epoch,
                                              uint32_t slot) const {
  std::vector<int32_t> missing;
  for (int32_t r = 0; r < options_.world.size; ++r) {
    const PostHeader* header =
        HeaderIn(posts_->Area(r, static_cast<int32_t>(slot % 2)));
    if (header->tag.load(std::memory_order_acquire) < Tag(epoch, slot)) {
      missing.push_back(r);
    }
  }
  return missing;
}

StatusOr<DirectPath::Look> DirectPath::AwaitSlot(
    uint32_t epoch, uint32_t slot, const std::string& name,
    std::vector<TensorSpec>* specs) {
  Look look = Examine(epoch, slot, specs);
  if (look.verdict != Verdict::kWaiting) return look;
  const Clock::time_point began = Clock::now();
  if (spin_.Spin(
          [&] {
            look = Examine(epoch, slot, specs);
            return look.verdict != Verdict::kWaiting;
          },
          posts_->spin_style(), began)) {
    spin_.Arrived();
    return look;
  }
  const AdaptiveSpin::FinishOnExit finish{&spin_, began};

  // The ranks still missing are computing, or stuck. Sleep between rings,
  // and between them check what the runtime's exchange would have caught.
  const int32_t size = options_.world.size;
  std::vector<int64_t> beats(size);
  std::vector<Clock::time_point> beat_changed(size, began);
  for (int32_t r = 0; r < size; ++r) {
    beats[r] = posts_->Scalar(r, kBeatSlot).load(std::memory_order_relaxed);
  }
  const auto warning =
      std::chrono::duration_cast<Clock::duration>(options_.stall_warning);
  const auto shutdown =
      std::chrono::duration_cast<Clock::duration>(options_.stall_shutdown);
  Clock::time_point next_warning = began + warning;
  while (true) {
    look = Examine(epoch, slot, specs);
    if (look.verdict != Verdict::kWaiting) break;

    const Clock::time_point now = Clock::now();
    const std::vector<int32_t> missing = MissingRanks(epoch, slot);
    for (int32_t r : missing) {
      KOLO_RETURN_IF_ERROR(posts_->CheckAlive(r, "synchronous call"));
      const int64_t beat =
          posts_->Scalar(r, kBeatSlot).load(std::memory_order_relaxed);
      if (beat != beats[r]) {
        beats[r] = beat;
        beat_changed[r] = now;
      } else if (now - beat_changed[r] > options_.timeout) {
        return Timeout("rank " + std::to_string(r) +
                       " neither arrived nor showed a sign of life within " +
                       std::to_string(options_.timeout.count()) +
                       " ms (is it frozen?)");
      }
    }
    const WaitingOperation waiting{name, missing, now - began};
    const int64_t seconds =
        std::chrono::duration_cast<std::chrono::seconds>(now - began).count();
    if (warning.count() > 0 && now >= next_warning) {
      KOLO_LOG(WARNING) << "stall: " << DescribeWait(waiting, seconds)
                        << " (the other ranks called it; a rank that never "
                           "does hangs the job)";
      metrics_.StallWarning();
      next_warning += warning;
    }
    if (shutdown.count() > 0 && now - began >= shutdown) {
      // The ranks waiting here, and those that come later, fail as well.
      posts_->Scalar(options_.world.rank, kGaveUpSlot)
          .store(static_cast<int64_t>(Tag(epoch, slot)),
                 std::memory_order_release);
      posts_->RingDoorbell();
      return Aborted("stall: " + DescribeWait(waiting, seconds) +
                     " (KOLO_STALL_SHUTDOWN_S=" +
                     std::to_string(options_.stall_shutdown.count()) + ")");
    }
    posts_->AwaitDoorbell(kSleepSlice, [&] {
      const Look again = Examine(epoch, slot, nullptr);
      return again.verdict != Verdict::kWaiting || again.missing == 0;
    });
  }
  if (look.verdict == Verdict::kGaveUp) {
    return Aborted("stall: rank " + std::to_string(look.gave_up) +
                   " gave up waiting for tensor '" + name +
                   "' (KOLO_STALL_SHUTDOWN_S=" +
                   std::to_string(options_.stall_shutdown.count()) + ")");
  }
  return look;
}

Status DirectPath::Run(std::vector<TensorSpec> specs, const void* send,
                       void* recv, void* output_to) {
  const int32_t me = options_.world.rank;
  ReadyOperation operation;
  operation.name = specs[me].name;
  operation.specs = std::move(specs);
  operation.joined.assign(options_.world.size, false);
  LocalOperation local;
  local.spec = operation.specs[me];
  local.send = send;
  local.recv = recv;
  local.handle =
      std::make_shared<internal::HandleState>(operation.name, nullptr);
  run_stats_ = RuntimeStats();
  KOLO_RETURN_IF_ERROR(executor_.Run({&operation}, {&local}));
  if (output_to != nullptr && !local.handle->output.empty()) {
    std::memmove(output_to, local.handle->output.data(),
                 local.handle->output.size());
  }
  return Status::Ok();
}

bool DirectPath::TravelsInPosts(const TensorSpec& spec) const {
  return spec.collective == Collective::kAllreduce && spec.bytes() > 0 &&
         spec.bytes() <= kPostDataBytes;
}

void DirectPath::ReduceFromPosts(const TensorSpec& spec, uint32_t slot,
                                 void* recv) {
  const int32_t parity = static_cast<int32_t>(slot % 2);
  const int32_t size = options_.world.size;
  // In rank order, as the shm engine folds, so that every rank rounds alike.
  FoldInRankOrder(spec.type, spec.op, size, recv, spec.count,
                  [&](int32_t r) -> const char* {
                    return posts_->Area(r, parity) + kPostBytes;
                  });
  if (spec.op == ReduceOp::kAverage) {
    DivideInPlace(spec.type, recv, spec.count, size);
  }
}

Status DirectPath::FailLease(const Status& error) {
  if (failure_.ok()) failure_ = error;
  open_ = false;
  closed_.NotifyAll();
  return error;
}

StatusOr<bool> DirectPath::TryRun(const TensorSpec& spec, const void* send,
                                  void* recv, void* output_to) {
  const bool in_posts = TravelsInPosts(spec);
  uint32_t epoch = 0;
  uint32_t slot = 0;
  {
    MutexLock lock(&mutex_);
    if (!open_) return false;
    if (in_flight_) {
      return InvalidArgument("operation '" + spec.name +
                             "' is already pending on " + RankContext() +
                             "; wait for it before reusing the name");
    }
    posted_spec_.clear();
    SerializeSpec(spec, &posted_spec_);
    if (static_cast<int64_t>(posted_spec_.size() + sizeof(PostHeader)) >
        kPostBytes) {
      EndLease();
      return false;
    }
    Post(kCall, slot_, posted_spec_, in_posts ? send : nullptr,
         in_posts ? spec.bytes() : 0);
    in_flight_ = true;
    epoch = epoch_;
    slot = slot_;
  }

  std::vector<TensorSpec> specs;
  StatusOr<Look> look = AwaitSlot(epoch, slot, spec.name, &specs);
  const bool runs = look.ok() && look->verdict == Verdict::kRun;
  Status ran = Status::Ok();
  double in_posts_seconds = 0;
  if (runs && in_posts) {
    const Clock::time_point began = Clock::now();
    ReduceFromPosts(spec, slot, recv);
    in_posts_seconds =
        std::chrono::duration<double>(Clock::now() - began).count();
    metrics_.EngineCall(spec.collective, spec.bytes(), in_posts_seconds, 1);
  } else if (runs) {
    if (look->identical) specs.assign(options_.world.size, spec);
    ran = Run(std::move(specs), send, recv, output_to);
  }

  MutexLock lock(&mutex_);
  in_flight_ = false;
  if (!look.ok()) {
    // A stall is the job's verdict, not this rank's news, as in the runtime.
    const bool lost_peer = look.status().code() == StatusCode::kPeerFailure ||
                           look.status().code() == StatusCode::kTimeout;
    return FailLease(lost_peer ? ExplainPeerFailure(look.status(), store_.get(),
                                                    RankContext())
                               : look.status());
  }
  if (!ran.ok()) {
    return FailLease(ExplainPeerFailure(
        ran.WithContext(std::string(CollectiveName(spec.collective)) + " of '" +
                        spec.name + "'"),
        store_.get(), RankContext()));
  }
  if (!runs) {
    open_ = false;
    closed_.NotifyAll();
    return false;
  }
  ++slot_;
  ++stats_.operations;
  ++stats_.direct_operations;
  stats_.bytes += spec.bytes();
  metrics_.Completed(spec.collective, spec.bytes(), true);
  if (in_posts) {
    ++stats_.collectives;
    stats_.collective_seconds += in_posts_seconds;
  } else {
    stats_.collectives += run_stats_.collectives;
    stats_.collective_seconds += run_stats_.collective_seconds;
  }
  if (close_owed_) {
    close_owed_ = false;
    EndLease();
  }
  return true;
}

}  // namespace kolo
