// The messages between a driver and its agents (the protocol is described in
// agent.h): one struct per message, and one serializer and one parser for
// them all, so that the keys are written down once.
//
// On the wire each message is a JSON object on one line with its "type"
// ("preflight", "probe", "launch"; a reply has its request's type). Keys a
// message may leave out are marked "optional"; every other key must be
// there with the right JSON type, and a number within its range. A parse
// error names the message and the key: "bad 'probe' message from the
// launching kolorun: 'targets[0].port' should be an integer, not a string".
//
// Thread-safety: free functions on values; safe from any thread.
#ifndef KOLO_TOOLS_KOLORUN_AGENT_MESSAGES_H_
#define KOLO_TOOLS_KOLORUN_AGENT_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "job.h"
#include "kolo/status.h"
#include "options.h"

namespace kolo {
namespace kolorun {

// The longest message line a parser accepts: far above any real one (the
// settings of a launch are a few kilobytes), yet a bound.
inline constexpr size_t kMaxAgentMessageBytes = size_t{16} << 20;

// Step 1, driver to agent: can this host run the job?
struct PreflightRequest {
  static constexpr const char* kType = "preflight";
  std::string program;            // as the user named it (argv[0])
  std::string cwd;                // the driver's working directory
  std::string network_interface;  // --network-interface, may be empty
};

// An address of the agent's host that the job may use, with a listener on
// it that nobody accepts from (the others probe it).
struct AgentAddress {
  std::string interface;
  std::string address;
  int32_t prefix = 32;  // of its subnet, 0..128
  int32_t port = 0;     // of its listener, 0..65535
};

// Step 1, agent to driver.
struct PreflightReply {
  static constexpr const char* kType = "preflight";
  std::string hostname;
  std::string program;  // optional: the program's path on this host
  std::vector<AgentAddress> addresses;
  std::string error;  // optional: why this host cannot run the job
};

struct ProbeTarget {
  std::string host;  // the name the host list gives it
  std::string address;
  int32_t port = 0;
};

// Step 2, driver to agent: connect to every target at once.
struct ProbeRequest {
  static constexpr const char* kType = "probe";
  std::vector<ProbeTarget> targets;
  int64_t timeout_ms = 5000;  // >= 0
};

struct ProbeResult {
  std::string host;
  std::string address;
  std::string error;  // empty: reached
};

// Step 2, agent to driver: one result per target, in their order.
struct ProbeReply {
  static constexpr const char* kType = "probe";
  std::vector<ProbeResult> results;
};

// kolorun --metrics-port: the agent serves its host's ranks' metrics.
struct LaunchMetrics {
  int32_t port = 0;
  std::string address;
  std::string job;
};

// Step 3, driver to agent: start the ranks. No reply: from then on the
// agent's output is its ranks' lines.
struct LaunchRequest {
  static constexpr const char* kType = "launch";
  HostRanks ranks;  // its host is the message's "host"
  std::vector<std::string> command;
  EnvList settings;  // on the wire: [[name, value], ...]
  BindTo bind_to = BindTo::kNone;
  bool verbose = false;
  // Optional (kolorun --elastic, one agent per worker): the tag of its one
  // rank's lines ("w5" for "[w5]") and how messages name it ("worker 5").
  std::string tag;
  std::string name;
  std::optional<LaunchMetrics> metrics;  // optional
};

// The message as one line of JSON, without its '\n'.
std::string SerializeMessage(const PreflightRequest& message);
std::string SerializeMessage(const PreflightReply& message);
std::string SerializeMessage(const ProbeRequest& message);
std::string SerializeMessage(const ProbeReply& message);
std::string SerializeMessage(const LaunchRequest& message);

// Parses one line into `Message` (one of the structs above). `from` says
// who sent it, for errors ("the launching kolorun", "the agent on h2").
template <typename Message>
StatusOr<Message> ParseMessage(const std::string& line,
                               const std::string& from);

// Whether `line` is a JSON object whose "type" is `type`: a line that is not
// is no message of the protocol at all (a remote shell's banner, say).
bool IsMessageOfType(const std::string& line, const std::string& type);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_AGENT_MESSAGES_H_
