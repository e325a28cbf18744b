// The driver's side of its agents (agent.h): starting one through ssh or
// --remote-shell, and exchanging the JSON lines of the preflight with many
// at once under one deadline. cluster.h starts one agent per host;
// elastic.h one per worker on another host.
#ifndef KOLO_TOOLS_KOLORUN_AGENT_LINK_H_
#define KOLO_TOOLS_KOLORUN_AGENT_LINK_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent_messages.h"
#include "hosts.h"
#include "options.h"
#include "process.h"

namespace kolo {
namespace kolorun {

// One host's agent, as the driver sees it during the preflight.
struct AgentLink {
  HostAssignment place;  // the host, and its ranks in a multi-host job
  Child child;
  std::string out;  // stdout not yet cut into lines
  std::string err;  // all it wrote to stderr so far
  bool out_open = true;
  bool err_open = true;
  bool exited = false;
  int wait_status = 0;
  PreflightReply preflight;  // its answer to step 1
  std::vector<std::string> problems;
};

// Starts `self --agent` on `host` (remote.h); a failure to start is the
// link's first problem.
AgentLink StartAgent(const LaunchOptions& options, const std::string& host,
                     const std::string& self, SignalWatcher* signals);

// Sends requests[i] (a line) to every agent that has one and waits, until
// `deadline`, for one line back from each, a message of `type`
// (agent_messages.h). Returns, per agent, its answer; an agent without one
// gets a problem saying why. A signal to kolorun (Ctrl-C) ends the wait at
// once and returns false.
bool Exchange(std::vector<AgentLink>* links,
              const std::vector<std::string>& requests,
              std::chrono::steady_clock::time_point deadline,
              const std::string& type, SignalWatcher* signals,
              std::vector<std::optional<std::string>>* answers);

// Exchange() with one message type, parsed: an answer that does not parse
// becomes its agent's problem instead.
template <typename Reply>
bool ExchangeTyped(std::vector<AgentLink>* links,
                   const std::vector<std::string>& requests,
                   std::chrono::steady_clock::time_point deadline,
                   SignalWatcher* signals,
                   std::vector<std::optional<Reply>>* replies) {
  std::vector<std::optional<std::string>> lines;
  if (!Exchange(links, requests, deadline, Reply::kType, signals, &lines))
    return false;
  replies->assign(links->size(), std::nullopt);
  for (size_t i = 0; i < links->size(); ++i) {
    if (!lines[i]) continue;
    StatusOr<Reply> reply = ParseMessage<Reply>(
        *lines[i], "the agent on " + (*links)[i].place.host);
    if (reply.ok()) {
      (*replies)[i] = *std::move(reply);
    } else {
      (*links)[i].problems.push_back(reply.status().message());
    }
  }
  return true;
}

// Closes the agents' stdin (which ends them), then makes sure they are
// gone.
void StopAgents(std::vector<AgentLink>* links);

std::string CurrentDirectory();

// Step 1's question for the job `options` describes, asked from here.
PreflightRequest PreflightRequestFor(const LaunchOptions& options);

// `text` without leading and trailing white space.
std::string Trim(const std::string& text);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_AGENT_LINK_H_
