// The namespace cluster `kolo-bench soak` runs its jobs on, and the hands
// it hurts them with. scripts/netns_cluster.sh makes and removes the
// cluster (namespaces NAME-h1.., a bridge in NAME-sw, eth1 in each host;
// the one place that knows the wiring); this class adds what a soak needs
// while it runs:
//   - which processes live in which host (their /proc/PID/ns/net against
//     the host's namespace), with their program and command line;
//   - which TCP ports listen in a host, read from the table of a process
//     kept in each host for the purpose (an "anchor": a sleep);
//   - a host's link set down or up;
//   - garbage connections to an address and port, made from inside a host
//     (a forked child that enters the host's namespace).
// Needs root. Thread-compatible: used from one thread.
#ifndef KOLO_TOOLS_KOLO_BENCH_SOAK_CLUSTER_H_
#define KOLO_TOOLS_KOLO_BENCH_SOAK_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::bench {

struct SoakHost {
  std::string name;     // the namespace and host name, "kolosoak12-h1"
  std::string address;  // its eth1 address
  uint64_t net_inode = 0;
  pid_t anchor = -1;
};

struct ClusterProcess {
  pid_t pid = -1;
  size_t host = 0;  // index into hosts()
  std::string exe;
  std::string cmdline;  // arguments joined by spaces
};

struct Listener {
  std::string address;
  int port = 0;
  uint64_t inode = 0;
};

// The value of `name` in the environment of `pid`; "" when it has none.
std::string ProcessEnvironment(pid_t pid, const std::string& name);

class SoakCluster {
 public:
  // Makes a cluster of `hosts` hosts with `script` (netns_cluster.sh),
  // named after this process, after removing the clusters of soaks that
  // died. kInternal quoting the script when it fails.
  static StatusOr<std::unique_ptr<SoakCluster>> Up(const std::string& script,
                                                   int hosts);
  ~SoakCluster();
  SoakCluster(const SoakCluster&) = delete;
  SoakCluster& operator=(const SoakCluster&) = delete;

  // Stops the anchors and removes the cluster (the script kills whatever
  // still runs inside). Later calls do nothing.
  Status Down();

  const std::string& name() const { return name_; }
  const std::vector<SoakHost>& hosts() const { return hosts_; }
  std::vector<std::string> HostNames() const;

  // Every process in the cluster's hosts but the anchors.
  std::vector<ClusterProcess> Processes() const;
  // The TCP sockets listening in `host` (IPv4).
  std::vector<Listener> Listeners(size_t host) const;
  // The inodes of the sockets `pid` holds open.
  static std::set<uint64_t> SocketInodes(pid_t pid);

  // `host`'s eth1 up or down.
  Status SetLink(size_t host, bool up) const;

  // `connections` connections from inside `from` to address:port, each
  // sending GarbageBytes of up to 4 KiB from `seed` and closing; bounded
  // by a few seconds. How many connected.
  int SendGarbage(size_t from, const std::string& address, int port,
                  uint64_t seed, int connections) const;

  // The namespaces of this cluster that exist now (after Down: left over).
  int64_t NamespacesLeft() const;

 private:
  SoakCluster(std::string script, std::string name)
      : script_(std::move(script)), name_(std::move(name)) {}
  Status StartAnchors();

  std::string script_;
  std::string name_;
  std::vector<SoakHost> hosts_;
  bool down_ = false;
};

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_SOAK_CLUSTER_H_
