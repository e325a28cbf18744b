#include "node.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "hosts.h"
#include "job.h"
#include "kolo_internal/config.h"
#include "kolo_internal/net.h"
#include "kolo_internal/store.h"
#include "launcher.h"
#include "metrics_service.h"
#include "output.h"

namespace kolo {
namespace kolorun {
namespace {

// The address this node's ranks listen on for Gloo.
StatusOr<std::string> NodeAddress(const LaunchOptions& options,
                                  const std::string& rendezvous_host) {
  if (options.network_interface.empty()) {
    KOLO_ASSIGN_OR_RETURN(InterfaceAddress route, RouteTo(rendezvous_host));
    return route.address;
  }
  KOLO_ASSIGN_OR_RETURN(
      InterfaceSpec spec,
      InterfaceSpec::Parse(options.network_interface, "--network-interface"));
  KOLO_ASSIGN_OR_RETURN(std::vector<InterfaceAddress> all,
                        ListInterfaceAddresses());
  for (const InterfaceAddress& candidate :
       CandidateAddresses(all, spec, /*allow_loopback=*/true)) {
    if (candidate.address.find(':') == std::string::npos)
      return candidate.address;
  }
  return InvalidArgument(
      "no interface of this node that is up matches "
      "--network-interface " +
      options.network_interface);
}

}  // namespace

StatusOr<std::string> ReadJobSecret(
    const std::string& secret_file,
    const std::optional<std::string>& from_env) {
  std::string secret;
  if (!secret_file.empty()) {
    std::ifstream file(secret_file);
    if (!file) {
      return InvalidArgument("--secret-file " + secret_file +
                             " cannot be read");
    }
    std::getline(file, secret);
    while (!secret.empty() && (secret.back() == '\r' || secret.back() == ' '))
      secret.pop_back();
    KOLO_RETURN_IF_ERROR(CheckJobSecret(
        secret, "the first line of --secret-file " + secret_file));
    return secret;
  }
  if (from_env) {
    KOLO_RETURN_IF_ERROR(CheckJobSecret(
        *from_env, std::string("environment variable ") + kJobSecretVariable));
    return *from_env;
  }
  return InvalidArgument(
      std::string("per-node mode needs the job secret every node shares: "
                  "--secret-file F or ") +
      kJobSecretVariable);
}

namespace {

// Before any rank starts: whether the store answers, and takes this node's
// secret (a rank would only say KOLO_STORE_SECRET, which the user never set
// here). Says why not.
bool StoreTakesOurSecret(const LaunchOptions& options, const std::string& host,
                         int port, const std::string& secret) {
  StatusOr<std::unique_ptr<TcpStoreClient>> check =
      TcpStoreClient::Connect(host, port, secret, /*rank=*/-1,
                              std::chrono::seconds(options.timeout_seconds));
  if (!check.ok()) {
    const bool refused = check.status().code() == StatusCode::kUnauthenticated;
    Say("node " + std::to_string(options.node_rank) + ": " +
        (refused ? "the store at " + options.rendezvous +
                       " refused this node's job secret (--secret-file or " +
                       kJobSecretVariable + " must be the same on every node)"
                 : "cannot reach the store at " + options.rendezvous +
                       " (--rendezvous): " + check.status().message()));
    return false;
  }
  (void)(*check)->Close();
  return true;
}

// This node's ranks, the same block on every node.
HostRanks NodeRanks(const LaunchOptions& options) {
  HostRanks ranks;
  ranks.host = "node " + std::to_string(options.node_rank) + " (" +
               ThisHostName("?") + ")";
  ranks.first_rank = options.node_rank * options.np_per_node;
  ranks.local_size = options.np_per_node;
  ranks.size = options.num_ranks;
  ranks.cross_rank = options.node_rank;
  ranks.cross_size = options.nnodes;
  return ranks;
}

// After this node's ranks succeeded: the other nodes' ranks may still be
// leaving, and the store node 0 hosts must stay until they have, or their
// goodbye would fail. Bounded by the timeout. (After a failure it closes at
// once, which tells them sooner.)
void WaitForOtherNodes(const LaunchOptions& options, TcpStoreServer* server) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(options.timeout_seconds);
  while (server->connected_ranks() > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int RunNode(const LaunchOptions& options, SignalWatcher* signals) {
  StatusOr<std::string> secret = ReadJobSecret(
      options.secret_file, ProcessEnvironment()(kJobSecretVariable));
  if (!secret.ok()) {
    Say(secret.status().message());
    return kUsageExitCode;
  }
  std::string host;
  int port = 0;
  (void)ParseHostPortInto(options.rendezvous, &host, &port);  // checked
  StatusOr<std::string> address = NodeAddress(options, host);
  if (!address.ok()) {
    Say("node " + std::to_string(options.node_rank) + ": " +
        address.status().message() + " (--rendezvous " + options.rendezvous +
        ")");
    return 1;
  }

  std::unique_ptr<TcpStoreServer> server;
  if (options.node_rank == 0) {
    StatusOr<std::unique_ptr<TcpStoreServer>> started =
        TcpStoreServer::Start(host, port, *secret);
    if (!started.ok()) {
      Say("node 0 cannot host the store at " + options.rendezvous + ": " +
          started.status().ToString());
      return 1;
    }
    server = std::move(started).value();
  }
  if (!StoreTakesOurSecret(options, host, port, *secret)) {
    if (server) server->Stop();
    return 1;
  }

  StoreInfo store;
  store.address = options.rendezvous;
  store.secret = *secret;

  const std::optional<std::string> user_host_id =
      ProcessEnvironment()(env::kHostId);
  const std::string host_id = user_host_id && !user_host_id->empty()
                                  ? *user_host_id
                                  : "node" + std::to_string(options.node_rank);
  const HostRanks ranks = NodeRanks(options);
  EnvList settings = JobSettings(options, store);
  settings.insert(settings.begin(),
                  {{env::kHostId, host_id}, {env::kGlooHostname, *address}});
  Say("node " + std::to_string(options.node_rank) + " of " +
      std::to_string(options.nnodes) + ": ranks " +
      std::to_string(ranks.first_rank) + " to " +
      std::to_string(ranks.first_rank + ranks.local_size - 1) + " on " +
      *address + "; store at " + options.rendezvous +
      (server ? " (hosted here)" : ""));

  StatusOr<std::string> program = FindExecutable(options.command[0]);
  if (!program.ok()) {
    Say(program.status().message());
    return 127;
  }
  LauncherOptions launcher_options;
  launcher_options.verbose = options.verbose;
  std::vector<std::string> base_env = CurrentEnvironment();
  std::unique_ptr<MetricsService> metrics;
  if (options.metrics_port) {
    StatusOr<std::unique_ptr<MetricsService>> started = StartHostMetrics(
        *options.metrics_port, MetricsAddress(options, *address),
        JobName(options), host_id, &base_env, &launcher_options);
    if (!started.ok()) {
      Say(started.status().message());
      return 1;
    }
    metrics = *std::move(started);
  }
  std::vector<ProcessSpec> specs = BuildHostRanks(
      ranks, *program, options.command, settings, base_env,
      CoreBlocks(UsableCores(), ranks.local_size, options.bind_to));
  Launcher launcher(launcher_options, signals);
  int exit_code = launcher.Run(specs);
  if (server && exit_code == 0) WaitForOtherNodes(options, server.get());
  if (server) server->Stop();
  return exit_code;
}

}  // namespace kolorun
}  // namespace kolo
