#include "agent_link.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "launcher.h"
#include "output.h"
#include "remote.h"

namespace kolo {
namespace kolorun {
namespace {

using Clock = std::chrono::steady_clock;

// What is kept of an agent's stderr to explain its silence: its remote
// shell's complaint fits many times over.
constexpr size_t kMaxAgentStderrBytes = 64 * 1024;

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

// Reads what `fd` has into `into`, keeping at most `limit` bytes there:
// what passes the limit is read and dropped, so an agent (or its remote
// shell) that floods its output costs no more memory, and the pipe is
// drained so that poll does not spin on it.
void ReadInto(int* fd, std::string* into, bool* open, size_t limit) {
  char buffer[65536];
  while (*fd >= 0) {
    ssize_t n = read(*fd, buffer, sizeof(buffer));
    if (n > 0) {
      const size_t room = limit - std::min(limit, into->size());
      into->append(buffer, std::min(room, static_cast<size_t>(n)));
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

// Whether the wait for `link`'s answer is over: a whole line came (into
// `answer` when it is a message of `type`), or none can come any more. A
// link without an answer gets a problem saying why.
bool AnswerSettled(AgentLink* link, const std::string& type,
                   std::optional<std::string>* answer) {
  size_t newline = link->out.find('\n');
  if (newline == std::string::npos &&
      link->out.size() > kMaxAgentMessageBytes) {
    link->problems.push_back("answered more than " +
                             std::to_string(kMaxAgentMessageBytes) +
                             " bytes without ending its line (the agent's " +
                             type + " is one line)");
    link->out.clear();
    return true;
  }
  if (newline != std::string::npos) {
    std::string line = link->out.substr(0, newline);
    link->out.erase(0, newline + 1);
    if (IsMessageOfType(line, type)) {
      *answer = std::move(line);
    } else {
      link->problems.push_back("answered '" + line.substr(0, 120) +
                               "' instead of the agent's " + type);
    }
    return true;
  }
  if (link->out_open) return false;
  // Its stderr may still hold the reason; give it a moment.
  if (link->err_open)
    ReadInto(&link->child.stderr_fd, &link->err, &link->err_open,
             kMaxAgentStderrBytes);
  Reap(link);
  if (!link->exited) {
    usleep(20000);
    Reap(link);
  }
  link->problems.push_back(Silence(*link));
  return true;
}

}  // namespace

std::string Trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

AgentLink StartAgent(const LaunchOptions& options, const std::string& host,
                     const std::string& self, SignalWatcher* signals) {
  AgentLink link;
  link.place.host = host;
  ChildSpec spec;
  spec.argv = RemoteCommand(options, host, {self, "--agent"});
  spec.env = CurrentEnvironment();
  spec.stdin_pipe = true;
  StatusOr<std::string> shell = FindExecutable(spec.argv[0]);
  if (!shell.ok()) {
    link.problems.push_back("cannot start its agent: " +
                            shell.status().message());
    link.exited = true;
    return link;
  }
  spec.path = *shell;
  if (options.verbose) Say("agent on " + host + ": " + JoinCommand(spec.argv));
  StatusOr<Child> child = SpawnChild(spec, signals->original_mask());
  if (!child.ok()) {
    link.problems.push_back("cannot start its agent: " +
                            child.status().message());
    link.exited = true;
  } else {
    link.child = *child;
  }
  return link;
}

bool Exchange(std::vector<AgentLink>* links,
              const std::vector<std::string>& requests,
              Clock::time_point deadline, const std::string& type,
              SignalWatcher* signals,
              std::vector<std::optional<std::string>>* answers) {
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
      if (AnswerSettled(&link, type, &(*answers)[i])) {
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
        ReadInto(&link.child.stdout_fd, &link.out, &link.out_open,
                 kMaxAgentMessageBytes + 1);
      } else {
        ReadInto(&link.child.stderr_fd, &link.err, &link.err_open,
                 kMaxAgentStderrBytes);
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

std::string CurrentDirectory() {
  char path[4096];
  return getcwd(path, sizeof(path)) != nullptr ? path : ".";
}

PreflightRequest PreflightRequestFor(const LaunchOptions& options) {
  PreflightRequest request;
  request.program = options.command[0];
  request.cwd = CurrentDirectory();
  request.network_interface = options.network_interface;
  return request;
}

}  // namespace kolorun
}  // namespace kolo
