#include "net/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>

#include "net/socket.h"

namespace kolo {
namespace {

// An IPv4 or IPv6 address in network byte order; IPv4 uses bytes[0..3].
struct IpAddress {
  int family = AF_UNSPEC;
  std::array<uint8_t, 16> bytes{};
  int32_t bits() const { return family == AF_INET ? 32 : 128; }
};

bool ParseIp(const std::string& text, IpAddress* out) {
  if (::inet_pton(AF_INET, text.c_str(), out->bytes.data()) == 1) {
    out->family = AF_INET;
    return true;
  }
  if (::inet_pton(AF_INET6, text.c_str(), out->bytes.data()) == 1) {
    out->family = AF_INET6;
    return true;
  }
  return false;
}

// Parses "10.1.0.0/24" into its network address and prefix length. On
// failure returns why, for the caller to put after the subnet's text.
std::string ParseSubnet(const std::string& cidr, IpAddress* network,
                        int32_t* prefix_length) {
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos) return "no '/' before a prefix length";
  const std::string address = cidr.substr(0, slash);
  const std::string prefix = cidr.substr(slash + 1);
  if (!ParseIp(address, network)) {
    return "'" + address + "' is not a numeric IPv4 or IPv6 address";
  }
  // Digits only: std::stoi would take " 24", "+24" and "24abc".
  if (prefix.empty() || prefix.size() > 3) {
    return "the prefix length must be a number from 0 to " +
           std::to_string(network->bits());
  }
  int32_t length = 0;
  for (char c : prefix) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return "the prefix length must be a number from 0 to " +
             std::to_string(network->bits());
    }
    length = length * 10 + (c - '0');
  }
  if (length > network->bits()) {
    return "the prefix length " + std::to_string(length) + " is over " +
           std::to_string(network->bits()) + " for an " +
           (network->family == AF_INET ? "IPv4" : "IPv6") + " address";
  }
  *prefix_length = length;
  return "";
}

// Whether the first `prefix_length` bits of `a` and `b` agree.
bool SamePrefix(const IpAddress& a, const IpAddress& b, int32_t prefix_length) {
  const int32_t whole_bytes = prefix_length / 8;
  if (std::memcmp(a.bytes.data(), b.bytes.data(), whole_bytes) != 0) {
    return false;
  }
  const int32_t rest = prefix_length % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a.bytes[whole_bytes] & mask) == (b.bytes[whole_bytes] & mask);
}

int32_t PrefixLength(const sockaddr* netmask) {
  if (netmask == nullptr) return 0;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
  if (netmask->sa_family == AF_INET) {
    bytes = reinterpret_cast<const uint8_t*>(
        &reinterpret_cast<const sockaddr_in*>(netmask)->sin_addr);
    size = 4;
  } else if (netmask->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const uint8_t*>(
        &reinterpret_cast<const sockaddr_in6*>(netmask)->sin6_addr);
    size = 16;
  }
  int32_t length = 0;
  for (size_t i = 0; i < size; ++i) {
    length += __builtin_popcount(bytes[i]);
  }
  return length;
}

// The numeric host of an IPv4 or IPv6 socket address, without a port or an
// IPv6 scope: interfaces are matched by name, so the scope adds nothing.
std::string NumericHost(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    ::inet_ntop(AF_INET,
                &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, host,
                sizeof(host));
  } else if (address->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6,
                &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr,
                host, sizeof(host));
  }
  return host;
}

// "10.1.0.3:41234", or "[fd00::3]:41234" so the port stays readable.
std::string Endpoint(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

using AddrInfoPtr = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port,
                              int socket_type, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socket_type;
  hints.ai_flags = flags | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return InvalidArgument("cannot resolve '" + host +
                           "': " + ::gai_strerror(rc));
  }
  return AddrInfoPtr(result, &::freeaddrinfo);
}

// Turns the errno of a failed connect into words a user can act on.
Status ConnectError(int error, const std::string& target,
                    const std::string& from) {
  switch (error) {
    case ECONNREFUSED:
      return PeerFailure(target +
                         " refused the connection (nothing listens on that "
                         "port, or a firewall rejects it)");
    case ENETUNREACH:
    case EHOSTUNREACH: return PeerFailure("no route to " + target + from);
    case ETIMEDOUT:
      return Timeout("the kernel gave up connecting to " + target + from);
    default:
      return PeerFailure("cannot connect to " + target + from + ": " +
                         std::strerror(error));
  }
}

// One attempt at `peer` (a resolved address), bound to `local` when set.
Status ProbeOnce(const addrinfo& peer, const addrinfo* local,
                 const std::string& local_address, const std::string& target,
                 const std::string& from, std::chrono::milliseconds timeout,
                 Deadline deadline) {
  Socket s(::socket(peer.ai_family,
                    peer.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    peer.ai_protocol));
  if (!s.valid()) {
    return Internal("socket for " + target + ": " + std::strerror(errno));
  }
  if (local != nullptr &&
      ::bind(s.fd(), local->ai_addr, local->ai_addrlen) != 0) {
    const int error = errno;
    if (error == EADDRNOTAVAIL) {
      return InvalidArgument("cannot connect to " + target + from +
                             ": that is not an address of this host");
    }
    return Internal("cannot bind to " + local_address + " to connect to " +
                    target + ": " + std::strerror(error));
  }
  if (::connect(s.fd(), peer.ai_addr, peer.ai_addrlen) == 0) {
    return Status::Ok();
  }
  if (errno != EINPROGRESS) return ConnectError(errno, target, from);
  while (true) {
    pollfd p{s.fd(), POLLOUT, 0};
    const int n = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) break;
    if (n == 0) {
      return Timeout("timed out after " + std::to_string(timeout.count()) +
                     " ms connecting to " + target + from);
    }
    if (errno != EINTR) {
      return Internal("poll connecting to " + target + ": " +
                      std::strerror(errno));
    }
  }
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    error = errno;
  }
  if (error != 0) return ConnectError(error, target, from);
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<InterfaceAddress>> ListInterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return Internal(std::string("getifaddrs: ") + std::strerror(errno));
  }
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owner(list,
                                                           &::freeifaddrs);
  std::vector<InterfaceAddress> addresses;
  // Two passes rather than a sort: IPv4 first, since most clusters run on
  // it, while each family keeps the kernel's order, which puts an
  // interface's primary address before its secondaries.
  for (int family : {AF_INET, AF_INET6}) {
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != family) continue;
      InterfaceAddress address;
      address.interface = a->ifa_name;
      address.address = NumericHost(a->ifa_addr);
      address.prefix_length = PrefixLength(a->ifa_netmask);
      address.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
      // IFF_UP alone is the administrator's wish; IFF_RUNNING says the link
      // has a carrier (a veth whose peer is down lacks it).
      address.up = (a->ifa_flags & IFF_UP) && (a->ifa_flags & IFF_RUNNING);
      addresses.push_back(std::move(address));
    }
  }
  return addresses;
}

StatusOr<InterfaceSpec> InterfaceSpec::Parse(const std::string& text,
                                             const std::string& what) {
  InterfaceSpec spec;
  auto blank = [](const std::string& s) {
    return s.find_first_not_of(" \t\r\n") == std::string::npos;
  };
  if (blank(text)) return spec;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string piece = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t first = piece.find_first_not_of(" \t\r\n");
    const size_t last = piece.find_last_not_of(" \t\r\n");
    piece =
        first == std::string::npos ? "" : piece.substr(first, last - first + 1);
    if (piece.empty()) {
      return InvalidArgument(what + ": empty entry in '" + text +
                             "' (a stray comma, or a variable that expanded "
                             "to nothing?)");
    }
    IpAddress ip;
    if (piece.find('/') != std::string::npos) {
      int32_t prefix_length = 0;
      const std::string why = ParseSubnet(piece, &ip, &prefix_length);
      if (!why.empty()) {
        return InvalidArgument(what + ": '" + piece +
                               "' is not a valid subnet: " + why);
      }
      spec.subnets_.push_back(piece);
    } else if (ParseIp(piece, &ip)) {
      spec.subnets_.push_back(piece + "/" + std::to_string(ip.bits()));
    } else {
      // The kernel's rules for a name (dev_valid_name): under IFNAMSIZ
      // bytes, no '/' (handled above) and no whitespace.
      if (piece.size() >= IFNAMSIZ) {
        return InvalidArgument(
            what + ": '" + piece +
            "' is not an interface name: names are at most " +
            std::to_string(IFNAMSIZ - 1) + " characters");
      }
      for (char c : piece) {
        if (std::isspace(static_cast<unsigned char>(c))) {
          return InvalidArgument(what + ": '" + piece +
                                 "' is not an interface name: it contains "
                                 "whitespace");
        }
      }
      spec.names_.push_back(piece);
    }
    spec.pieces_.push_back(piece);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

bool InterfaceSpec::Matches(const InterfaceAddress& address) const {
  if (empty()) return true;
  // getifaddrs reports an IPv4 address with a label ("eth0:1", the old
  // alias syntax) under that label; it still lives on eth0.
  const std::string device =
      address.interface.substr(0, address.interface.find(':'));
  for (const std::string& name : names_) {
    if (name == address.interface || name == device) return true;
  }
  for (const std::string& subnet : subnets_) {
    if (AddressInSubnet(address.address, subnet).value_or(false)) return true;
  }
  return false;
}

std::string InterfaceSpec::ToString() const {
  std::string text;
  for (const std::string& piece : pieces_) {
    if (!text.empty()) text += ",";
    text += piece;
  }
  return text;
}

std::vector<InterfaceAddress> CandidateAddresses(
    const std::vector<InterfaceAddress>& all, const InterfaceSpec& spec,
    bool allow_loopback) {
  std::vector<InterfaceAddress> candidates;
  for (const InterfaceAddress& address : all) {
    if (!address.up) continue;
    if (address.loopback && !allow_loopback) continue;
    if (!spec.Matches(address)) continue;
    candidates.push_back(address);
  }
  return candidates;
}

StatusOr<InterfaceAddress> RouteTo(const std::string& peer) {
  // Any port but 0 will do: a UDP connect() only looks up the route.
  KOLO_ASSIGN_OR_RETURN(AddrInfoPtr peers, Resolve(peer, 9, SOCK_DGRAM, 0));
  std::string local;
  Status last = PeerFailure("no route to " + peer);
  for (addrinfo* a = peers.get(); a != nullptr; a = a->ai_next) {
    Socket s(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      last = Internal("socket to find the route to " + peer + ": " +
                      std::strerror(errno));
      continue;
    }
    if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      const int error = errno;
      last = (error == ENETUNREACH || error == EHOSTUNREACH)
                 ? PeerFailure("no route to " + peer)
                 : PeerFailure("no route to " + peer + ": " +
                               std::strerror(error));
      continue;
    }
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&address), &length) !=
        0) {
      last = Internal("getsockname on the route to " + peer + ": " +
                      std::strerror(errno));
      continue;
    }
    local = NumericHost(reinterpret_cast<sockaddr*>(&address));
    break;
  }
  if (local.empty()) return last;
  KOLO_ASSIGN_OR_RETURN(std::vector<InterfaceAddress> addresses,
                        ListInterfaceAddresses());
  for (const InterfaceAddress& address : addresses) {
    if (address.address == local) return address;
  }
  return NotFound("the route to " + peer + " leaves from " + local +
                  ", which no interface of this host lists");
}

Status ProbeTcp(const std::string& local_address, const std::string& peer,
                int port, std::chrono::milliseconds timeout) {
  const Deadline deadline = DeadlineAfter(timeout);
  if (port <= 0 || port > 65535) {
    return InvalidArgument("port " + std::to_string(port) + " for peer '" +
                           peer + "' is out of range (1-65535)");
  }
  const std::string target = Endpoint(peer, port);
  std::string from;
  AddrInfoPtr local(nullptr, &::freeaddrinfo);
  if (!local_address.empty()) {
    from = " from " + local_address;
    auto resolved = Resolve(local_address, 0, SOCK_STREAM, AI_NUMERICHOST);
    if (!resolved.ok()) {
      return InvalidArgument("local address '" + local_address +
                             "' to connect to " + target +
                             " from is not a numeric IPv4 or IPv6 address");
    }
    local = std::move(resolved).value();
  }
  KOLO_ASSIGN_OR_RETURN(AddrInfoPtr peers, Resolve(peer, port, SOCK_STREAM, 0));
  Status last = InvalidArgument("cannot connect to " + target + from +
                                ": the peer has no address of the local "
                                "address's family");
  for (addrinfo* a = peers.get(); a != nullptr; a = a->ai_next) {
    if (local != nullptr && a->ai_family != local->ai_family) continue;
    last = ProbeOnce(*a, local.get(), local_address, target, from, timeout,
                     deadline);
    if (last.ok()) return last;
  }
  return last;
}

StatusOr<bool> AddressInSubnet(const std::string& address,
                               const std::string& cidr) {
  IpAddress ip;
  if (!ParseIp(address, &ip)) {
    return InvalidArgument("'" + address +
                           "' is not a numeric IPv4 or IPv6 address");
  }
  IpAddress network;
  int32_t prefix_length = 0;
  const std::string why = ParseSubnet(cidr, &network, &prefix_length);
  if (!why.empty()) {
    return InvalidArgument("'" + cidr + "' is not a valid subnet: " + why);
  }
  if (ip.family != network.family) return false;
  return SamePrefix(ip, network, prefix_length);
}

}  // namespace kolo
