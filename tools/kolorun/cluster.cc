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

#include "hosts.h"
#include "job.h"
#include "kolo_internal/config.h"
#include "kolo_internal/net.h"
#include "kolo_internal/store.h"
#include "launcher.h"
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

// One host's agent, as the driver sees it during the preflight.
struct AgentLink {
  HostAssignment place;
  Child child;
  std::string out;  // stdout not yet cut into lines
  std::string err;  // all it wrote to stderr so far
  bool out_open = true;
  bool err_open = true;
  bool exited = false;
  int wait_status = 0;
  Json preflight;  // its answer to step 1
  std::vector<std::string> problems;
};

std::string Trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// Why an agent gave no answer: what its remote shell said, and how it
// ended.
std::string Silence(const AgentLink& link) {
  std::string said = Trim(link.err);
  std::string how;
  if (link.exited) {
    how = "its remote shell " + DescribeWaitStatus(link.wait_status);
  } else {
    how = "no answer";
  }
  return said.empty() ? how : said + " (" + how + ")";
}

void ReadInto(int* fd, std::string* into, bool* open) {
  char buffer[65536];
  while (*fd >= 0) {
    ssize_t n = read(*fd, buffer, sizeof(buffer));
    if (n > 0) {
      into->append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(*fd);
    *fd = -1;
    *open = false;
  }
}

void Reap(AgentLink* link) {
  if (link->exited) return;
  pid_t pid;
  do {
    pid = waitpid(link->child.pid, &link->wait_status, WNOHANG);
  } while (pid < 0 && errno == EINTR);
  if (pid != 0) link->exited = true;
}

// Sends requests[i] (a line) to every agent that has one and waits, until
// `deadline`, for one line back from each. Returns, per agent, its answer;
// an agent without one gets a problem saying why. A signal to kolorun
// (Ctrl-C) ends the wait at once and returns false.
bool Exchange(std::vector<AgentLink>* links,
              const std::vector<std::string>& requests,
              Clock::time_point deadline, const std::string& type,
              SignalWatcher* signals,
              std::vector<std::optional<Json>>* answers) {
  answers->assign(links->size(), std::nullopt);
  std::vector<bool> waiting(links->size(), false);
  for (size_t i = 0; i < links->size(); ++i) {
    AgentLink& link = (*links)[i];
    if (requests[i].empty()) continue;
    WriteAll(link.child.stdin_fd, requests[i] + "\n");
    waiting[i] = true;
  }
  while (true) {
    std::vector<pollfd> fds = {{signals->fd(), POLLIN, 0}};
    std::vector<std::pair<size_t, bool>> owners;  // agent, is stdout
    for (size_t i = 0; i < links->size(); ++i) {
      AgentLink& link = (*links)[i];
      if (!waiting[i]) continue;
      size_t newline = link.out.find('\n');
      if (newline != std::string::npos) {
        std::string line = link.out.substr(0, newline);
        link.out.erase(0, newline + 1);
        Json answer = Json::parse(line, nullptr, false);
        if (answer.is_object() && answer.value("type", "") == type) {
          (*answers)[i] = std::move(answer);
        } else {
          link.problems.push_back("answered '" + line.substr(0, 120) +
                                  "' instead of the agent's " + type);
        }
        waiting[i] = false;
        continue;
      }
      if (!link.out_open) {
        // Its stderr may still hold the reason; give it a moment.
        if (link.err_open)
          ReadInto(&link.child.stderr_fd, &link.err, &link.err_open);
        Reap(&link);
        if (!link.exited) {
          usleep(20000);
          Reap(&link);
        }
        link.problems.push_back(Silence(link));
        waiting[i] = false;
        continue;
      }
      fds.push_back({link.child.stdout_fd, POLLIN, 0});
      owners.emplace_back(i, true);
      if (link.err_open) {
        fds.push_back({link.child.stderr_fd, POLLIN, 0});
        owners.emplace_back(i, false);
      }
    }
    if (owners.empty()) {
      // Either every agent answered or told why not.
      bool all = true;
      for (size_t i = 0; i < links->size(); ++i) all = all && !waiting[i];
      if (all) return true;
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    int timeout_ms =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - now)
                             .count()) +
        1;
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      for (int signal : signals->ReadPending()) {
        if (signal == SIGCHLD) continue;
        Say("received signal " + std::to_string(signal) +
            " during the preflight; starting nothing");
        return false;
      }
    }
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      AgentLink& link = (*links)[owners[k - 1].first];
      if (owners[k - 1].second) {
        ReadInto(&link.child.stdout_fd, &link.out, &link.out_open);
      } else {
        ReadInto(&link.child.stderr_fd, &link.err, &link.err_open);
      }
    }
  }
  for (size_t i = 0; i < links->size(); ++i) {
    if (!waiting[i]) continue;
    AgentLink& link = (*links)[i];
    Reap(&link);
    std::string said = Trim(link.err);
    link.problems.push_back("no answer within the --start-timeout" +
                            (said.empty() ? "" : " (it said: " + said + ")"));
  }
  return true;
}

// Closes the agents' stdin (which ends them), then makes sure they are
// gone.
void StopAgents(std::vector<AgentLink>* links) {
  for (AgentLink& link : *links) {
    if (link.child.stdin_fd >= 0) close(link.child.stdin_fd);
    link.child.stdin_fd = -1;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (AgentLink& link : *links) {
    while (!link.exited && Clock::now() < deadline) {
      Reap(&link);
      if (!link.exited) usleep(10000);
    }
    if (!link.exited) {
      SignalGroup(link.child.pid, SIGKILL);
      while (waitpid(link.child.pid, &link.wait_status, 0) < 0 &&
             errno == EINTR) {
      }
      link.exited = true;
    }
    for (int* fd : {&link.child.stdout_fd, &link.child.stderr_fd}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
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

std::string CurrentDirectory() {
  char path[4096];
  return getcwd(path, sizeof(path)) != nullptr ? path : ".";
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
    AgentLink link;
    link.place = place;
    ChildSpec spec;
    spec.argv = RemoteCommand(options, place.host, {*self, "--agent"});
    spec.env = CurrentEnvironment();
    spec.stdin_pipe = true;
    StatusOr<std::string> shell = FindExecutable(spec.argv[0]);
    if (!shell.ok()) {
      link.problems.push_back("cannot start its agent: " +
                              shell.status().message());
      link.exited = true;
      links.push_back(std::move(link));
      continue;
    }
    spec.path = *shell;
    if (options.verbose)
      Say("agent on " + place.host + ": " + JoinCommand(spec.argv));
    StatusOr<Child> child = SpawnChild(spec, signals->original_mask());
    if (!child.ok()) {
      link.problems.push_back("cannot start its agent: " +
                              child.status().message());
      link.exited = true;
    } else {
      link.child = *child;
    }
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
