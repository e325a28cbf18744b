// The worker's side of the parameter server (push gradients, pull values),
// the roles and the start; the server's loop is in server.cc. The protocol
// is described in kolo/torch_parameter_server.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "kolo/kolo.h"
#include "kolo/process_role.h"
#include "torch/parameter_server/parameter_server_internal.h"

namespace kolo::torch {
namespace {

using Clock = std::chrono::steady_clock;
using Impl = internal::ParameterServerState;

// The servers: the options' list, else kolorun's --servers (the last K
// ranks), else the last options.server_count ranks.
StatusOr<std::vector<int32_t>> ResolveServers(
    const ParameterServerOptions& options, int32_t rank, int32_t size) {
  std::vector<int32_t> servers = options.servers;
  if (servers.empty()) {
    KOLO_ASSIGN_OR_RETURN(RoleInfo role, Role());
    const int32_t count =
        role.server_count > 0 ? role.server_count : options.server_count;
    if (count < 1 || count >= size) {
      return InvalidArgument(
          "parameter server: " + std::to_string(count) +
          " servers in a world of " + std::to_string(size) +
          " leaves no worker (or no server); start the job with kolorun -np "
          "N --servers K or set ParameterServerOptions::server_count");
    }
    for (int32_t r = size - count; r < size; ++r) servers.push_back(r);
    const bool told_server = role.role == ProcessRole::kServer;
    if (role.server_count > 0 && told_server != (rank >= size - count)) {
      return InvalidArgument(
          "parameter server: KOLO_ROLE says rank " + std::to_string(rank) +
          " is a " + (told_server ? "server" : "worker") +
          " but with KOLO_SERVERS=" + std::to_string(count) + " of " +
          std::to_string(size) + " ranks the servers are ranks " +
          std::to_string(size - count) + ".." + std::to_string(size - 1));
    }
    return servers;
  }
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers[i] < 0 || servers[i] >= size ||
        (i > 0 && servers[i] <= servers[i - 1])) {
      return InvalidArgument(
          "ParameterServerOptions::servers must be sorted, distinct world "
          "ranks below " +
          std::to_string(size) + "; entry " + std::to_string(i) + " is " +
          std::to_string(servers[i]));
    }
  }
  if (static_cast<int32_t>(servers.size()) >= size) {
    return InvalidArgument("ParameterServerOptions::servers names all " +
                           std::to_string(size) + " ranks: no worker is left");
  }
  return servers;
}

}  // namespace

StatusOr<std::vector<int32_t>> ParameterServerRanks(
    const ParameterServerOptions& options) {
  return ResolveServers(options, kolo::Rank(), kolo::Size());
}

// The transfers of one round with the servers, waited for together so that
// every server's traffic overlaps.
class internal::PullRound {
 public:
  explicit PullRound(const Impl& impl) : impl_(impl) {}

  Status Send(int32_t server, const void* data, int64_t count, DataType type,
              int32_t tag, std::string what) {
    StatusOr<Request> request =
        Isend(data, count, type, impl_.servers[server], tag);
    return Add(server, std::move(request), std::move(what));
  }
  Status Receive(int32_t server, void* data, int64_t count, DataType type,
                 int32_t tag, std::string what) {
    StatusOr<Request> request =
        Irecv(data, count, type, impl_.servers[server], tag);
    return Add(server, std::move(request), std::move(what));
  }
  // Waits for every transfer; the first failure, named by server and what
  // was moving. The others are still waited for, so no buffer is released
  // while a transfer may touch it.
  Status Wait() {
    Status first;
    for (Pending& pending : pending_) {
      Status status = pending.request.Wait();
      if (!status.ok() && first.ok()) {
        first = status.WithContext(impl_.DescribeServer(pending.server) + ", " +
                                   pending.what);
      }
    }
    pending_.clear();
    return first;
  }

 private:
  struct Pending {
    int32_t server;
    Request request;
    std::string what;
  };
  Status Add(int32_t server, StatusOr<Request> request, std::string what) {
    if (!request.ok()) {
      return request.status().WithContext(impl_.DescribeServer(server) + ", " +
                                          what);
    }
    pending_.push_back({server, std::move(request).value(), std::move(what)});
    return Status::Ok();
  }

  const Impl& impl_;
  std::vector<Pending> pending_;
};

namespace {
using Round = internal::PullRound;

std::string ShardText(const ParameterShard& shard) {
  return shard.name + "[" + std::to_string(shard.offset) + ", " +
         std::to_string(shard.offset + shard.count) + ")";
}

}  // namespace

std::string Impl::DescribeServer(int32_t server) const {
  std::string text = "parameter server rank " +
                     std::to_string(servers[server]) + " (server " +
                     std::to_string(server) + " of " +
                     std::to_string(servers.size()) + ", holding ";
  const std::vector<ParameterShard>& shards = placement[server];
  if (shards.empty()) text += "no shard";
  constexpr size_t kNamed = 4;
  for (size_t i = 0; i < shards.size() && i < kNamed; ++i) {
    text += (i > 0 ? ", " : "") + ShardText(shards[i]);
  }
  if (shards.size() > kNamed) {
    text += " and " + std::to_string(shards.size() - kNamed) + " more";
  }
  return text + ")";
}

std::string Impl::DescribeWorker(int32_t worker) const {
  return "worker rank " + std::to_string(workers[worker]) + " (worker " +
         std::to_string(worker) + " of " + std::to_string(workers.size()) + ")";
}

::torch::Tensor Impl::Slice(const ::torch::Tensor& tensor,
                            const ParameterShard& shard) const {
  const ::torch::Tensor& parameter = parameters[shard.parameter].tensor;
  if (!tensor.defined()) {
    return ::torch::zeros({shard.count}, parameter.options());
  }
  return tensor.detach()
      .reshape({-1})
      .narrow(0, shard.offset, shard.count)
      .to(parameter.scalar_type())
      .contiguous()
      .clone();
}

int64_t Impl::Bytes(const ParameterShard& shard) const {
  return shard.count * DataTypeSize(parameters[shard.parameter].type);
}

StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(
    const ::torch::OrderedDict<std::string, ::torch::Tensor>& named_parameters,
    ParameterServerOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.staleness < 0) {
    return InvalidArgument(
        "ParameterServerOptions::staleness must be >= 0, got " +
        std::to_string(options.staleness));
  }
  if (options.shard_threshold_elements < 1) {
    return InvalidArgument(
        "ParameterServerOptions::shard_threshold_elements must be >= 1, got " +
        std::to_string(options.shard_threshold_elements));
  }
  impl->options = options;
  impl->rank = kolo::Rank();
  const int32_t size = kolo::Size();
  KOLO_ASSIGN_OR_RETURN(impl->servers,
                        ResolveServers(options, impl->rank, size));
  for (int32_t r = 0; r < size; ++r) {
    auto at = std::find(impl->servers.begin(), impl->servers.end(), r);
    if (at != impl->servers.end()) {
      if (r == impl->rank) {
        impl->is_server = true;
        impl->role_index = static_cast<int32_t>(at - impl->servers.begin());
      }
    } else {
      if (r == impl->rank) {
        impl->role_index = static_cast<int32_t>(impl->workers.size());
      }
      impl->workers.push_back(r);
    }
  }

  std::vector<std::string> names;
  std::vector<int64_t> numels;
  for (const auto& item : named_parameters) {
    const ::torch::Tensor& tensor = item.value();
    if (!tensor.requires_grad()) continue;
    const std::string shape = c10::str(tensor.sizes());
    if (!tensor.is_floating_point() || !tensor.device().is_cpu() ||
        !tensor.is_contiguous()) {
      return InvalidArgument("parameter server: parameter " + item.key() +
                             " (" + c10::toString(tensor.scalar_type()) + " " +
                             shape +
                             ") must be a contiguous floating-point CPU "
                             "tensor");
    }
    KOLO_ASSIGN_OR_RETURN(DataType type, ToDataType(tensor.scalar_type()));
    impl->parameters.push_back({item.key(), tensor, type});
    names.push_back(item.key());
    numels.push_back(tensor.numel());
  }
  impl->placement =
      PlaceParameters(names, numels, static_cast<int32_t>(impl->servers.size()),
                      options.shard_threshold_elements);

  std::unique_ptr<ParameterServer> server(new ParameterServer(std::move(impl)));
  if (server->impl_->is_server) {
    KOLO_RETURN_IF_ERROR(server->impl_->PrepareServer());
    KOLO_RETURN_IF_ERROR(Barrier().WithContext(
        "parameter server start: barrier before worker 0 sends its values"));
  } else {
    KOLO_RETURN_IF_ERROR(server->Start());
  }
  return server;
}

ParameterServer::ParameterServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
ParameterServer::~ParameterServer() = default;

bool ParameterServer::IsServer() const { return impl_->is_server; }
const std::vector<int32_t>& ParameterServer::servers() const {
  return impl_->servers;
}
const std::vector<int32_t>& ParameterServer::workers() const {
  return impl_->workers;
}
int32_t ParameterServer::role_index() const { return impl_->role_index; }
const ParameterServerOptions& ParameterServer::options() const {
  return impl_->options;
}
const std::vector<std::vector<ParameterShard>>& ParameterServer::placement()
    const {
  return impl_->placement;
}
ParameterServerStatistics ParameterServer::statistics() const {
  return impl_->statistics;
}

// Every worker posts its receives of the servers' values; after the barrier
// (servers posted theirs of worker 0's values) worker 0 sends its values.
Status ParameterServer::Start() {
  Impl& impl = *impl_;
  Round round(impl);
  std::vector<std::vector<int64_t>> replies;
  std::vector<std::vector<::torch::Tensor>> values;
  KOLO_RETURN_IF_ERROR(
      PostPull(round, "the initial values", &replies, &values));
  KOLO_RETURN_IF_ERROR(Barrier().WithContext(
      "parameter server start: barrier before worker 0 sends its values"));
  std::vector<::torch::Tensor> keep;
  std::vector<int64_t> header = {ps_wire::kInit, 0, 0, 0};
  if (impl.role_index == 0) {
    for (int32_t s = 0; s < static_cast<int32_t>(impl.servers.size()); ++s) {
      KOLO_RETURN_IF_ERROR(round.Send(s, header.data(), ps_wire::kHeaderWords,
                                      DataType::kInt64, ps_wire::kRequestTag,
                                      "sending the initial values"));
      for (const ParameterShard& shard : impl.placement[s]) {
        keep.push_back(
            impl.Slice(impl.parameters[shard.parameter].tensor, shard));
        KOLO_RETURN_IF_ERROR(round.Send(
            s, keep.back().data_ptr(), shard.count,
            impl.parameters[shard.parameter].type, ps_wire::kGradientTag,
            "sending the initial values of " + ShardText(shard)));
        impl.statistics.bytes_sent += impl.Bytes(shard);
      }
    }
  }
  return FinishPull(round, "the initial values", replies, values);
}

Status ParameterServer::Step() {
  Impl& impl = *impl_;
  if (impl.is_server) {
    return FailedPrecondition("ParameterServer::Step on rank " +
                              std::to_string(impl.rank) +
                              ", a server: servers call Serve()");
  }
  if (impl.finished) {
    return FailedPrecondition("ParameterServer::Step on worker rank " +
                              std::to_string(impl.rank) + " after Finish()");
  }
  const std::string step_text = "step " + std::to_string(impl.statistics.steps);
  Round round(impl);
  std::vector<std::vector<int64_t>> replies;
  std::vector<std::vector<::torch::Tensor>> values;
  // The answer's receives first: a server answers as soon as it has the
  // push.
  KOLO_RETURN_IF_ERROR(PostPull(round, step_text, &replies, &values));
  std::vector<::torch::Tensor> gradients;
  int64_t rate_bits = 0;
  static_assert(sizeof(rate_bits) == sizeof(impl.learning_rate));
  std::memcpy(&rate_bits, &impl.learning_rate, sizeof(rate_bits));
  std::vector<int64_t> header = {ps_wire::kPush, impl.statistics.steps, 0,
                                 rate_bits};
  for (int32_t s = 0; s < static_cast<int32_t>(impl.servers.size()); ++s) {
    KOLO_RETURN_IF_ERROR(round.Send(s, header.data(), ps_wire::kHeaderWords,
                                    DataType::kInt64, ps_wire::kRequestTag,
                                    "pushing " + step_text));
    for (const ParameterShard& shard : impl.placement[s]) {
      gradients.push_back(
          impl.Slice(impl.parameters[shard.parameter].tensor.grad(), shard));
      KOLO_RETURN_IF_ERROR(round.Send(
          s, gradients.back().data_ptr(), shard.count,
          impl.parameters[shard.parameter].type, ps_wire::kGradientTag,
          "pushing the gradient of " + ShardText(shard) + " (" + step_text +
              ")"));
      impl.statistics.bytes_sent += impl.Bytes(shard);
    }
  }
  KOLO_RETURN_IF_ERROR(FinishPull(round, step_text, replies, values));
  ++impl.statistics.steps;
  return Status::Ok();
}

// Posts, for every server, the receives of its reply header and its shards.
Status ParameterServer::PostPull(
    Round& round, const std::string& what,
    std::vector<std::vector<int64_t>>* replies,
    std::vector<std::vector<::torch::Tensor>>* values) {
  Impl& impl = *impl_;
  const int32_t server_count = static_cast<int32_t>(impl.servers.size());
  replies->assign(server_count, std::vector<int64_t>(ps_wire::kHeaderWords, 0));
  values->assign(server_count, {});
  for (int32_t s = 0; s < server_count; ++s) {
    KOLO_RETURN_IF_ERROR(round.Receive(
        s, (*replies)[s].data(), ps_wire::kHeaderWords, DataType::kInt64,
        ps_wire::kReplyTag, "pulling the parameters (" + what + ")"));
    for (const ParameterShard& shard : impl.placement[s]) {
      const Impl::Parameter& parameter = impl.parameters[shard.parameter];
      (*values)[s].push_back(
          ::torch::empty({shard.count}, parameter.tensor.options()));
      KOLO_RETURN_IF_ERROR(
          round.Receive(s, (*values)[s].back().data_ptr(), shard.count,
                        parameter.type, ps_wire::kValueTag,
                        "pulling " + ShardText(shard) + " (" + what + ")"));
    }
  }
  return Status::Ok();
}

// Waits for the round and writes the pulled shards into the model.
Status ParameterServer::FinishPull(
    Round& round, const std::string& what,
    const std::vector<std::vector<int64_t>>& replies,
    const std::vector<std::vector<::torch::Tensor>>& values) {
  Impl& impl = *impl_;
  const Clock::time_point start = Clock::now();
  Status waited = round.Wait();
  impl.statistics.wait_seconds +=
      std::chrono::duration<double>(Clock::now() - start).count();
  KOLO_RETURN_IF_ERROR(waited);

  ::torch::NoGradGuard no_grad;
  for (int32_t s = 0; s < static_cast<int32_t>(impl.servers.size()); ++s) {
    if (replies[s][0] != ps_wire::kReply) {
      return Internal(impl.DescribeServer(s) + " answered " + what +
                      " with message kind " + std::to_string(replies[s][0]) +
                      ", not a reply");
    }
    impl.statistics.max_staleness =
        std::max(impl.statistics.max_staleness, replies[s][2]);
    for (size_t i = 0; i < impl.placement[s].size(); ++i) {
      const ParameterShard& shard = impl.placement[s][i];
      impl.parameters[shard.parameter]
          .tensor.detach()
          .view({-1})
          .narrow(0, shard.offset, shard.count)
          .copy_(values[s][i]);
      impl.statistics.bytes_received += impl.Bytes(shard);
    }
  }
  return Status::Ok();
}

void ParameterServer::SetLearningRate(double lr) { impl_->learning_rate = lr; }

void ParameterServer::ZeroGrad() {
  for (Impl::Parameter& parameter : impl_->parameters) {
    ::torch::Tensor& grad = parameter.tensor.mutable_grad();
    if (grad.defined()) {
      grad = grad.detach();
      grad.zero_();
    }
  }
}

Status ParameterServer::Finish() {
  Impl& impl = *impl_;
  if (impl.is_server || impl.finished) return Status::Ok();
  impl.finished = true;
  Round round(impl);
  std::vector<int64_t> header = {ps_wire::kFinish, impl.statistics.steps, 0, 0};
  for (int32_t s = 0; s < static_cast<int32_t>(impl.servers.size()); ++s) {
    KOLO_RETURN_IF_ERROR(round.Send(s, header.data(), ps_wire::kHeaderWords,
                                    DataType::kInt64, ps_wire::kRequestTag,
                                    "finishing"));
  }
  return round.Wait();
}

Status ParameterServer::Serve() {
  if (!impl_->is_server) {
    return FailedPrecondition("ParameterServer::Serve on rank " +
                              std::to_string(impl_->rank) +
                              ", a worker: workers call Step()");
  }
  return impl_->Serve();
}

}  // namespace kolo::torch
