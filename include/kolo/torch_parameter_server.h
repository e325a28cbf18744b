// ParameterServer: training where some ranks (servers) hold the parameters
// and step the optimizer, and the others (workers) compute gradients, push
// them to the servers and pull back the updated parameters (Li et al. 2014,
// "Scaling Distributed Machine Learning with the Parameter Server"; Ho et
// al. 2013, "More Effective Distributed ML via a Stale Synchronous Parallel
// Parameter Server").
//
//   // kolorun -np 4 --servers 2 ./train: ranks 0..3 work, 4 and 5 serve.
//   kolo::Init();
//   auto model = std::make_shared<Net>();         // on every rank, alike
//   kolo::torch::ParameterServerOptions options;  // roles from kolorun
//   options.mode = kolo::torch::ParameterServerMode::kSynchronous;
//   options.optimizer.lr = 0.1;
//   KOLO_ASSIGN_OR_RETURN(auto ps, kolo::torch::ParameterServer::Create(
//                                      model->named_parameters(), options));
//   if (ps->IsServer()) return ps->Serve();       // until every worker ends
//   for (auto& batch : shard) {
//     ps->ZeroGrad();
//     loss_fn(model->forward(batch.data), batch.target).backward();
//     KOLO_RETURN_IF_ERROR(ps->Step());  // push gradients, pull parameters
//   }
//   KOLO_RETURN_IF_ERROR(ps->Finish());
//
// Roles. The servers are options.servers when given; else the ranks kolorun
// --servers K marked as servers (the last K, see kolo/process_role.h); else
// the last options.server_count ranks. Every other rank is a worker. Every
// rank builds the same model and passes the same named parameters and
// options (the placement below is computed, not negotiated).
//
// Placement. Parameters that require gradients, in the order given, are cut
// into shards. A tensor of at least shard_threshold_elements elements is
// split into one slice per server (server i holds elements [i·n/K, (i+1)·n/K)
// of the flattened tensor, so slices differ by at most one element), which
// spreads a large embedding or weight over every server's bandwidth; a
// smaller tensor goes whole to server Fnv1a64(name) mod K, which is the same
// on every rank and in every run, and spreads many small tensors without
// sending a tiny slice of each to every server. With the default threshold
// of 65,536 elements (256 KiB of float32), a bias or a small layer travels
// as one message and a layer of 256x256 or more is split.
//
// The protocol. Each message between a worker and a server carries one tag
// of a range reserved for the parameter server (kParameterServerTagBase
// onwards), so the job's other point-to-point traffic passes it by.
// Every receive is posted before its message can be sent (a worker posts
// its pull before it pushes, a server reposts a worker's receives before it
// answers), so no message ever waits at its receiver unmatched.
//  start: every rank posts its receives, the world meets in a kolo::Barrier,
//  and worker 0 sends each server the initial values of its shards; each
//  server then sends every worker its shards, so all ranks start from
//  worker 0's parameters (Create returns on a worker once it holds them).
//  Step(): for every server at once, the worker posts a header (push, step
//  t), the gradient of each of that server's shards, and the receives for
//  the answer: a reply header and the updated shards. It then waits for
//  all of them and writes the shards into the model's parameters. Every
//  worker talks to every server each step, even one that holds no shard,
//  so a server's count of each worker's steps is exact.
//  Serve(): the server polls one header receive per worker; when a push
//  arrives it takes the gradients and, by mode,
//  kSynchronous: adds them to the step's sum; once every worker that has
//  not finished pushed step t, divides by their number, steps its
//  optimizer once and answers all of them. With the same workers and
//  batches this is data parallelism with an allreduce average and the
//  same optimizer, to float rounding.
//  kAsynchronous: steps the optimizer with this worker's gradient alone
//  and answers it with the current parameters at once (Hogwild-style
//  on the server: updates are applied one at a time, in arrival
//  order). The gradient was computed on values that are `lag` updates
//  old (the updates the server applied since it sent them), so the
//  step takes the learning rate divided by max(1, lag), after Zhang et
//  al. 2016, "Staleness-aware Async-SGD": undivided, four workers'
//  stale gradients with momentum 0.9 made lenet diverge.
//  kBoundedStaleness: steps as kAsynchronous, but answers a worker that
//  has now pushed c steps only once c - (the fewest steps any
//  unfinished worker has pushed) <= staleness; until then its pull is
//  held, so the worker waits in Step(). The difference at the moment a
//  pull is answered is the staleness recorded (statistics). Staleness
//  0 is bulk-synchronous.
//  Finish(): the worker sends each server a finish header. A server's
//  Serve() returns once every worker finished; a finished worker no
//  longer counts for a synchronous step or the slowest clock.
//
// Failures. Every transfer is bounded by the job's timeout (KOLO_TIMEOUT_S).
// A server that dies fails every worker's next Step() with kPeerFailure
// naming the server's rank, its index among the servers and the shards it
// held. A worker that dies fails Serve() on every server with kPeerFailure
// naming the worker's rank, in every mode: carrying on without it in
// asynchronous mode would hide a crash behind a job that still "trains".
// A server with no message from any worker for options.idle_timeout fails
// with kTimeout naming the workers it waits for.
//
// Thread-safety: one thread uses a ParameterServer. Every rank of the world
// must create one (with equal parameters and options) before any transfers.
#ifndef KOLO_TORCH_PARAMETER_SERVER_H_
#define KOLO_TORCH_PARAMETER_SERVER_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kolo/process_role.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "kolo/torch_zero.h"
#include "kolo/training_config.h"

namespace kolo::torch {

enum class ParameterServerMode {
  kSynchronous,       // one averaged update per step over all workers
  kAsynchronous,      // each worker's gradient applied as it comes
  kBoundedStaleness,  // asynchronous, no worker more than s steps ahead
};

// "sync", "async", "ssp" (also "synchronous", "asynchronous",
// "bounded_staleness", without regard to case).
StatusOr<ParameterServerMode> ParseParameterServerMode(const std::string& text);
// "sync", "async" or "ssp".
const char* ParameterServerModeName(ParameterServerMode mode);

// Tags [kParameterServerTagBase, kParameterServerTagBase + 16) belong to the
// parameter server between its workers and servers.
inline constexpr int32_t kParameterServerTagBase = 0x2050'5300;

// SGD with lr 0.01, no momentum: the servers' optimizer unless told
// otherwise.
inline OptimizerConfig DefaultParameterServerOptimizer() {
  OptimizerConfig config;
  config.type = OptimizerType::kSgd;
  config.lr = 0.01;
  return config;
}

struct ParameterServerOptions {
  ParameterServerMode mode = ParameterServerMode::kSynchronous;
  // World ranks that serve, sorted, duplicate-free. Empty: kolorun's
  // --servers (KOLO_SERVERS), else the last server_count ranks.
  std::vector<int32_t> servers;
  int32_t server_count = 1;
  // kBoundedStaleness: how many steps a worker may be ahead of the slowest.
  int32_t staleness = 1;
  // The servers' optimizer, applied element by element to each shard: SGD
  // (lr, momentum, dampening, nesterov, weight_decay), Adam or AdamW
  // (kolo/training_config.h; built with MakeOptimizer, kolo/torch_zero.h).
  OptimizerConfig optimizer = DefaultParameterServerOptimizer();
  // Tensors with at least this many elements are split across all servers;
  // smaller ones are placed whole (see Placement above).
  int64_t shard_threshold_elements = int64_t{1} << 16;
  // A server with no message from any worker for this long fails.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
};

// One contiguous piece of one parameter, held by one server.
struct ParameterShard {
  std::string name;       // the parameter's name
  int32_t parameter = 0;  // index among the placed parameters
  int64_t offset = 0;     // first element of the flattened parameter
  int64_t count = 0;      // elements
  int32_t server = 0;     // index into the servers (not a world rank)
};

// The placement for parameters `names` with `numels` elements on
// `server_count` servers: for each server, its shards in parameter order.
// Pure; every rank computes the same. Tensors of 0 elements get no shard.
std::vector<std::vector<ParameterShard>> PlaceParameters(
    const std::vector<std::string>& names, const std::vector<int64_t>& numels,
    int32_t server_count, int64_t shard_threshold_elements);

// 64-bit FNV-1a of `text`: the placement's hash, stable across runs and
// platforms (std::hash is neither).
uint64_t Fnv1a64(const std::string& text);

// The world ranks that serve, sorted, as Create() resolves them (see
// Roles); every other rank is a worker. Errors as Create()'s.
StatusOr<std::vector<int32_t>> ParameterServerRanks(
    const ParameterServerOptions& options);

struct ParameterServerStatistics {
  // Worker: Step() calls completed. Server: optimizer steps taken.
  int64_t steps = 0;
  // Bounded staleness (and asynchronous, where nothing bounds it): the
  // most, over every pull answered, of the pulling worker's step count
  // minus the slowest unfinished worker's. A server counts its own pulls; a
  // worker the largest value its servers reported for its pulls.
  int64_t max_staleness = 0;
  // Server: pulls held back for the staleness bound.
  int64_t held_pulls = 0;
  // Servers, asynchronous modes: the most updates this server applied
  // between a worker's read of its values and that worker's next push.
  int64_t max_update_lag = 0;
  // Payload bytes this rank sent and received (gradients, parameters).
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // Worker: seconds Step() spent waiting for servers. Server: seconds
  // Serve() spent with nothing to do.
  double wait_seconds = 0;
};

namespace internal {
struct ParameterServerState;
class PullRound;
}  // namespace internal

class ParameterServer {
 public:
  // Collective over the world. Resolves the roles, places the shards, and
  // runs the start of the protocol on workers (servers start it in
  // Serve()). kInvalidArgument names the option or the parameter (a
  // non-floating or non-CPU parameter, a server rank outside the world, no
  // workers left); other errors as Step().
  static StatusOr<std::unique_ptr<ParameterServer>> Create(
      const ::torch::OrderedDict<std::string, ::torch::Tensor>&
          named_parameters,
      ParameterServerOptions options = {});
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  bool IsServer() const;
  // World ranks of the servers and of the workers, in order.
  const std::vector<int32_t>& servers() const;
  const std::vector<int32_t>& workers() const;
  // This rank's index among the servers or the workers.
  int32_t role_index() const;
  const ParameterServerOptions& options() const;
  // For each server, the shards it holds.
  const std::vector<std::vector<ParameterShard>>& placement() const;

  // Server only: answers workers until every one called Finish().
  Status Serve();

  // Worker only, after backward: pushes the gradients (parameters without
  // one push zeros), pulls the parameters and writes them into the model.
  Status Step();
  // Worker only: the learning rate this worker's next pushes ask the
  // servers to step with (options.optimizer.lr until set), so a schedule
  // (warm-up, decay) runs where the workers count steps. A synchronous
  // step takes the rate of the last push it averaged; an asynchronous one
  // its own push's, divided by its lag.
  void SetLearningRate(double lr);
  // Worker only: sets the model's gradients to zero (or leaves undefined
  // ones undefined).
  void ZeroGrad();
  // Worker only: tells every server this worker is done. Once is enough;
  // later calls return ok. The destructor does not call it: a worker that
  // ends without Finish() looks to the servers like one that died.
  Status Finish();

  ParameterServerStatistics statistics() const;

 private:
  using Impl = internal::ParameterServerState;
  explicit ParameterServer(std::unique_ptr<Impl> impl);
  Status Start();
  Status PostPull(internal::PullRound& round, const std::string& what,
                  std::vector<std::vector<int64_t>>* replies,
                  std::vector<std::vector<::torch::Tensor>>* values);
  Status FinishPull(internal::PullRound& round, const std::string& what,
                    const std::vector<std::vector<int64_t>>& replies,
                    const std::vector<std::vector<::torch::Tensor>>& values);

  std::unique_ptr<Impl> impl_;
};

}  // namespace kolo::torch

#endif  // KOLO_TORCH_PARAMETER_SERVER_H_
