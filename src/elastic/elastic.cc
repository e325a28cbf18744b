// kolo::elastic: the State and the loop of Run() (kolo/elastic.h).
#include "kolo/elastic.h"

#include <cstring>
#include <utility>

#include "common/config.h"
#include "common/logging.h"
#include "elastic/protocol.h"
#include "elastic/worker.h"
#include "kolo/kolo.h"
#include "metrics/process_arena.h"

namespace kolo::elastic {
namespace {

// The round this process is in, while Run() runs: Commit() asks the driver
// whether a newer one was published. Only the training thread touches it.
struct Membership {
  ElasticWorker* worker = nullptr;
  int64_t round = -1;
};
Membership& CurrentMembership() {
  static Membership membership;
  return membership;
}

// After a successful Run the process may still work for a while (a Python
// interpreter tearing down, a program writing its results) before it
// exits, which is what ends the job; until then its heartbeat must go on,
// or the driver takes it for frozen and kills it.
void KeepBeatingUntilExit(std::unique_ptr<ElasticWorker> worker) {
  static std::unique_ptr<ElasticWorker> finished;
  finished = std::move(worker);
}

// A collective failed because the world broke under it: the survivors can
// carry on in a new round. Any other error is the program's own.
bool WorldBroke(const Status& status) {
  switch (status.code()) {
    case StatusCode::kPeerFailure:
    case StatusCode::kTimeout:
    case StatusCode::kAborted: return true;
    default: return false;
  }
}

void AppendSized(std::string* blob, const std::string& bytes) {
  const uint64_t size = bytes.size();
  blob->append(reinterpret_cast<const char*>(&size), sizeof(size));
  blob->append(bytes);
}

// Reads what AppendSized wrote at *offset; false when the blob ends early.
bool ReadSized(const std::string& blob, size_t* offset, std::string* bytes) {
  uint64_t size = 0;
  if (blob.size() - *offset < sizeof(size)) return false;
  std::memcpy(&size, blob.data() + *offset, sizeof(size));
  *offset += sizeof(size);
  if (blob.size() - *offset < size) return false;
  bytes->assign(blob, *offset, size);
  *offset += size;
  return true;
}

template <typename T>
Field PlainField(const std::string& name, T* value) {
  Field field;
  field.name = name;
  field.save = [value]() -> StatusOr<std::string> {
    return std::string(reinterpret_cast<const char*>(value), sizeof(T));
  };
  field.load = [value, name](const std::string& bytes) -> Status {
    if (bytes.size() != sizeof(T)) {
      return InvalidArgument("elastic state field '" + name + "' holds " +
                             std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(sizeof(T)));
    }
    std::memcpy(value, bytes.data(), sizeof(T));
    return Status::Ok();
  };
  return field;
}

}  // namespace

State::State() = default;
State::~State() = default;

void State::Track(const std::string& name, int64_t* value) {
  Track(PlainField(name, value));
}

void State::Track(const std::string& name, double* value) {
  Track(PlainField(name, value));
}

void State::Track(const std::string& name, std::string* bytes) {
  Field field;
  field.name = name;
  field.save = [bytes]() -> StatusOr<std::string> { return *bytes; };
  field.load = [bytes](const std::string& saved) {
    *bytes = saved;
    return Status::Ok();
  };
  Track(std::move(field));
}

void State::Track(Field field) {
  fields_.push_back(std::move(field));
  has_saved_ = false;  // a save from before lacks this field
}

void State::OnReset(std::function<Status()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

Status State::Save() {
  std::vector<std::string> saved;
  saved.reserve(fields_.size());
  for (const Field& field : fields_) {
    StatusOr<std::string> bytes = field.save();
    if (!bytes.ok()) {
      return bytes.status().WithContext("saving elastic state field '" +
                                        field.name + "'");
    }
    saved.push_back(std::move(bytes).value());
  }
  saved_ = std::move(saved);
  has_saved_ = true;
  return Status::Ok();
}

Status State::Restore() {
  if (!has_saved_) {
    return FailedPrecondition(
        "elastic state: Restore() before anything was saved");
  }
  for (size_t i = 0; i < fields_.size(); ++i) {
    KOLO_RETURN_IF_ERROR(fields_[i].load(saved_[i]).WithContext(
        "restoring elastic state field '" + fields_[i].name + "'"));
  }
  return Status::Ok();
}

Status State::Commit() {
  KOLO_RETURN_IF_ERROR(Save());
  ++commits_;
  return CheckMembership();
}

Status State::CheckMembership() {
  Membership& membership = CurrentMembership();
  if (membership.worker == nullptr) return Status::Ok();
  // Every rank reads the news, and the ranks agree on it in one collective:
  // a round published between two ranks' reads reaches all of them here.
  int32_t news = 0;
  StatusOr<bool> newer = membership.worker->NewerRoundExists(membership.round);
  if (!newer.ok()) return newer.status();
  if (*newer) news = 1;
  KOLO_RETURN_IF_ERROR(
      Allreduce(&news, &news, 1, DataType::kInt32, ReduceOp::kMax)
          .WithContext("agreeing on membership news at commit " +
                       std::to_string(commits_)));
  if (news != 0) {
    return MembershipChanged("the job's workers change after commit " +
                             std::to_string(commits_) + " (round " +
                             std::to_string(membership.round) + " ends)");
  }
  return Status::Ok();
}

Status State::Sync() {
  // Rank 0's fields, each as its name and its bytes.
  std::string blob;
  if (Rank() == 0) {
    for (const Field& field : fields_) {
      StatusOr<std::string> bytes = field.save();
      if (!bytes.ok()) {
        return bytes.status().WithContext("saving elastic state field '" +
                                          field.name + "' to sync it");
      }
      AppendSized(&blob, field.name);
      AppendSized(&blob, *bytes);
    }
  }
  int64_t size = static_cast<int64_t>(blob.size());
  KOLO_RETURN_IF_ERROR(
      Broadcast(&size, &size, 1, DataType::kInt64, 0)
          .WithContext("broadcasting the elastic state's size"));
  blob.resize(static_cast<size_t>(size));
  if (size > 0) {
    KOLO_RETURN_IF_ERROR(
        Broadcast(blob.data(), blob.data(), size, DataType::kUInt8, 0)
            .WithContext("broadcasting the elastic state"));
  }
  if (Rank() != 0) {
    size_t offset = 0;
    for (const Field& field : fields_) {
      std::string name, bytes;
      if (!ReadSized(blob, &offset, &name) ||
          !ReadSized(blob, &offset, &bytes)) {
        return InvalidArgument("rank 0's elastic state ends before field '" +
                               field.name + "'");
      }
      if (name != field.name) {
        return InvalidArgument("rank 0's elastic state has field '" + name +
                               "' where this rank has '" + field.name +
                               "': every rank must track the same fields in "
                               "the same order");
      }
      KOLO_RETURN_IF_ERROR(field.load(bytes).WithContext(
          "loading elastic state field '" + field.name + "' from rank 0"));
    }
    if (offset != blob.size()) {
      return InvalidArgument(
          "rank 0's elastic state has more fields than this rank's " +
          std::to_string(fields_.size()));
    }
  }
  // The synced values are what a failure before the next commit goes back to.
  return Save();
}

Status State::RunResetCallbacks() {
  for (const std::function<Status()>& callback : reset_callbacks_) {
    KOLO_RETURN_IF_ERROR(callback().WithContext("an elastic reset callback"));
  }
  return Status::Ok();
}

bool IsElasticWorker() {
  return ReadElasticWorkerConfig(ProcessEnvironment()).status().code() !=
         StatusCode::kNotFound;
}

Status Run(State& state, const std::function<Status()>& train) {
  KOLO_ASSIGN_OR_RETURN(ElasticWorkerConfig config,
                        ReadElasticWorkerConfig(ProcessEnvironment()));
  KOLO_ASSIGN_OR_RETURN(InitOptions base, InitOptions::FromEnvironment());
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<ElasticWorker> worker,
                        ElasticWorker::Connect(config));
  Membership& membership = CurrentMembership();
  membership.worker = worker.get();
  struct Forget {
    Membership& membership;
    ~Forget() { membership = Membership(); }
  } forget{membership};

  const std::string me = "elastic worker " + std::to_string(worker->id());
  int64_t round = -1;
  bool joined_before = false;
  while (true) {
    KOLO_ASSIGN_OR_RETURN(RoundAssignment next,
                          worker->NextRound(round, joined_before));
    round = next.round;
    membership.round = round;
    InitOptions options = base;
    options.world.ranks = WorldInfo{};
    options.world.ranks.rank = next.rank;
    options.world.ranks.size = next.size;
    options.world.ranks.local_size = next.size;
    options.world.ranks.local_rank = next.rank;
    options.world.launcher = "kolorun";
    options.world.rendezvous_prefix = RoundPrefix(round);
    options.store = config.store;
    options.store.rank0_hosts = false;
    // A broken round is reported, and the driver publishes the next.
    auto abandon = [&](const Status& why, const char* where) {
      KOLO_LOG(WARNING) << me << " leaves round " << round << " (" << where
                        << "): " << why.ToString();
      (void)Shutdown();
      (void)worker->ReportBroken(round);
    };

    Status gate = worker->PassGate(next);
    if (!gate.ok()) {
      KOLO_LOG(INFO) << me << " skips round " << round << ": "
                     << gate.message();
      continue;
    }
    Status initialized = Init(options);
    if (!initialized.ok()) {
      abandon(initialized, "joining");
      continue;
    }
    Status synced = state.Sync();
    if (!synced.ok()) {
      if (!WorldBroke(synced)) {
        (void)Shutdown();
        return synced;
      }
      if (joined_before) (void)state.Restore();
      abandon(synced, "syncing the state");
      continue;
    }
    static const metrics::Counter resets_counter = metrics::KoloCounter(
        "kolo_elastic_resets_total",
        "Elastic rounds this worker joined after its first, each after the "
        "membership changed.");
    if (joined_before) {
      ++state.resets_;
      resets_counter.Increment();
      Status reset = state.RunResetCallbacks();
      if (!reset.ok()) {
        (void)Shutdown();
        return reset;
      }
    }
    joined_before = true;

    Status trained = train();
    if (trained.ok()) {
      KeepBeatingUntilExit(std::move(worker));
      return Shutdown();
    }
    if (trained.code() == StatusCode::kMembershipChanged) {
      KOLO_LOG(INFO) << me << " (rank " << next.rank << " of " << next.size
                     << ") leaves round " << round << ": " << trained.message();
      (void)Shutdown();
      continue;
    }
    if (!WorldBroke(trained)) {
      (void)Shutdown();
      return trained;
    }
    Status restored = state.Restore();
    if (!restored.ok()) {
      (void)Shutdown();
      return restored;
    }
    abandon(trained, "training; back to the last commit");
  }
}

}  // namespace kolo::elastic
