#include "elastic/worker.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "elastic/protocol.h"

namespace kolo::elastic {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// How long to wait for a key that is there or not: the store answers at
// once either way.
constexpr milliseconds kNoWait{0};

milliseconds Remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                       deadline - Clock::now()));
}

}  // namespace

StatusOr<std::unique_ptr<ElasticWorker>> ElasticWorker::Connect(
    const ElasticWorkerConfig& config) {
  const StoreConfig& store = config.store;
  // Not a rank: a rank number means a different process in every round.
  constexpr int32_t kNotARank = -1;
  const milliseconds connect_timeout(30000);
  auto connect = [&]() {
    return TcpStoreClient::Connect(store.host, store.port, store.secret,
                                   kNotARank, connect_timeout);
  };
  StatusOr<std::unique_ptr<TcpStoreClient>> rendezvous = connect();
  if (!rendezvous.ok()) {
    return rendezvous.status().WithContext("elastic worker " +
                                           std::to_string(config.worker) +
                                           " reaching kolorun's store");
  }
  StatusOr<std::unique_ptr<TcpStoreClient>> heartbeat = connect();
  if (!heartbeat.ok()) {
    return heartbeat.status().WithContext("elastic worker " +
                                          std::to_string(config.worker) +
                                          " reaching kolorun's store");
  }
  // The first beat, before the thread starts: on return the driver may
  // already count this worker as ready.
  KOLO_RETURN_IF_ERROR((*heartbeat)->Add(BeatKey(config.worker), 1).status());
  return std::unique_ptr<ElasticWorker>(new ElasticWorker(
      config, std::move(rendezvous).value(), std::move(heartbeat).value()));
}

ElasticWorker::ElasticWorker(ElasticWorkerConfig config,
                             std::unique_ptr<TcpStoreClient> rendezvous,
                             std::unique_ptr<TcpStoreClient> heartbeat)
    : config_(std::move(config)),
      rendezvous_(std::move(rendezvous)),
      heartbeat_(std::move(heartbeat)) {
  beater_ = std::thread([this] { BeatUntilStopped(); });
}

ElasticWorker::~ElasticWorker() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  stop_changed_.NotifyAll();
  if (beater_.joinable()) beater_.join();
  (void)heartbeat_->Close();
  (void)rendezvous_->Close();
}

void ElasticWorker::BeatUntilStopped() {
  pthread_setname_np(pthread_self(), "kolo-heartbeat");
  const std::string key = BeatKey(config_.worker);
  bool warned = false;
  while (true) {
    {
      MutexLock lock(&mutex_);
      const Clock::time_point next = Clock::now() + config_.heartbeat_interval;
      while (!stopping_) {
        if (!stop_changed_.WaitUntil(&mutex_, next)) break;
      }
      if (stopping_) return;
    }
    StatusOr<int64_t> beat = heartbeat_->Add(key, 1);
    // Without beats the driver evicts this worker, which then learns it
    // from its collectives; one warning is enough to explain why.
    if (!beat.ok() && !warned) {
      KOLO_LOG(WARNING) << "elastic worker " << config_.worker
                        << " cannot send its heartbeat: "
                        << beat.status().ToString();
      warned = true;
    }
  }
}

StatusOr<RoundAssignment> ElasticWorker::NextRound(int64_t after,
                                                   bool was_member) {
  const Clock::time_point deadline = Clock::now() + config_.round_timeout;
  int64_t round = after + 1;
  while (true) {
    StatusOr<std::string> members =
        rendezvous_->Get(RoundMembersKey(round), Remaining(deadline));
    if (!members.ok()) {
      if (members.status().code() == StatusCode::kTimeout) {
        return Timeout("elastic worker " + std::to_string(config_.worker) +
                       ": no rendezvous round including it came within " +
                       std::to_string(config_.round_timeout.count() / 1000) +
                       " s (KOLO_ELASTIC_TIMEOUT_S)");
      }
      return members.status().WithContext(
          "elastic worker " + std::to_string(config_.worker) +
          " waiting for round " + std::to_string(round) +
          " (is kolorun gone?)");
    }
    // Skip to the newest round: the ones between are already broken.
    StatusOr<std::string> latest = rendezvous_->Get(kLatestRoundKey, kNoWait);
    if (latest.ok()) {
      KOLO_ASSIGN_OR_RETURN(int64_t newest,
                            ParseInt(*latest, 0, INT64_MAX, kLatestRoundKey));
      if (newest > round) {
        round = newest;
        continue;
      }
    }
    KOLO_ASSIGN_OR_RETURN(std::vector<int64_t> workers, ParseMembers(*members));
    auto found = std::find(workers.begin(), workers.end(), config_.worker);
    if (found != workers.end()) {
      RoundAssignment assignment;
      assignment.round = round;
      assignment.rank = static_cast<int32_t>(found - workers.begin());
      assignment.size = static_cast<int32_t>(workers.size());
      return assignment;
    }
    if (was_member) {
      return NotFound("elastic worker " + std::to_string(config_.worker) +
                      " was removed from the job in round " +
                      std::to_string(round));
    }
    ++round;  // not yet admitted: wait for a later round
  }
}

StatusOr<bool> ElasticWorker::NewerRoundExists(int64_t round) {
  StatusOr<std::string> latest = rendezvous_->Get(kLatestRoundKey, kNoWait);
  if (!latest.ok()) {
    if (latest.status().code() == StatusCode::kTimeout) return false;
    return latest.status().WithContext("reading the newest elastic round");
  }
  KOLO_ASSIGN_OR_RETURN(int64_t newest,
                        ParseInt(*latest, 0, INT64_MAX, kLatestRoundKey));
  return newest > round;
}

Status ElasticWorker::PassGate(const RoundAssignment& assignment) {
  const int64_t round = assignment.round;
  KOLO_ASSIGN_OR_RETURN(int64_t arrival,
                        rendezvous_->Add(GateArrivalsKey(round), 1));
  if (arrival > kGateClosed) {
    return Aborted("round " + std::to_string(round) +
                   " was replaced before every member came");
  }
  if (arrival == assignment.size) {
    KOLO_RETURN_IF_ERROR(rendezvous_->Set(GateKey(round), kGateOpen));
  }
  StatusOr<std::string> gate =
      rendezvous_->Get(GateKey(round), config_.round_timeout);
  if (!gate.ok()) {
    return gate.status().WithContext("waiting for the other members of round " +
                                     std::to_string(round));
  }
  if (*gate != kGateOpen) {
    return Aborted("round " + std::to_string(round) +
                   " was abandoned: " + *gate);
  }
  return Status::Ok();
}

Status ElasticWorker::ReportBroken(int64_t round) {
  return rendezvous_->Add(RoundBrokenKey(round), 1).status();
}

}  // namespace kolo::elastic
