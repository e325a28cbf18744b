// Choosing a network interface: parsing --network-interface, filtering this
// host's addresses by it, subnet arithmetic, the kernel's route to a peer and
// TCP probes over loopback. When run as root with `ip` installed, a veth
// pair into a network namespace of its own gives a non-loopback interface
// and a peer behind it. Ports are chosen by the OS (port 0).
#include "net/interfaces.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "testing/requirements.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

InterfaceSpec MustParse(const std::string& text) {
  StatusOr<InterfaceSpec> spec = InterfaceSpec::Parse(text, "--flag");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : InterfaceSpec();
}

InterfaceAddress Address(const std::string& interface,
                         const std::string& address, bool up = true,
                         bool loopback = false) {
  InterfaceAddress a;
  a.interface = interface;
  a.address = address;
  a.prefix_length = 24;
  a.up = up;
  a.loopback = loopback;
  return a;
}

std::vector<std::string> Names(const std::vector<InterfaceAddress>& all) {
  std::vector<std::string> names;
  for (const InterfaceAddress& a : all) {
    names.push_back(a.interface + "=" + a.address);
  }
  return names;
}

// A port that was free a moment ago: listened on, then closed.
int ClosedPort() {
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  return listener.ok() ? listener->LocalPort() : 1;
}

TEST(InterfaceSpecTest, EmptyOrBlankTextIsNoConstraint) {
  for (const std::string text : {"", " ", " \t "}) {
    InterfaceSpec spec = MustParse(text);
    EXPECT_TRUE(spec.empty()) << "'" << text << "'";
    EXPECT_EQ(spec.ToString(), "");
    EXPECT_TRUE(spec.Matches(Address("anything", "192.0.2.1")));
  }
  EXPECT_TRUE(InterfaceSpec().empty());
}

TEST(InterfaceSpecTest, ParsesNamesSubnetsAndMixes) {
  InterfaceSpec names = MustParse("eth1,ib0");
  EXPECT_FALSE(names.empty());
  EXPECT_EQ(names.ToString(), "eth1,ib0");

  InterfaceSpec subnet = MustParse("10.1.0.0/24");
  EXPECT_EQ(subnet.ToString(), "10.1.0.0/24");

  // Blanks around pieces are dropped: "eth1, 10.1.0.0/24" from a shell.
  InterfaceSpec mix = MustParse(" eth1 , 10.1.0.0/24,fd00::/8,veth-h1 ");
  EXPECT_EQ(mix.ToString(), "eth1,10.1.0.0/24,fd00::/8,veth-h1");
}

TEST(InterfaceSpecTest, BadSubnetsNameTheFlagAndThePiece) {
  struct Case {
    std::string text;
    std::string piece;
  };
  for (const Case& c : std::vector<Case>{
           {"10.1.0.0/33", "10.1.0.0/33"},
           {"eth1,10.1.0.0/33", "10.1.0.0/33"},
           {"10.1.0.0/", "10.1.0.0/"},
           {"10.1.0.0/-1", "10.1.0.0/-1"},
           {"10.1.0.0/2x", "10.1.0.0/2x"},
           {"10.1.0/24", "10.1.0/24"},
           {"10.1.0.256/24", "10.1.0.256/24"},
           {"/24", "/24"},
           {"fd00::/129", "fd00::/129"},
           {"eth1/24", "eth1/24"},
       }) {
    StatusOr<InterfaceSpec> spec =
        InterfaceSpec::Parse(c.text, "--network-interface");
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(),
                HasSubstr("--network-interface: '" + c.piece +
                          "' is not a valid subnet"));
  }
  EXPECT_THAT(InterfaceSpec::Parse("10.1.0.0/33", "KOLO_NETWORK_INTERFACE")
                  .status()
                  .message(),
              HasSubstr("over 32"));
}

TEST(InterfaceSpecTest, EmptyPiecesAreErrors) {
  for (const std::string text :
       {"eth1,,ib0", "eth1,", ",eth1", "eth1, ,ib0", ","}) {
    StatusOr<InterfaceSpec> spec =
        InterfaceSpec::Parse(text, "KOLO_NETWORK_INTERFACE");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(
        spec.status().message(),
        HasSubstr("KOLO_NETWORK_INTERFACE: empty entry in '" + text + "'"));
  }
}

TEST(InterfaceSpecTest, BadNamesAreErrors) {
  StatusOr<InterfaceSpec> long_name =
      InterfaceSpec::Parse("a-name-of-16-chr", "--network-interface");
  ASSERT_FALSE(long_name.ok());
  EXPECT_THAT(long_name.status().message(),
              HasSubstr("'a-name-of-16-chr' is not an interface name"));
  EXPECT_TRUE(InterfaceSpec::Parse("a-name-of-15-ch", "--x").ok());

  StatusOr<InterfaceSpec> blank_inside =
      InterfaceSpec::Parse("eth 1", "--network-interface");
  ASSERT_FALSE(blank_inside.ok());
  EXPECT_THAT(blank_inside.status().message(), HasSubstr("whitespace"));
}

TEST(InterfaceSpecTest, MatchesByNameOrSubnet) {
  InterfaceSpec spec = MustParse("eth1,10.1.0.0/24");
  EXPECT_TRUE(spec.Matches(Address("eth1", "192.0.2.7")));
  EXPECT_TRUE(spec.Matches(Address("eth9", "10.1.0.2")));
  EXPECT_TRUE(spec.Matches(Address("eth9", "10.1.0.255")));
  EXPECT_FALSE(spec.Matches(Address("eth9", "10.1.1.2")));
  EXPECT_FALSE(spec.Matches(Address("eth10", "192.0.2.7")));
  EXPECT_FALSE(spec.Matches(Address("eth", "192.0.2.7")));
  // An alias label lives on its device; the device does not match the label.
  EXPECT_TRUE(spec.Matches(Address("eth1:0", "192.0.2.8")));
  EXPECT_FALSE(MustParse("eth1:0").Matches(Address("eth1", "192.0.2.7")));
  // An IPv6 address is never inside an IPv4 subnet.
  EXPECT_FALSE(spec.Matches(Address("eth9", "fd00::1")));
  EXPECT_TRUE(MustParse("fd00::/8").Matches(Address("eth9", "fd00::1")));
}

TEST(InterfaceSpecTest, AHostAddressIsItsOwnSubnet) {
  InterfaceSpec spec = MustParse("10.1.0.2");
  EXPECT_EQ(spec.ToString(), "10.1.0.2");
  EXPECT_TRUE(spec.Matches(Address("eth1", "10.1.0.2")));
  EXPECT_FALSE(spec.Matches(Address("eth1", "10.1.0.3")));
  EXPECT_TRUE(MustParse("fd00::2").Matches(Address("eth1", "fd00::2")));
}

TEST(CandidateAddressesTest, LoopbackOnlyWhenAllowed) {
  const std::vector<InterfaceAddress> all = {
      Address("lo", "127.0.0.1", true, true),
      Address("eth0", "192.0.2.2"),
      Address("lo", "::1", true, true),
  };
  EXPECT_THAT(Names(CandidateAddresses(all, InterfaceSpec(), false)),
              ::testing::ElementsAre("eth0=192.0.2.2"));
  EXPECT_THAT(
      Names(CandidateAddresses(all, InterfaceSpec(), true)),
      ::testing::ElementsAre("lo=127.0.0.1", "eth0=192.0.2.2", "lo=::1"));
  // Naming lo does not let it in: a multi-host job over loopback would hang.
  EXPECT_TRUE(CandidateAddresses(all, MustParse("lo"), false).empty());
}

TEST(CandidateAddressesTest, DownInterfacesAreLeftOut) {
  const std::vector<InterfaceAddress> all = {
      Address("eth0", "192.0.2.2", false),
      Address("eth1", "10.1.0.2"),
      Address("ib0", "10.2.0.2", false),
  };
  EXPECT_THAT(Names(CandidateAddresses(all, InterfaceSpec(), true)),
              ::testing::ElementsAre("eth1=10.1.0.2"));
  EXPECT_TRUE(CandidateAddresses(all, MustParse("ib0"), true).empty());
}

TEST(CandidateAddressesTest, SpecByNameAndSubnetKeepsOrder) {
  const std::vector<InterfaceAddress> all = {
      Address("eth0", "192.0.2.2"), Address("eth1", "10.1.0.2"),
      Address("eth2", "10.1.0.9"),  Address("ib0", "10.2.0.2"),
      Address("eth1", "fe80::1"),   Address("docker0", "172.17.0.1"),
  };
  EXPECT_THAT(
      Names(CandidateAddresses(all, MustParse("ib0,eth1"), false)),
      ::testing::ElementsAre("eth1=10.1.0.2", "ib0=10.2.0.2", "eth1=fe80::1"));
  EXPECT_THAT(Names(CandidateAddresses(all, MustParse("10.1.0.0/24"), false)),
              ::testing::ElementsAre("eth1=10.1.0.2", "eth2=10.1.0.9"));
  EXPECT_THAT(
      Names(CandidateAddresses(all, MustParse("10.2.0.0/16,eth0"), false)),
      ::testing::ElementsAre("eth0=192.0.2.2", "ib0=10.2.0.2"));
  EXPECT_TRUE(CandidateAddresses(all, MustParse("eth7"), false).empty());
}

TEST(AddressInSubnetTest, Boundaries) {
  EXPECT_TRUE(*AddressInSubnet("10.1.0.0", "10.1.0.0/24"));
  EXPECT_TRUE(*AddressInSubnet("10.1.0.255", "10.1.0.0/24"));
  EXPECT_FALSE(*AddressInSubnet("10.1.1.0", "10.1.0.0/24"));
  EXPECT_FALSE(*AddressInSubnet("10.0.255.255", "10.1.0.0/24"));
  // A prefix that is not a whole number of bytes.
  EXPECT_TRUE(*AddressInSubnet("10.1.0.13", "10.1.0.8/29"));
  EXPECT_FALSE(*AddressInSubnet("10.1.0.16", "10.1.0.8/29"));
  EXPECT_FALSE(*AddressInSubnet("10.1.0.7", "10.1.0.8/29"));
  // Host bits in the subnet are ignored, as `ip addr` prints them.
  EXPECT_TRUE(*AddressInSubnet("10.1.0.77", "10.1.0.2/24"));
}

TEST(AddressInSubnetTest, SlashZeroHoldsEveryAddressOfItsFamily) {
  EXPECT_TRUE(*AddressInSubnet("1.2.3.4", "0.0.0.0/0"));
  EXPECT_TRUE(*AddressInSubnet("255.255.255.255", "10.0.0.0/0"));
  EXPECT_TRUE(*AddressInSubnet("fd00::1", "::/0"));
  EXPECT_FALSE(*AddressInSubnet("1.2.3.4", "::/0"));
  EXPECT_FALSE(*AddressInSubnet("::1", "0.0.0.0/0"));
}

TEST(AddressInSubnetTest, SlashThirtyTwoHoldsOneAddress) {
  EXPECT_TRUE(*AddressInSubnet("10.1.0.2", "10.1.0.2/32"));
  EXPECT_FALSE(*AddressInSubnet("10.1.0.3", "10.1.0.2/32"));
  EXPECT_FALSE(*AddressInSubnet("10.1.0.1", "10.1.0.2/32"));
  EXPECT_TRUE(*AddressInSubnet("fd00::2", "fd00::2/128"));
  EXPECT_FALSE(*AddressInSubnet("fd00::3", "fd00::2/128"));
  EXPECT_TRUE(*AddressInSubnet("fd00::1:2", "fd00::/64"));
  EXPECT_FALSE(*AddressInSubnet("fd00:0:0:1::2", "fd00::/64"));
}

TEST(AddressInSubnetTest, BadInputNamesWhatIsBad) {
  for (const std::string cidr :
       {"10.1.0.0", "10.1.0.0/33", "10.1.0.0/", "10.1.0.0/ 8", "10.1.0.0/+8",
        "10.1.0.0/8/8", "host/8", "", "/8", "::/129", "10.1.0.0/0008"}) {
    StatusOr<bool> in = AddressInSubnet("10.1.0.1", cidr);
    ASSERT_FALSE(in.ok()) << "'" << cidr << "'";
    EXPECT_EQ(in.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(in.status().message(),
                HasSubstr("'" + cidr + "' is not a valid subnet"));
  }
  for (const std::string address :
       {"", "10.1.0", "10.1.0.256", "eth0", "10.1.0.1/32", " 10.1.0.1"}) {
    StatusOr<bool> in = AddressInSubnet(address, "10.1.0.0/24");
    ASSERT_FALSE(in.ok()) << "'" << address << "'";
    EXPECT_THAT(in.status().message(),
                HasSubstr("'" + address + "' is not a numeric"));
  }
}

TEST(ListInterfaceAddressesTest, HasLoopbackFirstIPv4First) {
  StatusOr<std::vector<InterfaceAddress>> all = ListInterfaceAddresses();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  bool found = false;
  bool seen_ipv6 = false;
  for (const InterfaceAddress& a : *all) {
    const bool ipv6 = a.address.find(':') != std::string::npos;
    EXPECT_FALSE(seen_ipv6 && !ipv6) << a.address << " after an IPv6 address";
    seen_ipv6 = seen_ipv6 || ipv6;
    EXPECT_TRUE(*AddressInSubnet(a.address, ipv6 ? "::/0" : "0.0.0.0/0"));
    if (a.interface == "lo" && a.address == "127.0.0.1") {
      found = true;
      EXPECT_TRUE(a.loopback);
      EXPECT_TRUE(a.up);
      EXPECT_EQ(a.prefix_length, 8);
    }
  }
  EXPECT_TRUE(found) << ::testing::PrintToString(Names(*all));
}

TEST(RouteToTest, LoopbackGoesOverLo) {
  StatusOr<InterfaceAddress> route = RouteTo("127.0.0.1");
  ASSERT_TRUE(route.ok()) << route.status().ToString();
  EXPECT_EQ(route->interface, "lo");
  EXPECT_EQ(route->address, "127.0.0.1");
  EXPECT_TRUE(route->loopback);
}

TEST(RouteToTest, ResolvesHostnames) {
  StatusOr<InterfaceAddress> route = RouteTo("localhost");
  ASSERT_TRUE(route.ok()) << route.status().ToString();
  EXPECT_TRUE(route->loopback);
}

TEST(RouteToTest, UnresolvableHostIsInvalid) {
  StatusOr<InterfaceAddress> route = RouteTo("no-such-host.invalid");
  ASSERT_FALSE(route.ok());
  EXPECT_EQ(route.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(route.status().message(), HasSubstr("no-such-host.invalid"));
}

TEST(ProbeTcpTest, ReachesAListener) {
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  Status probe =
      ProbeTcp("", "127.0.0.1", listener->LocalPort(), milliseconds(2000));
  EXPECT_TRUE(probe.ok()) << probe.ToString();
}

TEST(ProbeTcpTest, ReachesAListenerFromABoundAddress) {
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  Status probe = ProbeTcp("127.0.0.1", "127.0.0.1", listener->LocalPort(),
                          milliseconds(2000));
  EXPECT_TRUE(probe.ok()) << probe.ToString();
  // The connection came from the bound address.
  StatusOr<Socket> accepted =
      listener->Accept(DeadlineAfter(milliseconds(2000)));
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_THAT(accepted->PeerAddress(), HasSubstr("127.0.0.1:"));
}

TEST(ProbeTcpTest, AClosedPortRefuses) {
  const int port = ClosedPort();
  Status probe = ProbeTcp("", "127.0.0.1", port, milliseconds(2000));
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.code(), StatusCode::kPeerFailure);
  EXPECT_THAT(probe.message(), HasSubstr("127.0.0.1:" + std::to_string(port) +
                                         " refused the connection"));
}

TEST(ProbeTcpTest, BadArgumentsAreInvalid) {
  EXPECT_EQ(ProbeTcp("", "127.0.0.1", 0, milliseconds(100)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ProbeTcp("", "127.0.0.1", 70000, milliseconds(100)).code(),
            StatusCode::kInvalidArgument);
  Status not_numeric = ProbeTcp("eth0", "127.0.0.1", 1, milliseconds(100));
  EXPECT_EQ(not_numeric.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_numeric.message(), HasSubstr("'eth0'"));
  // 192.0.2.0/24 is reserved for documentation, so a host rarely owns any
  // of it; a test network might, so take the first address it does not own.
  StatusOr<std::vector<InterfaceAddress>> all = ListInterfaceAddresses();
  ASSERT_TRUE(all.ok());
  std::string not_ours_address;
  for (int last = 1; last < 255 && not_ours_address.empty(); ++last) {
    const std::string candidate = "192.0.2." + std::to_string(last);
    bool owned = false;
    for (const InterfaceAddress& a : *all) owned |= a.address == candidate;
    if (!owned) not_ours_address = candidate;
  }
  ASSERT_FALSE(not_ours_address.empty())
      << "this host owns all of 192.0.2.0/24";
  Status not_ours =
      ProbeTcp(not_ours_address, "127.0.0.1", ClosedPort(), milliseconds(100));
  EXPECT_EQ(not_ours.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_ours.message(), HasSubstr("not an address of this host"));
}

// Runs a shell command; true when it exits 0.
bool Shell(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A veth pair: one end here with host_address_, the other in a network
// namespace of its own with peer_address_, so the peer is reachable only
// over the new interface. Names and the /29 (in 198.18.0.0/15, kept for
// network tests) come from the pid, so test processes running side by side
// do not meet.
class VethTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KOLO_REQUIRE_OR_SKIP(::geteuid() == 0,
                         "root, to make a network namespace and a veth pair");
    const int pid = static_cast<int>(::getpid());
    namespace_ = "kolo-if-test-" + std::to_string(pid);
    host_ = "kif" + std::to_string(pid) + "h";
    peer_ = "kif" + std::to_string(pid) + "p";
    // 2^17 addresses, 8 to a /29: host .1, peer .2, nobody at .3.
    const int offset = pid % (1 << 14) * 8;
    auto address = [offset](int host) {
      return "198." + std::to_string(18 + offset / 65536) + "." +
             std::to_string(offset / 256 % 256) + "." +
             std::to_string(offset % 256 + host);
    };
    subnet_ = address(0) + "/29";
    host_address_ = address(1);
    peer_address_ = address(2);
    absent_address_ = address(3);
    const std::string in_namespace = "ip -n " + namespace_ + " ";
    for (const std::string& command : {
             "ip netns add " + namespace_,
             "ip link add " + host_ + " type veth peer name " + peer_,
             "ip link set " + peer_ + " netns " + namespace_,
             "ip addr add " + host_address_ + "/29 dev " + host_,
             in_namespace + "addr add " + peer_address_ + "/29 dev " + peer_,
             "ip link set " + host_ + " up",
             in_namespace + "link set " + peer_ + " up",
         }) {
      // As root, a failure here is iproute2 missing or namespaces turned
      // off: a requirement of the machine, which CI's setup provides.
      KOLO_REQUIRE_OR_SKIP(Shell(command),
                           "a veth pair into a network "
                           "namespace (iproute2): '"
                               << command << "' failed");
    }
  }

  void TearDown() override {
    if (namespace_.empty()) return;
    // Either end's deletion takes the other with it; a test may have
    // deleted ours already, so failures here are expected.
    Shell("ip link del " + host_);
    Shell("ip netns del " + namespace_);
  }

  // Our end of the pair, once the kernel reports it running (carrier comes
  // a moment after both ends are up).
  StatusOr<InterfaceAddress> HostEnd() {
    for (int attempt = 0; attempt < 100; ++attempt) {
      KOLO_ASSIGN_OR_RETURN(std::vector<InterfaceAddress> all,
                            ListInterfaceAddresses());
      for (const InterfaceAddress& a : all) {
        if (a.interface == host_ && a.address == host_address_ && a.up) {
          return a;
        }
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return NotFound(host_ + " with " + host_address_ + " is not up");
  }

  // Runs `body` on a thread inside the namespace and waits for it. What the
  // thread creates there (a listening socket) stays there after it ends.
  Status InNamespace(const std::function<void()>& body) {
    Status entered;
    std::thread([&] {
      const std::string path = "/var/run/netns/" + namespace_;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        entered = Internal("cannot enter " + path);
      } else {
        body();
      }
      if (fd >= 0) ::close(fd);
    }).join();
    return entered;
  }

  std::string namespace_;
  std::string host_;
  std::string peer_;
  std::string subnet_;
  std::string absent_address_;  // in subnet_, but on no interface
  std::string host_address_;
  std::string peer_address_;
};

TEST_F(VethTest, ListsAndChoosesTheNewInterface) {
  StatusOr<InterfaceAddress> host = HostEnd();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_FALSE(host->loopback);
  EXPECT_EQ(host->prefix_length, 29);

  StatusOr<std::vector<InterfaceAddress>> all = ListInterfaceAddresses();
  ASSERT_TRUE(all.ok());
  // By name: our IPv4 address first, then the IPv6 link-local address the
  // kernel may have given the interface by now.
  std::vector<std::string> by_name =
      Names(CandidateAddresses(*all, MustParse(host_), false));
  ASSERT_FALSE(by_name.empty());
  EXPECT_EQ(by_name[0], host_ + "=" + host_address_);
  for (size_t i = 1; i < by_name.size(); ++i) {
    EXPECT_THAT(by_name[i], ::testing::StartsWith(host_ + "=fe80:"));
  }
  EXPECT_THAT(Names(CandidateAddresses(*all, MustParse(subnet_), false)),
              ::testing::ElementsAre(host_ + "=" + host_address_));
}

TEST_F(VethTest, RoutesAndProbesThroughIt) {
  ASSERT_TRUE(HostEnd().ok());
  StatusOr<InterfaceAddress> route = RouteTo(peer_address_);
  ASSERT_TRUE(route.ok()) << route.status().ToString();
  EXPECT_EQ(route->interface, host_);
  EXPECT_EQ(route->address, host_address_);

  StatusOr<Socket> listener = Internal("not run");
  ASSERT_TRUE(
      InNamespace([&] { listener = Socket::Listen(peer_address_, 0); }).ok());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const int port = listener->LocalPort();
  Status probe =
      ProbeTcp(host_address_, peer_address_, port, milliseconds(2000));
  EXPECT_TRUE(probe.ok()) << probe.ToString();
  probe = ProbeTcp("", peer_address_, port, milliseconds(2000));
  EXPECT_TRUE(probe.ok()) << probe.ToString();

  // The namespace's kernel answers a closed port with a reset.
  listener->Close();
  probe = ProbeTcp(host_address_, peer_address_, port, milliseconds(2000));
  EXPECT_THAT(probe.message(), HasSubstr("refused the connection"));
}

// A SYN to a neighbour that never answers ARP waits in the kernel for
// seconds; the probe gives up at its own timeout.
TEST_F(VethTest, AnAbsentNeighbourTimesOut) {
  ASSERT_TRUE(HostEnd().ok());
  const auto start = std::chrono::steady_clock::now();
  Status probe =
      ProbeTcp(host_address_, absent_address_, 41234, milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(probe.code(), StatusCode::kTimeout) << probe.ToString();
  EXPECT_EQ(probe.message(), "timed out after 300 ms connecting to " +
                                 absent_address_ + ":41234 from " +
                                 host_address_);
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, milliseconds(2000));
}

// The namespace has no default route, so an address outside its /29 has no
// route at all there (203.0.113.0/24 is reserved for documentation).
TEST_F(VethTest, NoRouteSaysSo) {
  StatusOr<InterfaceAddress> route = Internal("not run");
  Status probe;
  Status bound_probe;
  ASSERT_TRUE(InNamespace([&] {
                route = RouteTo("203.0.113.1");
                probe = ProbeTcp("", "203.0.113.1", 41234, milliseconds(2000));
                bound_probe = ProbeTcp(peer_address_, "203.0.113.1", 41234,
                                       milliseconds(2000));
              }).ok());
  ASSERT_FALSE(route.ok());
  EXPECT_EQ(route.status().code(), StatusCode::kPeerFailure);
  EXPECT_EQ(route.status().message(), "no route to 203.0.113.1");
  EXPECT_EQ(probe.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(probe.message(), "no route to 203.0.113.1:41234");
  EXPECT_EQ(bound_probe.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(bound_probe.message(),
            "no route to 203.0.113.1:41234 from " + peer_address_);
}

}  // namespace
}  // namespace kolo
