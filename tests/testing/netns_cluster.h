// NetnsCluster: a test cluster of network namespaces, made and torn down by
// scripts/netns_cluster.sh, for integration tests that need several hosts
// with their own addresses, a link that can be cut, a rate-limited network
// or sshd.
//
//   KOLO_REQUIRE_OR_SKIP(WhyNetnsUnavailable().empty(),
//                        "network namespaces: " << WhyNetnsUnavailable());
//   NetnsCluster::Options options;
//   options.rate = "1gbit";
//   auto cluster = NetnsCluster::Create(3, options);
//   ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
//   const auto& h2 = (*cluster)->hosts()[1];
//   RunResult r = (*cluster)->RunIn((*cluster)->hosts()[0],
//                                   "getent hosts " + h2.name);
//
// Each cluster gets a name of its own, "kolo<pid>c<counter>" (namespaces
// kolo<pid>c<counter>-h1.., -sw), so tests in one process or in processes
// side by side do not collide. Create() first removes clusters left by
// processes that died (a crashed test run), found by the pid in the name.
// The destructor tears the cluster down, so a failing test leaves nothing;
// Down() does it early and reports how it went.
//
// Thread-safety: Create() may run on any thread; one cluster is used from
// one thread.
#ifndef KOLO_TESTS_TESTING_NETNS_CLUSTER_H_
#define KOLO_TESTS_TESTING_NETNS_CLUSTER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "testing/child_process.h"

namespace kolo::testing {

// "" when a NetnsCluster can be made here; else why not (not root, no `ip`,
// `ip netns add` refused in this container). Probes once per process.
std::string WhyNetnsUnavailable();

// Outside NetnsCluster so that `= {}` can be a default argument of its
// members (GCC reads a nested class's default member initializers late).
struct NetnsClusterOptions {
  // tbf shaping of what each host sends: "100mbit", "1gbit", "10gbit", or
  // "none".
  std::string rate = "none";
  // An sshd in each host, reached with ssh -F ssh_config_path() NAME-hI.
  bool sshd = false;
};

struct NetnsHost {
  std::string name;     // the namespace and the host name, "kolo12c0-h1"
  std::string address;  // its eth1 address, "10.X.0.1"
};

class NetnsCluster {
 public:
  using Options = NetnsClusterOptions;
  using Host = NetnsHost;

  // Makes a cluster of `hosts` hosts (1..250).
  static StatusOr<std::unique_ptr<NetnsCluster>> Create(
      int hosts, const Options& options = {});
  ~NetnsCluster();
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  // Tears the cluster down: kills every process inside, removes the
  // namespaces, /etc/netns/NAME-*, /tmp/NAME-ssh. Later calls do nothing.
  Status Down();

  const std::string& name() const { return name_; }
  const std::vector<Host>& hosts() const { return hosts_; }
  // /tmp/NAME-ssh/ssh_config; "" without Options::sshd.
  std::string ssh_config_path() const;

  // Runs `command` with bash -c inside `host` (ip netns exec, so cluster
  // names resolve), killed after `limit`.
  RunResult RunIn(const Host& host, const std::string& command,
                  std::chrono::seconds limit = std::chrono::seconds(30)) const;
  // Starts `command` inside `host` and returns at once; Down() kills it
  // if it is still running.
  std::unique_ptr<ChildProcess> StartIn(const Host& host,
                                        const std::string& command) const;

  // Sets the host's eth1 down (up): the host can no longer reach the
  // others nor be reached.
  Status CutLink(const Host& host);
  Status RestoreLink(const Host& host);

  // scripts/netns_cluster.sh in the source tree.
  static std::string ScriptPath();

 private:
  NetnsCluster(std::string name, std::vector<Host> hosts, bool sshd)
      : name_(std::move(name)), hosts_(std::move(hosts)), sshd_(sshd) {}
  Status SetLink(const Host& host, const char* state);

  std::string name_;
  std::vector<Host> hosts_;
  bool sshd_ = false;
  bool down_ = false;
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_NETNS_CLUSTER_H_
