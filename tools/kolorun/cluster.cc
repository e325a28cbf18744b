#include "cluster.h"

#include <errno.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent_link.h"
#include "agent_messages.h"
#include "hosts.h"
#include "job.h"
#include "kolo_internal/config.h"
#include "kolo_internal/net.h"
#include "kolo_internal/store.h"
#include "launcher.h"
#include "metrics_service.h"
#include "output.h"
#include "remote.h"

namespace kolo {
namespace kolorun {
namespace {

using Clock = std::chrono::steady_clock;

bool ReportProblems(const std::vector<AgentLink>& links) {
  bool any = false;
  for (const AgentLink& link : links) any = any || !link.problems.empty();
  if (!any) return false;
  std::string text = "the preflight failed; nothing was started:";
  for (const AgentLink& link : links) {
    for (const std::string& problem : link.problems)
      text += "\n  " + link.place.host + ": " + problem;
  }
  Say(text);
  return true;
}

// KOLO_* settings in kolorun's environment reach every rank, as they would
// on one host; those that describe one rank or one host do not.
EnvList ForwardedKoloSettings() {
  static const std::set<std::string> kPerRank = {
      env::kRank,      env::kSize,         env::kLocalRank,
      env::kLocalSize, env::kCrossRank,    env::kCrossSize,
      env::kStoreAddr, env::kStoreSecret,  env::kStoreHosted,
      env::kHostId,    env::kGlooHostname, kJobSecretVariable};
  EnvList settings;
  for (const std::string& var : CurrentEnvironment()) {
    size_t eq = var.find('=');
    if (eq == std::string::npos || var.rfind("KOLO_", 0) != 0) continue;
    std::string name = var.substr(0, eq);
    if (kPerRank.count(name) > 0) continue;
    settings.emplace_back(name, var.substr(eq + 1));
  }
  return settings;
}

// The address chosen for a host: Gloo's pairs listen there.
struct Choice {
  std::string interface;
  std::string address;
};

// An address of one host that the others, and the driver, probe.
struct Target {
  size_t host;  // its index in the links
  std::string address;
  int32_t port;
};

// Who could not reach an address, and why, by address.
using ProbeFailures = std::map<std::string, std::vector<std::string>>;

bool AnyProblem(const std::vector<AgentLink>& links) {
  return std::any_of(links.begin(), links.end(), [](const AgentLink& link) {
    return !link.problems.empty();
  });
}

// Every agent starts at once; each may take seconds to connect.
std::vector<AgentLink> StartAgents(const LaunchOptions& options,
                                   const std::vector<HostAssignment>& placed,
                                   const std::string& self,
                                   SignalWatcher* signals) {
  std::vector<AgentLink> links;
  for (const HostAssignment& place : placed) {
    AgentLink link = StartAgent(options, place.host, self, signals);
    link.place = place;
    links.push_back(std::move(link));
  }
  return links;
}

// Step 1: who is there, and what may each use. Returns false when kolorun
// was signalled.
bool AskPreflight(const LaunchOptions& options, Clock::time_point deadline,
                  SignalWatcher* signals, std::vector<AgentLink>* links) {
  const std::string request = SerializeMessage(PreflightRequestFor(options));
  std::vector<std::string> requests(links->size());
  for (size_t i = 0; i < links->size(); ++i) {
    if ((*links)[i].problems.empty()) requests[i] = request;
  }
  std::vector<std::optional<PreflightReply>> replies;
  if (!ExchangeTyped(links, requests, deadline, signals, &replies))
    return false;
  for (size_t i = 0; i < links->size(); ++i) {
    if (!replies[i]) continue;
    AgentLink& link = (*links)[i];
    link.preflight = *std::move(replies[i]);
    if (!link.preflight.error.empty())
      link.problems.push_back(link.preflight.error);
  }
  return true;
}

// How many hosts have each address: one on more than one host identifies
// none of them.
std::map<std::string, int> AddressHolders(const std::vector<AgentLink>& links) {
  std::map<std::string, int> holders;
  for (const AgentLink& link : links) {
    for (const AgentAddress& address : link.preflight.addresses)
      ++holders[address.address];
  }
  return holders;
}

std::vector<Target> ProbeTargets(const std::vector<AgentLink>& links,
                                 const std::map<std::string, int>& holders) {
  std::vector<Target> targets;
  for (size_t i = 0; i < links.size(); ++i) {
    for (const AgentAddress& address : links[i].preflight.addresses) {
      if (holders.at(address.address) > 1) continue;
      targets.push_back({i, address.address, address.port});
    }
  }
  return targets;
}

// Step 2: every host, and the driver, tries every other host's addresses,
// all at once. Returns false when kolorun was signalled.
bool ProbeAll(const std::vector<Target>& targets, Clock::time_point deadline,
              SignalWatcher* signals, std::vector<AgentLink>* links,
              ProbeFailures* failures) {
  ProbeRequest request;
  request.timeout_ms = std::max<int64_t>(
      100, std::min<int64_t>(
               5000, std::chrono::duration_cast<std::chrono::milliseconds>(
                         deadline - Clock::now())
                             .count() -
                         500));
  std::vector<std::string> requests(links->size());
  for (size_t i = 0; i < links->size(); ++i) {
    request.targets.clear();
    for (const Target& target : targets) {
      if (target.host == i) continue;
      request.targets.push_back(
          {(*links)[target.host].place.host, target.address, target.port});
    }
    requests[i] = SerializeMessage(request);
  }
  std::vector<std::string> driver_errors(targets.size());
  std::vector<std::thread> driver_probes;
  for (size_t t = 0; t < targets.size(); ++t) {
    driver_probes.emplace_back([&, t] {
      Status reached = ProbeTcp("", targets[t].address, targets[t].port,
                                std::chrono::milliseconds(request.timeout_ms));
      if (!reached.ok()) driver_errors[t] = reached.message();
    });
  }
  std::vector<std::optional<ProbeReply>> replies;
  const bool exchanged =
      ExchangeTyped(links, requests, deadline, signals, &replies);
  for (std::thread& probe : driver_probes) probe.join();
  if (!exchanged) return false;

  for (size_t i = 0; i < links->size(); ++i) {
    if (!replies[i]) continue;
    for (const ProbeResult& result : replies[i]->results) {
      if (result.error.empty()) continue;
      (*failures)[result.address].push_back(
          (*links)[i].place.host + " cannot reach it: " + result.error);
    }
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    if (driver_errors[t].empty()) continue;
    (*failures)[targets[t].address].push_back(
        "kolorun cannot reach it from here: " + driver_errors[t]);
  }
  return true;
}

// For each host, its first address that nobody failed to reach; a host
// without one gets a problem listing why each address is out.
std::vector<Choice> ChooseAddresses(const std::map<std::string, int>& holders,
                                    const ProbeFailures& failures,
                                    std::vector<AgentLink>* links) {
  std::vector<Choice> choices(links->size());
  for (size_t i = 0; i < links->size(); ++i) {
    std::vector<std::string> reasons;
    for (const AgentAddress& address : (*links)[i].preflight.addresses) {
      const std::string where = address.interface + " " + address.address;
      if (holders.at(address.address) > 1) {
        reasons.push_back(where + " is an address of another host too");
        continue;
      }
      auto failed = failures.find(address.address);
      if (failed == failures.end()) {
        choices[i] = {address.interface, address.address};
        break;
      }
      for (const std::string& why : failed->second)
        reasons.push_back(where + ": " + why);
    }
    if (choices[i].address.empty()) {
      std::string text = "no address that every host reaches";
      for (const std::string& reason : reasons) text += "; " + reason;
      (*links)[i].problems.push_back(text);
    }
  }
  return choices;
}

void SayChoice(const std::vector<AgentLink>& links,
               const std::vector<Choice>& choices,
               const InterfaceAddress& store_route, const StoreInfo& store) {
  std::string chosen;
  for (size_t i = 0; i < links.size(); ++i) {
    chosen += (i == 0 ? "" : ", ") + links[i].place.host + " " +
              choices[i].interface + " " + choices[i].address;
  }
  Say("network: " + chosen + "; store on " + store_route.interface + " " +
      store.address);
}

// Step 3: tells the agent of `link` its ranks and the job's settings;
// returns the agent as the Launcher supervises it.
ProcessSpec LaunchOn(const LaunchOptions& options, const AgentLink& link,
                     const Choice& choice, const EnvList& common,
                     int32_t cross_size) {
  const HostAssignment& place = link.place;
  LaunchRequest launch;
  launch.ranks.host = place.host;
  launch.ranks.first_rank = place.first_rank;
  launch.ranks.local_size = place.num_ranks;
  launch.ranks.size = options.num_ranks;
  launch.ranks.cross_rank = place.cross_rank;
  launch.ranks.cross_size = cross_size;
  launch.command = options.command;
  launch.settings = {{env::kHostId, place.host},
                     {env::kGlooHostname, choice.address}};
  launch.settings.insert(launch.settings.end(), common.begin(), common.end());
  launch.bind_to = options.bind_to;
  launch.verbose = options.verbose;
  if (options.metrics_port) {
    launch.metrics = LaunchMetrics{*options.metrics_port,
                                   MetricsAddress(options, choice.address),
                                   JobName(options)};
  }
  WriteAll(link.child.stdin_fd, SerializeMessage(launch) + "\n");

  ProcessSpec spec;
  spec.name = "the agent on " + place.host;
  spec.started = link.child;
  spec.format = LineFormat::kPrefix;  // the agent tags its ranks' lines
  // What its remote shell said before (a warning from ssh, say).
  if (!Trim(link.err).empty()) Say(place.host + ": " + Trim(link.err));
  // The buffered rest of its stdout is empty: it says nothing between
  // its probe answer and the launch.
  return spec;
}

// The preflight, the probes and the choice of addresses (cluster.h's
// "Choosing the addresses"), with the driver's route to the first host,
// where the store listens.
struct Network {
  std::vector<Choice> choices;
  InterfaceAddress store_route;
};

// Finds the network of the agents in `links` under `deadline`: 0, or the
// exit status to fail with (130: kolorun was signalled; 1: the problems
// are in `links`).
int FindNetwork(const LaunchOptions& options, Clock::time_point deadline,
                SignalWatcher* signals, std::vector<AgentLink>* links,
                Network* network) {
  if (!AskPreflight(options, deadline, signals, links)) return 130;
  if (AnyProblem(*links)) return 1;
  const std::map<std::string, int> holders = AddressHolders(*links);
  const std::vector<Target> targets = ProbeTargets(*links, holders);
  ProbeFailures failures;
  if (!ProbeAll(targets, deadline, signals, links, &failures)) return 130;
  network->choices = ChooseAddresses(holders, failures, links);
  if (AnyProblem(*links)) return 1;
  StatusOr<InterfaceAddress> store_route = RouteTo(network->choices[0].address);
  if (!store_route.ok()) {
    (*links)[0].problems.push_back("kolorun has no route to it: " +
                                   store_route.status().message());
    return 1;
  }
  network->store_route = *store_route;
  return 0;
}

}  // namespace

std::optional<std::string> FindStoreAddress(const LaunchOptions& options,
                                            SignalWatcher* signals,
                                            int* exit_code) {
  StatusOr<std::string> self = SelfPath();
  if (!self.ok()) {
    Say(self.status().message());
    *exit_code = 1;
    return std::nullopt;
  }
  std::vector<HostAssignment> hosts;
  for (const HostSlots& host : options.hosts) hosts.push_back({host.name});
  const auto deadline =
      Clock::now() + std::chrono::seconds(options.start_timeout_seconds);
  std::vector<AgentLink> links = StartAgents(options, hosts, *self, signals);
  Network network;
  *exit_code = FindNetwork(options, deadline, signals, &links, &network);
  if (*exit_code != 0) ReportProblems(links);
  StopAgents(&links);
  if (*exit_code != 0) return std::nullopt;
  return network.store_route.address;
}

int RunCluster(const LaunchOptions& options, SignalWatcher* signals) {
  StatusOr<std::vector<HostAssignment>> placed =
      PlaceRanks(options.hosts, options.num_ranks);
  if (!placed.ok()) {
    Say(placed.status().message());
    return kUsageExitCode;
  }
  StatusOr<std::string> self = SelfPath();
  // A new one per job, so that one job's workers cannot join another's
  // store.
  StatusOr<std::string> secret = NewJobSecret();
  if (!self.ok() || !secret.ok()) {
    Say((!self.ok() ? self.status() : secret.status()).message());
    return 1;
  }
  const auto deadline =
      Clock::now() + std::chrono::seconds(options.start_timeout_seconds);
  std::vector<AgentLink> links = StartAgents(options, *placed, *self, signals);
  auto fail = [&](int code) {
    ReportProblems(links);
    StopAgents(&links);
    return code;
  };

  Network network;
  if (int failed = FindNetwork(options, deadline, signals, &links, &network))
    return fail(failed);
  const std::vector<Choice>& choices = network.choices;
  StatusOr<HostedStore> hosted =
      StartJobStore(network.store_route.address, *secret);
  if (!hosted.ok()) {
    Say(hosted.status().ToString());
    StopAgents(&links);
    return 1;
  }
  SayChoice(links, choices, network.store_route, hosted->info);

  // The settings common to all hosts, then each host's own.
  EnvList common = ForwardedKoloSettings();
  for (auto& setting : JobSettings(options, hosted->info))
    common.push_back(std::move(setting));
  std::vector<ProcessSpec> specs;
  for (size_t i = 0; i < links.size(); ++i) {
    specs.push_back(LaunchOn(options, links[i], choices[i], common,
                             static_cast<int32_t>(links.size())));
  }
  LauncherOptions launcher_options;
  launcher_options.verbose = options.verbose;
  launcher_options.failure_in_line = AgentReportedFailure;
  Launcher launcher(launcher_options, signals);
  int exit_code = launcher.Run(specs);
  hosted->server->Stop();
  return exit_code;
}

}  // namespace kolorun
}  // namespace kolo
