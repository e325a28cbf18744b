#include "testing/netns_cluster.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

namespace kolo::testing {
namespace {

// The path of `program` in $PATH or in the sbin folders, which a non-root
// $PATH may lack; "" when there is none.
std::string FindProgram(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::istringstream stream(dirs);
  std::string dir;
  while (std::getline(stream, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

const std::string& IpPath() {
  static const std::string path = FindProgram("ip");
  return path;
}

RunResult RunScript(const std::vector<std::string>& args,
                    std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<std::string> argv = {"/bin/bash", NetnsCluster::ScriptPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, {}, limit);
}

std::string Joined(const std::vector<std::string>& args) {
  std::string text = "scripts/netns_cluster.sh";
  for (const std::string& arg : args) text += " " + arg;
  return text;
}

bool ProcessAlive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

// Clusters named after a process that is gone (a test run that crashed
// before its destructors ran): their namespaces, /etc/netns folders and
// /tmp/NAME-ssh folders.
std::set<std::string> StaleClusterNames() {
  static const std::regex kName("^(kolo([0-9]+)(c[0-9]+|p))-(h[0-9]+|sw|ssh)$");
  std::set<std::string> names;
  for (const char* folder : {"/run/netns", "/etc/netns", "/tmp"}) {
    DIR* dir = opendir(folder);
    if (dir == nullptr) continue;
    while (dirent* entry = readdir(dir)) {
      std::cmatch match;
      if (!std::regex_match(entry->d_name, match, kName)) continue;
      const pid_t pid = static_cast<pid_t>(std::atol(match[2].str().c_str()));
      if (pid != getpid() && !ProcessAlive(pid)) names.insert(match[1].str());
    }
    closedir(dir);
  }
  return names;
}

void RemoveStaleClusters() {
  for (const std::string& name : StaleClusterNames()) {
    RunResult result = RunScript({"down", name});
    if (result.exit_code != 0) {
      std::fprintf(stderr, "NetnsCluster: removing the stale cluster %s: %s\n",
                   name.c_str(), Describe(result).c_str());
    }
  }
}

std::string Probe() {
  if (geteuid() != 0) {
    return "not root: network namespaces need CAP_SYS_ADMIN (run the tests "
           "as root)";
  }
  if (IpPath().empty()) return "'ip' not found: install iproute2";
  if (access(NetnsCluster::ScriptPath().c_str(), R_OK) != 0)
    return NetnsCluster::ScriptPath() + " is missing";
  // A one-host cluster is the truest probe: a container may allow
  // `ip netns add` and still refuse veth pairs or bridges.
  const std::string name = "kolo" + std::to_string(getpid()) + "p";
  RunResult up = RunScript({"up", name, "1"});
  RunResult down = RunScript({"down", name});
  if (up.exit_code != 0) {
    return "a one-host cluster cannot be made here (" +
           Joined({"up", name, "1"}) + ": " + Describe(up) + ")";
  }
  if (down.exit_code != 0)
    return Joined({"down", name}) + " failed: " + Describe(down);
  return "";
}

}  // namespace

std::string WhyNetnsUnavailable() {
  static const std::string why = Probe();
  return why;
}

std::string NetnsCluster::ScriptPath() {
  return std::string(KOLO_SOURCE_DIR) + "/scripts/netns_cluster.sh";
}

StatusOr<std::unique_ptr<NetnsCluster>> NetnsCluster::Create(
    int hosts, const Options& options) {
  if (hosts < 1 || hosts > 250) {
    return InvalidArgument("NetnsCluster: " + std::to_string(hosts) +
                           " hosts; make 1 to 250");
  }
  RemoveStaleClusters();
  static std::atomic<int> counter{0};
  const std::string name =
      "kolo" + std::to_string(getpid()) + "c" + std::to_string(counter++);
  std::vector<std::string> args = {"up", name, std::to_string(hosts), "--rate",
                                   options.rate};
  if (options.sshd) args.push_back("--sshd");
  RunResult result = RunScript(args);
  if (result.exit_code != 0) {
    return Internal(Joined(args) + ": " + Describe(result));
  }
  std::vector<Host> parsed;
  for (const std::string& line : Lines(result.out)) {
    std::istringstream fields(line);
    Host host;
    if (fields >> host.name >> host.address) parsed.push_back(host);
  }
  // Owned from here, so that the cluster is torn down on any return.
  std::unique_ptr<NetnsCluster> cluster(
      new NetnsCluster(name, std::move(parsed), options.sshd));
  if (static_cast<int>(cluster->hosts_.size()) != hosts) {
    return Internal(Joined(args) + " printed " +
                    std::to_string(cluster->hosts_.size()) + " hosts, not " +
                    std::to_string(hosts) + ":\n" + result.out);
  }
  return cluster;
}

NetnsCluster::~NetnsCluster() {
  Status status = Down();
  if (!status.ok())
    std::fprintf(stderr, "~NetnsCluster: %s\n", status.ToString().c_str());
}

Status NetnsCluster::Down() {
  if (down_) return Status::Ok();
  down_ = true;
  RunResult result = RunScript({"down", name_});
  if (result.exit_code != 0)
    return Internal(Joined({"down", name_}) + ": " + Describe(result));
  return Status::Ok();
}

std::string NetnsCluster::ssh_config_path() const {
  return sshd_ ? "/tmp/" + name_ + "-ssh/ssh_config" : "";
}

RunResult NetnsCluster::RunIn(const Host& host, const std::string& command,
                              std::chrono::seconds limit) const {
  return RunProgram(
      {IpPath(), "netns", "exec", host.name, "/bin/bash", "-c", command}, {},
      limit);
}

std::unique_ptr<ChildProcess> NetnsCluster::StartIn(
    const Host& host, const std::string& command) const {
  return std::make_unique<ChildProcess>(std::vector<std::string>{
      IpPath(), "netns", "exec", host.name, "/bin/bash", "-c", command});
}

Status NetnsCluster::CutLink(const Host& host) { return SetLink(host, "down"); }

Status NetnsCluster::RestoreLink(const Host& host) {
  return SetLink(host, "up");
}

Status NetnsCluster::SetLink(const Host& host, const char* state) {
  RunResult result =
      RunProgram({IpPath(), "-n", host.name, "link", "set", "eth1", state}, {},
                 std::chrono::seconds(10));
  if (result.exit_code != 0) {
    return Internal("ip -n " + host.name + " link set eth1 " + state + ": " +
                    Describe(result));
  }
  return Status::Ok();
}

}  // namespace kolo::testing
