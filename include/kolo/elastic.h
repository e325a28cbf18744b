// Elastic training: a job whose workers may die, freeze or be added while
// it trains, and which carries on in the surviving processes.
//
//   kolo::elastic::State state;
//   int64_t step = 0;
//   state.Track("step", &step);
//   state.OnReset([&] {
//     std::printf("%d workers now\n", kolo::Size());  // re-shard the data here
//     return kolo::Status::Ok();
//   });
//   kolo::Status done = kolo::elastic::Run(state, [&]() -> kolo::Status {
//     for (; step < 1000; ++step) {
//       KOLO_RETURN_IF_ERROR(kolo::Allreduce(grad, grad, n,
//                                            kolo::DataType::kFloat32,
//                                            kolo::ReduceOp::kAverage));
//       if (step % 10 == 9) KOLO_RETURN_IF_ERROR(state.Commit());
//     }
//     return kolo::Status::Ok();
//   });
//
// Run() joins the job (it calls kolo::Init itself) and calls the training
// function. When a collective fails because a peer died or froze, the
// function returns that error; Run() then restores the last commit, leaves
// the broken world (kolo::Shutdown), joins the next rendezvous round with
// the survivors and any new workers, broadcasts rank 0's state to all of
// them (Sync), calls the reset callbacks and calls the function again. A
// worker that is added, or a host that is removed, is noticed at a commit:
// every rank checks the news and the ranks agree in one allreduce, so all
// of them leave at the same commit (Commit returns kMembershipChanged, which
// the function returns too) and nobody applies a step the others did not.
//
// Who decides the rounds: `kolorun --elastic` (tools/kolorun/elastic.h)
// hosts the store, starts and watches the workers, evicts a frozen one
// (its heartbeat stops) and publishes each round's members. A worker that
// is not started by it cannot run elastically: Run() says so.
//
// A State holds what must survive a reset. The core State tracks plain
// fields and byte blobs; kolo/torch_elastic.h adds a model's parameters and
// buffers and an optimizer's state. Commit() copies them in memory, which
// is cheap enough for every few steps; a program that must also survive
// the loss of every worker writes its own checkpoint to disk as well.
//
// Thread-safety: one training thread calls Run, Commit and the rest. Run
// starts one heartbeat thread (src/elastic/worker.h), which beats until
// Run fails or, after a success, until the process exits: the driver ends
// the job when a member exits, and takes one that stops beating for frozen.
#ifndef KOLO_ELASTIC_H_
#define KOLO_ELASTIC_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo::elastic {

// What a State saves of one field: the bytes that stand for its value now,
// and how to put such bytes back.
struct Field {
  std::string name;
  std::function<StatusOr<std::string>()> save;
  std::function<Status(const std::string&)> load;
};

class State {
 public:
  State();
  virtual ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Tracks a variable the training function reads and writes; it must
  // outlive the State.
  void Track(const std::string& name, int64_t* value);
  void Track(const std::string& name, double* value);
  void Track(const std::string& name, std::string* bytes);
  // Any other value, through its own save and load.
  void Track(Field field);

  // Called after every reset, once the state is synced, in the order
  // registered: rescale the learning rate, re-shard the data. An error
  // ends Run() with it.
  void OnReset(std::function<Status()> callback);

  // Saves every field in memory, then asks the job whether its membership
  // is about to change; every rank must call it at the same step. Returns
  // kMembershipChanged on every rank when a worker is waiting to join or
  // one is being removed (the training function returns it to Run), or the
  // error of the agreement's collective.
  Status Commit();
  // Commit's second half alone: asks the job whether its membership is
  // about to change, without saving (Horovod's check_host_updates). The
  // same collective and results as Commit.
  Status CheckMembership();
  // Saves every field in memory without asking anything (no collective).
  Status Save();
  // Puts the last saved values back.
  Status Restore();
  // Makes every rank's fields equal to rank 0's (a collective).
  Status Sync();

  // Commits so far in this process, and resets survived.
  int64_t commits() const { return commits_; }
  int32_t resets() const { return resets_; }

 private:
  friend Status Run(State& state, const std::function<Status()>& train);
  Status RunResetCallbacks();

  std::vector<Field> fields_;
  std::vector<std::string> saved_;  // one per field, from the last Save
  bool has_saved_ = false;
  std::vector<std::function<Status()>> reset_callbacks_;
  int64_t commits_ = 0;
  int32_t resets_ = 0;
};

// Runs `train` in an elastic job started by `kolorun --elastic`, through
// resets, until it returns ok (then ok) or an error that is not a lost peer
// or a membership change (then that error). Also ends with an error when
// this worker is removed from the job, when no round that includes it comes
// within the elastic timeout, or when kolorun is gone.
Status Run(State& state, const std::function<Status()>& train);

// Whether this process was started by `kolorun --elastic`.
bool IsElasticWorker();

}  // namespace kolo::elastic

#endif  // KOLO_ELASTIC_H_
