#include "cluster.h"

#include <errno.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent_link.h"
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

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void Say(const std::string& text) {
  WriteAll(STDERR_FILENO, "kolorun: " + text + "\n");
}

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

struct Choice {
  std::string interface;
  std::string address;
};

}  // namespace

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

  // Every agent starts at once; each may take seconds to connect.
  std::vector<AgentLink> links;
  for (const HostAssignment& place : *placed) {
    AgentLink link = StartAgent(options, place.host, *self, signals);
    link.place = place;
    links.push_back(std::move(link));
  }
  auto fail = [&](int code) {
    ReportProblems(links);
    StopAgents(&links);
    return code;
  };

  // Step 1: who is there, and what may each use.
  const std::string cwd = CurrentDirectory();
  std::vector<std::string> requests(links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    if (!links[i].problems.empty()) continue;
    requests[i] = Json{{"type", "preflight"},
                       {"program", options.command[0]},
                       {"cwd", cwd},
                       {"network_interface", options.network_interface}}
                      .dump();
  }
  std::vector<std::optional<Json>> answers;
  if (!Exchange(&links, requests, deadline, "preflight", signals, &answers))
    return fail(130);
  for (size_t i = 0; i < links.size(); ++i) {
    if (!answers[i]) continue;
    links[i].preflight = *answers[i];
    if (answers[i]->contains("error"))
      links[i].problems.push_back((*answers[i])["error"].get<std::string>());
  }
  for (const AgentLink& link : links) {
    if (!link.problems.empty()) return fail(1);
  }

  // An address on more than one host identifies none of them.
  std::map<std::string, int> holders;
  for (const AgentLink& link : links) {
    for (const Json& address : link.preflight["addresses"])
      ++holders[address.value("address", "")];
  }
  // Step 2: every host, and the driver, tries every other host's addresses.
  struct Target {
    size_t host;
    std::string address;
    int port;
  };
  std::vector<Target> targets;
  for (size_t i = 0; i < links.size(); ++i) {
    for (const Json& address : links[i].preflight["addresses"]) {
      if (holders[address.value("address", "")] > 1) continue;
      targets.push_back(
          {i, address.value("address", ""), address.value("port", 0)});
    }
  }
  const int64_t probe_ms = std::max<int64_t>(
      100, std::min<int64_t>(
               5000, std::chrono::duration_cast<std::chrono::milliseconds>(
                         deadline - Clock::now())
                             .count() -
                         500));
  for (size_t i = 0; i < links.size(); ++i) {
    Json list = Json::array();
    for (const Target& target : targets) {
      if (target.host == i) continue;
      list.push_back({{"host", links[target.host].place.host},
                      {"address", target.address},
                      {"port", target.port}});
    }
    requests[i] =
        Json{{"type", "probe"}, {"targets", list}, {"timeout_ms", probe_ms}}
            .dump();
  }
  std::vector<std::string> driver_errors(targets.size());
  std::vector<std::thread> driver_probes;
  for (size_t t = 0; t < targets.size(); ++t) {
    driver_probes.emplace_back([&, t] {
      Status reached = ProbeTcp("", targets[t].address, targets[t].port,
                                std::chrono::milliseconds(probe_ms));
      if (!reached.ok()) driver_errors[t] = reached.message();
    });
  }
  bool exchanged =
      Exchange(&links, requests, deadline, "probe", signals, &answers);
  for (std::thread& probe : driver_probes) probe.join();
  if (!exchanged) return fail(130);

  // failures[address] = who could not reach it, and why.
  std::map<std::string, std::vector<std::string>> failures;
  for (size_t i = 0; i < links.size(); ++i) {
    if (!answers[i]) continue;
    for (const Json& result : (*answers[i])["results"]) {
      std::string error = result.value("error", "");
      if (error.empty()) continue;
      failures[result.value("address", "")].push_back(
          links[i].place.host + " cannot reach it: " + error);
    }
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    if (driver_errors[t].empty()) continue;
    failures[targets[t].address].push_back(
        "kolorun cannot reach it from here: " + driver_errors[t]);
  }
  std::vector<Choice> choices(links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    std::vector<std::string> reasons;
    for (const Json& address : links[i].preflight["addresses"]) {
      const std::string text = address.value("address", "");
      const std::string where = address.value("interface", "") + " " + text;
      if (holders[text] > 1) {
        reasons.push_back(where + " is an address of another host too");
        continue;
      }
      auto failed = failures.find(text);
      if (failed == failures.end()) {
        choices[i] = {address.value("interface", ""), text};
        break;
      }
      for (const std::string& why : failed->second)
        reasons.push_back(where + ": " + why);
    }
    if (choices[i].address.empty()) {
      std::string text = "no address that every host reaches";
      for (const std::string& reason : reasons) text += "; " + reason;
      links[i].problems.push_back(text);
    }
  }
  for (const AgentLink& link : links) {
    if (!link.problems.empty()) return fail(1);
  }

  StatusOr<InterfaceAddress> store_route = RouteTo(choices[0].address);
  if (!store_route.ok()) {
    links[0].problems.push_back("kolorun has no route to it: " +
                                store_route.status().message());
    return fail(1);
  }
  StatusOr<HostedStore> hosted = StartJobStore(store_route->address, *secret);
  if (!hosted.ok()) {
    Say(hosted.status().ToString());
    StopAgents(&links);
    return 1;
  }
  const StoreInfo& store = hosted->info;
  std::string chosen;
  for (size_t i = 0; i < links.size(); ++i) {
    chosen += (i == 0 ? "" : ", ") + links[i].place.host + " " +
              choices[i].interface + " " + choices[i].address;
  }
  Say("network: " + chosen + "; store on " + store_route->interface + " " +
      store.address);

  // Step 3. The settings common to all hosts, then each host's own.
  EnvList common = ForwardedKoloSettings();
  for (auto& setting : JobSettings(options, store))
    common.push_back(std::move(setting));
  const int32_t cross_size = static_cast<int32_t>(links.size());
  std::vector<ProcessSpec> specs;
  for (size_t i = 0; i < links.size(); ++i) {
    const HostAssignment& place = links[i].place;
    EnvList settings = {{env::kHostId, place.host},
                        {env::kGlooHostname, choices[i].address}};
    settings.insert(settings.end(), common.begin(), common.end());
    Json pairs = Json::array();
    for (const auto& [name, value] : settings) pairs.push_back({name, value});
    Json launch = {
        {"type", "launch"},
        {"host", place.host},
        {"ranks",
         {{"first_rank", place.first_rank},
          {"local_size", place.num_ranks},
          {"size", options.num_ranks},
          {"cross_rank", place.cross_rank},
          {"cross_size", cross_size}}},
        {"command", options.command},
        {"settings", pairs},
        {"bind_to", options.bind_to == BindTo::kCore ? "core" : "none"},
        {"verbose", options.verbose},
    };
    if (options.metrics_port) {
      launch["metrics"] = {
          {"port", *options.metrics_port},
          {"address", MetricsAddress(options, choices[i].address)},
          {"job", JobName(options)}};
    }
    WriteAll(links[i].child.stdin_fd, launch.dump() + "\n");

    ProcessSpec spec;
    spec.name = "the agent on " + place.host;
    spec.started = links[i].child;
    spec.format = LineFormat::kPrefix;  // the agent tags its ranks' lines
    specs.push_back(std::move(spec));
    // What its remote shell said before (a warning from ssh, say).
    if (!Trim(links[i].err).empty())
      Say(place.host + ": " + Trim(links[i].err));
    // The buffered rest of its stdout is empty: it says nothing between
    // its probe answer and the launch.
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
