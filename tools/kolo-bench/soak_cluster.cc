#include "soak_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "sibling_tools.h"
#include "soak_plan.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;

// Cluster names: "kolosoak<pid>", so that a later soak can tell the
// clusters of soaks that died (their pid is gone) and remove them.
constexpr const char* kNamePrefix = "kolosoak";

// Runs `command` through /bin/sh; its exit status and what it printed on
// stdout and stderr.
std::pair<int, std::string> RunShell(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string ScriptCommand(const std::string& script, const std::string& args) {
  return "/bin/bash " + ShellQuote(script) + " " + args;
}

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// The N of a /proc link "net:[N]" or "socket:[N]"; 0 for anything else.
uint64_t LinkInode(const std::string& path, const std::string& kind) {
  std::error_code error;
  const std::string target = fs::read_symlink(path, error).string();
  const std::string prefix = kind + ":[";
  if (error || target.rfind(prefix, 0) != 0) return 0;
  return std::strtoull(target.c_str() + prefix.size(), nullptr, 10);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Removes the clusters of soaks whose process is gone.
void RemoveStaleClusters(const std::string& script) {
  static const std::regex kName(R"(^(kolosoak([0-9]+))-(h[0-9]+|sw)$)");
  std::set<std::string> stale;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/run/netns", error)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (!std::regex_match(name, match, kName)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(match[2].str()));
    if (kill(pid, 0) != 0 && errno == ESRCH) stale.insert(match[1].str());
  }
  for (const std::string& name : stale) {
    auto [status, output] = RunShell(ScriptCommand(script, "down " + name));
    if (status != 0) {
      std::fprintf(stderr, "kolo-bench soak: removing the stale cluster %s: %s",
                   name.c_str(), output.c_str());
    }
  }
}

// A child that enters `host`'s network namespace; -1 when the fork or
// the entry failed (the child then exits 127).
pid_t ForkInto(const std::string& host) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = open(("/run/netns/" + host).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(127);
  close(fd);
  return 0;
}

// One garbage connection, from inside the namespace: true when it
// connected.
bool SendOneGarbage(const sockaddr_in& to, uint64_t seed) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval limit{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  bool connected =
      connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0;
  if (connected) {
    // Some connections say nothing at all: a peer that connects and
    // waits must not hold up the real ones.
    const std::string bytes = GarbageBytes(seed, seed % 4097);
    if (!bytes.empty()) send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  close(fd);
  return connected;
}

}  // namespace

std::string ProcessEnvironment(pid_t pid, const std::string& name) {
  std::istringstream environment(
      ReadText(fmt::format("/proc/{}/environ", pid)));
  for (std::string entry; std::getline(environment, entry, '\0');) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return "";
}

StatusOr<std::unique_ptr<SoakCluster>> SoakCluster::Up(
    const std::string& script, int hosts) {
  if (access(script.c_str(), R_OK) != 0) {
    return NotFound(script +
                    " (scripts/netns_cluster.sh, which makes the cluster) is "
                    "missing; name it with --cluster-script");
  }
  RemoveStaleClusters(script);
  const std::string name = kNamePrefix + std::to_string(getpid());
  const std::string args = "up " + name + " " + std::to_string(hosts);
  auto [status, output] = RunShell(ScriptCommand(script, args));
  // Owned from here, so that the cluster goes on every return.
  std::unique_ptr<SoakCluster> cluster(new SoakCluster(script, name));
  if (status != 0) {
    return Internal(fmt::format("netns_cluster.sh {} failed (exit {}): {}",
                                args, status, output));
  }
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    SoakHost host;
    if (!(fields >> host.name >> host.address)) continue;
    host.net_inode = InodeOf("/run/netns/" + host.name);
    cluster->hosts_.push_back(host);
  }
  if (static_cast<int>(cluster->hosts_.size()) != hosts) {
    return Internal(fmt::format("netns_cluster.sh {} printed {} hosts:\n{}",
                                args, cluster->hosts_.size(), output));
  }
  KOLO_RETURN_IF_ERROR(cluster->StartAnchors());
  return cluster;
}

Status SoakCluster::StartAnchors() {
  for (SoakHost& host : hosts_) {
    host.anchor = ForkInto(host.name);
    if (host.anchor == 0) {
      execl("/bin/sleep", "sleep", "infinity", static_cast<char*>(nullptr));
      _exit(127);
    }
    if (host.anchor < 0)
      return Internal("cannot fork the anchor process of " + host.name);
  }
  // An anchor counts once it is inside its host.
  for (int tries = 0; tries < 100; ++tries) {
    bool all = true;
    for (const SoakHost& host : hosts_) {
      all = all && LinkInode(fmt::format("/proc/{}/ns/net", host.anchor),
                             "net") == host.net_inode;
    }
    if (all) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Internal("the anchor processes did not enter the hosts of " + name_);
}

SoakCluster::~SoakCluster() {
  Status status = Down();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-bench soak: %s\n", status.message().c_str());
  }
}

Status SoakCluster::Down() {
  if (down_) return Status::Ok();
  down_ = true;
  for (SoakHost& host : hosts_) {
    if (host.anchor <= 0) continue;
    kill(host.anchor, SIGKILL);
    waitpid(host.anchor, nullptr, 0);
    host.anchor = -1;
  }
  auto [status, output] = RunShell(ScriptCommand(script_, "down " + name_));
  if (status != 0) {
    return Internal(fmt::format("netns_cluster.sh down {} failed (exit {}): {}",
                                name_, status, output));
  }
  return Status::Ok();
}

std::vector<std::string> SoakCluster::HostNames() const {
  std::vector<std::string> names;
  for (const SoakHost& host : hosts_) names.push_back(host.name);
  return names;
}

std::vector<ClusterProcess> SoakCluster::Processes() const {
  std::vector<ClusterProcess> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    const std::string pid_text = entry.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const uint64_t net = LinkInode(entry.path() / "ns" / "net", "net");
    if (net == 0) continue;
    for (size_t h = 0; h < hosts_.size(); ++h) {
      const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
      if (hosts_[h].net_inode != net || hosts_[h].anchor == pid) continue;
      ClusterProcess p{pid, h, "", ""};
      std::error_code ignored;
      p.exe = fs::read_symlink(entry.path() / "exe", ignored).string();
      p.cmdline = ReadText((entry.path() / "cmdline").string());
      for (char& c : p.cmdline) c = c == '\0' ? ' ' : c;
      found.push_back(p);
    }
  }
  return found;
}

std::vector<Listener> SoakCluster::Listeners(size_t host) const {
  // /proc/PID/net/tcp: "sl local rem st ... inode", addresses as hex of the
  // address in network order read as a host-order word, then the port.
  std::vector<Listener> found;
  std::istringstream table(
      ReadText(fmt::format("/proc/{}/net/tcp", hosts_[host].anchor)));
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, skip;
    uint64_t inode = 0;
    f >> slot >> local >> remote >> state;
    for (int i = 0; i < 5; ++i) f >> skip;  // tx:rx tr:when retrnsmt uid to
    f >> inode;
    if (state != "0A" || local.size() != 13) continue;  // 0A: LISTEN
    in_addr address{
        static_cast<in_addr_t>(std::stoul(local.substr(0, 8), nullptr, 16))};
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &address, text, sizeof(text));
    found.push_back({text, std::stoi(local.substr(9), nullptr, 16), inode});
  }
  return found;
}

std::set<uint64_t> SoakCluster::SocketInodes(pid_t pid) {
  std::set<uint64_t> inodes;
  std::error_code error;
  for (const auto& entry :
       fs::directory_iterator(fmt::format("/proc/{}/fd", pid), error)) {
    const uint64_t inode = LinkInode(entry.path(), "socket");
    if (inode != 0) inodes.insert(inode);
  }
  return inodes;
}

Status SoakCluster::SetLink(size_t host, bool up) const {
  const std::string command = fmt::format(
      "ip -n {} link set eth1 {}", hosts_[host].name, up ? "up" : "down");
  auto [status, output] = RunShell(command);
  if (status != 0) return Internal(command + " failed: " + output);
  return Status::Ok();
}

int SoakCluster::SendGarbage(size_t from, const std::string& address, int port,
                             uint64_t seed, int connections) const {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) return 0;
  const pid_t child = ForkInto(hosts_[from].name);
  if (child == 0) {
    std::mt19937_64 seeds(seed);
    int connected = 0;
    for (int i = 0; i < connections; ++i)
      connected += SendOneGarbage(to, seeds()) ? 1 : 0;
    _exit(connected);
  }
  if (child < 0) return 0;
  // Each connect is bounded by a second; a child past that is stuck.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(2 + connections);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) != 127 ? WEXITSTATUS(status)
                                                         : 0;
}

int64_t SoakCluster::NamespacesLeft() const {
  int64_t left = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/run/netns", error)) {
    if (entry.path().filename().string().rfind(name_ + "-", 0) == 0) ++left;
  }
  return left;
}

}  // namespace kolo::bench
