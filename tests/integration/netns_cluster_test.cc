// scripts/netns_cluster.sh through NetnsCluster: hosts that reach each other
// by address and by name and nothing in the root namespace, a cut link, tbf
// shaping, sshd between hosts, and a teardown that leaves nothing behind.
// Needs root (skipped otherwise; a failure under CI=true).
#include "testing/netns_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testing/requirements.h"

namespace kolo::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;
using Host = NetnsCluster::Host;

constexpr int kPort = 5000;

// `timeout SECONDS python3 -c PROGRAM` for bash, each {KEY} of the program
// replaced by its value. The programs use no single quote.
std::string Python(int seconds, std::string program,
                   const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string placeholder = "{" + key + "}";
    for (size_t at = program.find(placeholder); at != std::string::npos;
         at = program.find(placeholder, at + value.size()))
      program.replace(at, placeholder.size(), value);
  }
  return "exec timeout " + std::to_string(seconds) + " python3 -c '" + program +
         "'";
}

// A listener on address:kPort that accepts `count` connections, prints
// each peer's address on a line, and exits.
std::string Listener(const std::string& address, int count) {
  return Python(60, R"(
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{ADDRESS}", {PORT}))
s.listen(16)
for _ in range({COUNT}):
    c, peer = s.accept()
    print(peer[0], flush=True)
    c.close()
)",
                {{"ADDRESS", address},
                 {"PORT", std::to_string(kPort)},
                 {"COUNT", std::to_string(count)}});
}

// Connects to target:kPort until it works (the listener may not listen
// yet), for at most `seconds`.
std::string ConnectUntilUp(const std::string& target, int seconds = 10) {
  return "timeout " + std::to_string(seconds) +
         " bash -c 'until echo > /dev/tcp/" + target + "/" +
         std::to_string(kPort) + "; do sleep 0.1; done' 2>/dev/null";
}

// One connection attempt, given up after `seconds`.
std::string ConnectOnce(const std::string& target, int seconds) {
  return "timeout " + std::to_string(seconds) + " bash -c 'echo > /dev/tcp/" +
         target + "/" + std::to_string(kPort) + "'";
}

std::vector<std::string> Fields(const std::string& line) {
  std::istringstream stream(line);
  std::vector<std::string> fields;
  std::string field;
  while (stream >> field) fields.push_back(field);
  return fields;
}

RunResult Shell(const std::string& command) {
  return RunProgram({"/bin/bash", "-c", command}, {}, std::chrono::seconds(30));
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Running, as opposed to gone or a zombie waiting for its parent.
bool Running(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() &&
         text[paren + 2] != 'Z';
}

std::unique_ptr<NetnsCluster> MakeCluster(
    int hosts, const NetnsCluster::Options& options) {
  auto cluster = NetnsCluster::Create(hosts, options);
  if (!cluster.ok()) {
    ADD_FAILURE() << cluster.status().ToString();
    return nullptr;
  }
  return std::move(cluster).value();
}

class NetnsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = WhyNetnsUnavailable();
    KOLO_REQUIRE_OR_SKIP(why.empty(), "network namespaces: " << why);
  }
};

TEST_F(NetnsClusterTest, ThreeHostsReachEachOtherAndNothingIsInTheRoot) {
  auto cluster = MakeCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  const std::vector<Host>& hosts = cluster->hosts();
  ASSERT_EQ(hosts.size(), 3u);
  const std::string prefix =
      hosts[0].address.substr(0, hosts[0].address.rfind('.') + 1);
  for (size_t i = 0; i < hosts.size(); ++i) {
    EXPECT_EQ(hosts[i].name, cluster->name() + "-h" + std::to_string(i + 1));
    EXPECT_EQ(hosts[i].address, prefix + std::to_string(i + 1));
  }
  EXPECT_THAT(prefix, ::testing::StartsWith("10."));

  std::vector<std::unique_ptr<ChildProcess>> listeners;
  for (const Host& host : hosts)
    listeners.push_back(cluster->StartIn(host, Listener(host.address, 2)));
  for (const Host& from : hosts) {
    for (const Host& to : hosts) {
      if (&from == &to) continue;
      RunResult r = cluster->RunIn(from, ConnectUntilUp(to.address));
      EXPECT_EQ(r.exit_code, 0)
          << from.name << " -> " << to.address << ": " << Describe(r);
    }
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    RunResult r = listeners[i]->Wait(std::chrono::seconds(10));
    ASSERT_EQ(r.exit_code, 0)
        << hosts[i].name << "'s listener: " << Describe(r);
    std::vector<std::string> others;
    for (const Host& other : hosts)
      if (&other != &hosts[i]) others.push_back(other.address);
    EXPECT_THAT(Lines(r.out), UnorderedElementsAreArray(others))
        << hosts[i].name << " accepted from";
  }

  // The root namespace holds none of the addresses, and no cluster name.
  RunResult root = Shell("ip -4 -o addr show");
  ASSERT_EQ(root.exit_code, 0) << Describe(root);
  for (const Host& host : hosts) {
    EXPECT_THAT(root.out, ::testing::Not(HasSubstr(" " + host.address + "/")));
    EXPECT_NE(Shell("getent hosts " + host.name).exit_code, 0)
        << host.name << " resolves in the root namespace";
  }
}

TEST_F(NetnsClusterTest, NamesResolveInsideEveryHost) {
  auto cluster = MakeCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  const std::vector<Host>& hosts = cluster->hosts();
  std::string command;
  for (const Host& host : hosts) command += "getent hosts " + host.name + ";";
  for (const Host& from : hosts) {
    RunResult r = cluster->RunIn(from, command);
    ASSERT_EQ(r.exit_code, 0) << from.name << ": " << Describe(r);
    std::vector<std::string> lines = Lines(r.out);
    ASSERT_EQ(lines.size(), hosts.size()) << r.out;
    for (size_t i = 0; i < hosts.size(); ++i) {
      EXPECT_EQ(Fields(lines[i]),
                (std::vector<std::string>{hosts[i].address, hosts[i].name}))
          << "in " << from.name;
    }
  }
  // And a connection by name.
  auto listener = cluster->StartIn(hosts[1], Listener(hosts[1].address, 1));
  RunResult r = cluster->RunIn(hosts[0], ConnectUntilUp(hosts[1].name));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  RunResult accepted = listener->Wait(std::chrono::seconds(10));
  EXPECT_EQ(accepted.out, hosts[0].address + "\n") << Describe(accepted);
}

TEST_F(NetnsClusterTest, CutLinkMakesTheHostUnreachableUntilRestored) {
  auto cluster = MakeCluster(3, {});
  ASSERT_NE(cluster, nullptr);
  const Host& h1 = cluster->hosts()[0];
  const Host& h2 = cluster->hosts()[1];
  const Host& h3 = cluster->hosts()[2];
  auto listener2 = cluster->StartIn(h2, Listener(h2.address, 1));
  auto listener3 = cluster->StartIn(h3, Listener(h3.address, 2));
  RunResult before = cluster->RunIn(h1, ConnectUntilUp(h3.address));
  ASSERT_EQ(before.exit_code, 0) << Describe(before);

  ASSERT_TRUE(cluster->CutLink(h3).ok());
  // h1 still knows h3's MAC address: its SYNs go out and are lost, so the
  // attempt ends with the bound (timeout's exit 124).
  RunResult to_cut = cluster->RunIn(h1, ConnectOnce(h3.address, 3));
  EXPECT_NE(to_cut.exit_code, 0) << Describe(to_cut);
  EXPECT_LT(to_cut.seconds, 6.0);
  // h3 has no route left at all: connect fails at once.
  RunResult from_cut = cluster->RunIn(h3, ConnectOnce(h1.address, 3));
  EXPECT_NE(from_cut.exit_code, 0) << Describe(from_cut);
  EXPECT_LT(from_cut.seconds, 6.0);
  // The others still talk.
  RunResult others = cluster->RunIn(h1, ConnectUntilUp(h2.address));
  EXPECT_EQ(others.exit_code, 0) << Describe(others);

  ASSERT_TRUE(cluster->RestoreLink(h3).ok());
  RunResult after = cluster->RunIn(h1, ConnectUntilUp(h3.address));
  EXPECT_EQ(after.exit_code, 0) << Describe(after);
  RunResult accepted3 = listener3->Wait(std::chrono::seconds(10));
  EXPECT_EQ(accepted3.out, h1.address + "\n" + h1.address + "\n")
      << Describe(accepted3);
  RunResult accepted2 = listener2->Wait(std::chrono::seconds(10));
  EXPECT_EQ(accepted2.out, h1.address + "\n") << Describe(accepted2);
}

TEST_F(NetnsClusterTest, TbfAt100MbitShapesTcpThroughput) {
  NetnsCluster::Options options;
  options.rate = "100mbit";
  auto cluster = MakeCluster(2, options);
  ASSERT_NE(cluster, nullptr);
  const Host& h1 = cluster->hosts()[0];
  const Host& h2 = cluster->hosts()[1];
  RunResult qdisc = cluster->RunIn(h1, "tc qdisc show dev eth1");
  EXPECT_THAT(qdisc.out, HasSubstr("tbf"));
  EXPECT_THAT(qdisc.out, HasSubstr("rate 100Mbit"));

  // 20 MiB from h1 to h2, timed by the receiver from accept to end of
  // stream: about 1.7 s at 100 Mbit/s.
  constexpr int64_t kBytes = 20 << 20;
  const std::map<std::string, std::string> values = {
      {"ADDRESS", h2.address},
      {"PORT", std::to_string(kPort)},
      {"BYTES", std::to_string(kBytes)}};
  auto receiver = cluster->StartIn(h2, Python(60, R"(
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{ADDRESS}", {PORT}))
s.listen(1)
c, _ = s.accept()
start = time.monotonic()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    n += len(b)
print(n, time.monotonic() - start, flush=True)
)",
                                              values));
  RunResult sender = cluster->RunIn(h1, Python(30, R"(
import socket, time
for _ in range(100):
    try:
        c = socket.create_connection(("{ADDRESS}", {PORT}))
        break
    except OSError:
        time.sleep(0.1)
c.sendall(bytes({BYTES}))
c.close()
)",
                                               values));
  ASSERT_EQ(sender.exit_code, 0) << Describe(sender);
  RunResult received = receiver->Wait(std::chrono::seconds(30));
  ASSERT_EQ(received.exit_code, 0) << Describe(received);
  std::vector<std::string> fields = Fields(received.out);
  ASSERT_EQ(fields.size(), 2u) << received.out;
  EXPECT_EQ(std::stoll(fields[0]), kBytes);
  const double seconds = std::stod(fields[1]);
  const double mbit_per_second = kBytes * 8 / seconds / 1e6;
  std::printf("20 MiB at tbf 100mbit: %.2f s, %.1f Mbit/s\n", seconds,
              mbit_per_second);
  EXPECT_LT(mbit_per_second, 200.0);
  // Shaped, not starved: a wrong burst would leave a trickle.
  EXPECT_GT(mbit_per_second, 20.0);
}

TEST_F(NetnsClusterTest, SshFromOneHostToAnother) {
  KOLO_REQUIRE_OR_SKIP(Exists("/usr/sbin/sshd"),
                       "/usr/sbin/sshd (openssh-server)");
  KOLO_REQUIRE_OR_SKIP(OnPath("ssh"), "ssh (openssh-client)");
  NetnsCluster::Options options;
  options.sshd = true;
  auto cluster = MakeCluster(2, options);
  ASSERT_NE(cluster, nullptr);
  const Host& h1 = cluster->hosts()[0];
  const Host& h2 = cluster->hosts()[1];
  ASSERT_TRUE(Exists(cluster->ssh_config_path())) << cluster->ssh_config_path();
  // Each sshd has a UTS namespace of its own, so a session prints its
  // host's name (launchers started over ssh tell hosts apart by it);
  // SSH_CONNECTION shows which hosts talked.
  RunResult r = cluster->RunIn(
      h1, "timeout 30 ssh -F " + cluster->ssh_config_path() + " " + h2.name +
              " 'hostname; echo $SSH_CONNECTION; getent hosts " + h1.name +
              "'");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], h2.name);
  std::vector<std::string> connection = Fields(lines[1]);
  ASSERT_EQ(connection.size(), 4u) << lines[1];
  EXPECT_EQ(connection[0], h1.address);
  EXPECT_EQ(connection[2], h2.address);
  EXPECT_EQ(connection[3], "22");
  EXPECT_EQ(Fields(lines[2]), (std::vector<std::string>{h1.address, h1.name}));
}

TEST_F(NetnsClusterTest, TeardownLeavesNoNamespaceProcessOrFile) {
  NetnsCluster::Options options;
  options.sshd = Exists("/usr/sbin/sshd");
  const bool sshd = options.sshd;
  auto cluster = MakeCluster(3, options);
  ASSERT_NE(cluster, nullptr);
  const std::string name = cluster->name();
  auto sleeper = cluster->StartIn(cluster->hosts()[1], "exec sleep 300");
  std::vector<std::string> namespaces = {name + "-sw"};
  for (const Host& host : cluster->hosts()) namespaces.push_back(host.name);
  std::vector<std::string> pids;
  // The sleeper is in once `ip netns exec` has switched namespace.
  for (int tries = 0; tries < 50; ++tries) {
    const std::vector<std::string> in =
        Lines(Shell("ip netns pids " + cluster->hosts()[1].name).out);
    if (std::find(in.begin(), in.end(), std::to_string(sleeper->pid())) !=
        in.end())
      break;
    usleep(100 * 1000);
  }
  for (const std::string& ns : namespaces) {
    RunResult r = Shell("ip netns pids " + ns);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    for (const std::string& pid : Lines(r.out)) pids.push_back(pid);
  }
  EXPECT_THAT(pids, ::testing::Contains(std::to_string(sleeper->pid())));
  EXPECT_GE(pids.size(), sshd ? 4u : 1u);
  for (const std::string& ns : namespaces)
    EXPECT_TRUE(Exists("/etc/netns/" + ns + "/hosts")) << ns;

  ASSERT_TRUE(cluster->Down().ok());
  RunResult list = Shell("ip netns list");
  ASSERT_EQ(list.exit_code, 0) << Describe(list);
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr(name + "-")));
  for (const std::string& ns : namespaces)
    EXPECT_FALSE(Exists("/etc/netns/" + ns)) << ns;
  EXPECT_FALSE(Exists("/tmp/" + name + "-ssh"));
  for (const std::string& pid : pids)
    EXPECT_FALSE(Running(pid)) << "pid " << pid << " of " << name;
  RunResult slept = sleeper->Wait(std::chrono::seconds(5));
  EXPECT_EQ(slept.signal, SIGKILL) << Describe(slept);
  // Down again, and the destructor's, do nothing and succeed.
  EXPECT_TRUE(cluster->Down().ok());
  RunResult again =
      RunProgram({"/bin/bash", NetnsCluster::ScriptPath(), "down", name});
  EXPECT_EQ(again.exit_code, 0) << Describe(again);
}

TEST_F(NetnsClusterTest, LeftoversOfACrashedRunAreReplacedOrRemoved) {
  // A cluster named after a process that is gone, as a crashed run leaves.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string stale = "kolo" + std::to_string(dead) + "c0";
  const std::string script = NetnsCluster::ScriptPath();
  RunResult up = RunProgram({"/bin/bash", script, "up", stale, "2"});
  ASSERT_EQ(up.exit_code, 0) << Describe(up);
  // up on a name that exists replaces it.
  RunResult again = RunProgram({"/bin/bash", script, "up", stale, "1"});
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_EQ(Lines(again.out).size(), 1u) << again.out;
  EXPECT_THAT(Shell("ip netns list").out,
              ::testing::Not(HasSubstr(stale + "-h2")));

  auto cluster = MakeCluster(1, {});
  ASSERT_NE(cluster, nullptr);
  RunResult list = Shell("ip netns list");
  EXPECT_THAT(list.out, ::testing::Not(HasSubstr(stale + "-")));
  EXPECT_THAT(list.out, HasSubstr(cluster->name() + "-h1"));
  EXPECT_FALSE(Exists("/etc/netns/" + stale + "-h1"));
}

}  // namespace
}  // namespace kolo::testing
