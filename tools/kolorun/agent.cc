#include "agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "agent_messages.h"
#include "hosts.h"
#include "job.h"
#include "kolo_internal/net.h"
#include "launcher.h"
#include "metrics_service.h"
#include "output.h"

namespace kolo {
namespace kolorun {
namespace {

// Reads stdin a line at a time; blocking is right here, since the driver
// either writes or closes the pipe (ssh closes it when the connection
// drops). A line is kept to one byte past the bound on a message: what has
// no end by then is handed on as it is, for the parsers to refuse, rather
// than read into memory for as long as it goes on.
class StdinLines {
 public:
  // The next line, or nullopt at the end of stdin.
  std::optional<std::string> Next() {
    while (true) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      if (buffer_.size() > kMaxAgentMessageBytes) {
        std::string line = buffer_.substr(0, kMaxAgentMessageBytes + 1);
        buffer_.clear();
        return line;
      }
      char chunk[65536];
      const size_t room =
          std::min(sizeof(chunk), kMaxAgentMessageBytes + 1 - buffer_.size());
      ssize_t n = read(STDIN_FILENO, chunk, room);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buffer_;
};

template <typename Message>
void Send(const Message& message) {
  WriteAll(STDOUT_FILENO, SerializeMessage(message) + "\n");
}

void SayAsAgent(const std::string& text) {
  WriteAll(STDERR_FILENO, "kolorun agent: " + text + "\n");
}

// The next message, which must be a `Message`; nullopt, said why, for
// anything else or the end of stdin.
template <typename Message>
std::optional<Message> NextMessage(StdinLines* in) {
  std::optional<std::string> line = in->Next();
  if (!line) return std::nullopt;
  if (!IsMessageOfType(*line, Message::kType)) {
    SayAsAgent(std::string("expected a '") + Message::kType +
               "' message from the launching kolorun, got '" +
               line->substr(0, 80) + "'");
    return std::nullopt;
  }
  StatusOr<Message> message =
      ParseMessage<Message>(*line, "the launching kolorun");
  if (!message.ok()) {
    SayAsAgent(message.status().message());
    return std::nullopt;
  }
  return *std::move(message);
}

// A socket listening on `address`, port chosen by the OS, that nobody
// accepts from: the kernel completes the probes' handshakes by itself.
struct Listener {
  int fd = -1;
  int port = 0;
};

StatusOr<Listener> Listen(const std::string& address) {
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("not an IPv4 address: " + address);
  }
  Listener listener;
  listener.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t length = sizeof(addr);
  if (listener.fd < 0 ||
      bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0 ||
      listen(listener.fd, 64) != 0 ||
      getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &length) !=
          0) {
    int error = errno;
    if (listener.fd >= 0) close(listener.fd);
    return Internal("cannot listen on " + address + ": " +
                    std::strerror(error));
  }
  listener.port = ntohs(addr.sin_port);
  return listener;
}

std::string Describe(const std::vector<InterfaceAddress>& addresses) {
  std::string text;
  for (const InterfaceAddress& address : addresses) {
    if (!text.empty()) text += ", ";
    text += address.interface + " " + address.address;
    if (!address.up) text += " (down)";
  }
  return text.empty() ? "none" : text;
}

// Step 1. Fills `listeners` and `program_path`; the reply says what failed.
PreflightReply Preflight(const PreflightRequest& request,
                         std::vector<Listener>* listeners,
                         std::string* program_path) {
  PreflightReply reply;
  reply.hostname = ThisHostName("?");
  const std::string& cwd = request.cwd;
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
    reply.error = "working directory " + cwd + " is not there (" +
                  std::strerror(errno) + ")";
    return reply;
  }
  StatusOr<std::string> program = FindExecutable(request.program);
  if (!program.ok()) {
    reply.error = program.status().message() + " (in " + cwd + ")";
    return reply;
  }
  *program_path = *program;
  reply.program = *program;

  const std::string& spec_text = request.network_interface;
  StatusOr<InterfaceSpec> spec =
      InterfaceSpec::Parse(spec_text, "--network-interface");
  StatusOr<std::vector<InterfaceAddress>> all = ListInterfaceAddresses();
  if (!spec.ok() || !all.ok()) {
    reply.error = (!spec.ok() ? spec.status() : all.status()).message();
    return reply;
  }
  std::vector<InterfaceAddress> candidates =
      CandidateAddresses(*all, *spec, /*allow_loopback=*/false);
  for (const InterfaceAddress& candidate : candidates) {
    // IPv4 only, for now: Gloo and the store are given one address each.
    if (candidate.address.find(':') != std::string::npos) continue;
    StatusOr<Listener> listener = Listen(candidate.address);
    if (!listener.ok()) continue;
    listeners->push_back(*listener);
    reply.addresses.push_back({candidate.interface, candidate.address,
                               candidate.prefix_length, listener->port});
  }
  if (reply.addresses.empty()) {
    reply.error =
        spec_text.empty()
            ? "no interface up with an IPv4 address other than loopback "
              "(it has: " +
                  Describe(*all) + ")"
            : "no interface up matches --network-interface " + spec_text +
                  " (it has: " + Describe(*all) + ")";
  }
  return reply;
}

// Step 2: every target at once, so that unreachable ones cost one timeout
// in all, not one each.
ProbeReply Probe(const ProbeRequest& request) {
  const std::chrono::milliseconds timeout(request.timeout_ms);
  const std::vector<ProbeTarget>& targets = request.targets;
  std::vector<std::string> errors(targets.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] {
      const std::string& address = targets[i].address;
      Status reached = ProbeTcp("", address, targets[i].port, timeout);
      if (reached.ok()) return;
      errors[i] = reached.message();
      // Name the interface the kernel would send through, which is what a
      // user has to fix when it is the wrong one.
      StatusOr<InterfaceAddress> route = RouteTo(address);
      if (route.ok()) errors[i] += " (route via " + route->interface + ")";
    });
  }
  for (std::thread& thread : threads) thread.join();
  ProbeReply reply;
  for (size_t i = 0; i < targets.size(); ++i)
    reply.results.push_back({targets[i].host, targets[i].address, errors[i]});
  return reply;
}

// Step 3: starts the ranks and supervises them to the end; returns the
// agent's exit status.
int Launch(const LaunchRequest& launch, const std::string& program_path,
           SignalWatcher* signals) {
  const HostRanks& ranks = launch.ranks;
  LauncherOptions launcher_options;
  std::vector<std::string> base_env = CurrentEnvironment();
  // `kolorun --metrics-port`: each host serves its own ranks.
  std::unique_ptr<MetricsService> metrics;
  if (launch.metrics) {
    StatusOr<std::unique_ptr<MetricsService>> started = StartHostMetrics(
        launch.metrics->port, launch.metrics->address, launch.metrics->job,
        ranks.host, &base_env, &launcher_options);
    if (!started.ok()) {
      SayAsAgent(ranks.host + ": " + started.status().message());
      return 1;
    }
    metrics = *std::move(started);
  }
  std::vector<ProcessSpec> specs = BuildHostRanks(
      ranks, program_path, launch.command, launch.settings, base_env,
      CoreBlocks(UsableCores(), ranks.local_size, launch.bind_to));
  // An elastic worker's agent runs one rank, which the driver names by
  // its worker id ("worker 5", "[w5]") since its rank changes.
  if (!launch.tag.empty()) {
    for (ProcessSpec& spec : specs) {
      spec.name = (launch.name.empty() ? launch.tag : launch.name) + " on " +
                  ranks.host;
      spec.stdout_prefix = "[" + launch.tag + "]<stdout>: ";
      spec.stderr_prefix = "[" + launch.tag + "]<stderr>: ";
    }
  }
  launcher_options.verbose = launch.verbose;
  launcher_options.stop_fd = STDIN_FILENO;
  launcher_options.host = ranks.host;
  launcher_options.stop_message = "the launching kolorun is gone (" +
                                  ranks.host +
                                  " lost its connection); stopping the ranks";
  Launcher launcher(launcher_options, signals);
  return launcher.Run(specs);
}

}  // namespace

int RunAgent(SignalWatcher* signals) {
  StdinLines in;
  std::vector<Listener> listeners;
  auto close_listeners = [&] {
    for (const Listener& listener : listeners) close(listener.fd);
    listeners.clear();
  };
  std::string program_path;
  std::optional<PreflightRequest> preflight =
      NextMessage<PreflightRequest>(&in);
  if (!preflight) return 1;
  const PreflightReply reply = Preflight(*preflight, &listeners, &program_path);
  Send(reply);
  if (!reply.error.empty()) {
    close_listeners();
    return 1;
  }
  std::optional<ProbeRequest> probe = NextMessage<ProbeRequest>(&in);
  if (!probe) {
    close_listeners();
    return 1;
  }
  Send(Probe(*probe));
  std::optional<LaunchRequest> launch = NextMessage<LaunchRequest>(&in);
  close_listeners();
  if (!launch) return 1;
  return Launch(*launch, program_path, signals);
}

}  // namespace kolorun
}  // namespace kolo
