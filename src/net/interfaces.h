// Choosing the network interface a job uses.
//
// A host in a cluster usually has several interfaces: a management network,
// a fast data network, container bridges, loopback. Left alone, the kernel
// picks the source address of each connection from its routing table, which
// is often the slow network or, behind a misconfigured /etc/hosts, loopback.
// The user says which to use with --network-interface or
// KOLO_NETWORK_INTERFACE: a comma-separated list of interface names
// ("eth1,ib0") and/or CIDR subnets ("10.1.0.0/24"); subnets keep working when
// the same network has different interface names on different hosts.
//
// The pieces, each usable alone so the launcher and the ranks can explain a
// bad choice before a collective hangs on it:
//   ListInterfaceAddresses()  what this host has
//   InterfaceSpec             what the user asked for
//   CandidateAddresses()      what of the first matches the second
//   RouteTo()                 what the kernel would pick to reach a peer
//   ProbeTcp()                whether a peer is reachable from an address
//
// Thread-safety: free functions and values; safe from any thread.
#ifndef KOLO_NET_INTERFACES_H_
#define KOLO_NET_INTERFACES_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// One address of one interface, as getifaddrs() reports it.
struct InterfaceAddress {
  std::string interface;      // "eth1", "veth-h1"
  std::string address;        // "10.1.0.2" (numeric, IPv6 without a scope)
  int32_t prefix_length = 0;  // 24
  bool loopback = false;
  bool up = false;  // IFF_UP && IFF_RUNNING
};

// Every IPv4 and IPv6 address of this host's interfaces (getifaddrs), IPv4
// first, each family in the kernel's order. Interfaces without an address
// are left out.
StatusOr<std::vector<InterfaceAddress>> ListInterfaceAddresses();

// What --network-interface / KOLO_NETWORK_INTERFACE says: a comma-separated
// list of pieces, each an interface name ("eth1"), a CIDR subnet
// ("10.1.0.0/24", host bits allowed so an address copied from `ip addr`
// works) or a single numeric address ("10.1.0.2", the same as /32). An empty
// or all-blank text is the empty spec: no constraint.
class InterfaceSpec {
 public:
  InterfaceSpec() = default;  // the empty spec

  // Errors are kInvalidArgument and name `what` (the flag or variable) and
  // the bad piece: "--network-interface: '10.1.0.0/33' is not a valid
  // subnet: ...". An empty piece ("eth1,,ib0", "eth1,") is an error, since it
  // usually means a variable expanded to nothing.
  static StatusOr<InterfaceSpec> Parse(const std::string& text,
                                       const std::string& what);

  bool empty() const { return pieces_.empty(); }
  // True when the spec is empty, names `address.interface` (or the interface
  // an alias label "eth0:1" belongs to), or has a subnet holding
  // `address.address`.
  bool Matches(const InterfaceAddress& address) const;
  // The pieces as given, joined by ",": "eth1,10.1.0.0/24".
  std::string ToString() const;

 private:
  std::vector<std::string> pieces_;   // as written, for ToString()
  std::vector<std::string> names_;    // interface names
  std::vector<std::string> subnets_;  // CIDR, validated by Parse()
};

// The addresses of `all` a job may use: those matching `spec` (all when it
// is empty) that are up, never loopback unless `allow_loopback` (a
// single-host job). Order: as in `all`.
std::vector<InterfaceAddress> CandidateAddresses(
    const std::vector<InterfaceAddress>& all, const InterfaceSpec& spec,
    bool allow_loopback);

// The local address and interface the kernel would use to reach `peer`
// (numeric IPv4/IPv6, or a hostname resolved with getaddrinfo): a UDP socket
// connect()ed to it, which sends no packet but makes the kernel choose a
// route and a source address, then getsockname() matched against
// ListInterfaceAddresses(). kPeerFailure "no route to 10.1.0.3" when the
// kernel has none; a caller holding an InterfaceSpec adds it to the message.
StatusOr<InterfaceAddress> RouteTo(const std::string& peer);

// Connects to peer:port over TCP within `timeout` (non-blocking connect and
// poll), from `local_address` when it is not empty (bound before connecting),
// and closes at once: the listener sees a connection that ends without data.
// Errors say why in words a user can act on: kPeerFailure "no route to
// 10.1.0.3:41234 from 10.1.0.2", "10.1.0.3:41234 refused the connection";
// kTimeout "timed out after 2000 ms connecting to 10.1.0.3:41234";
// kInvalidArgument when `local_address` is not an address of this host.
Status ProbeTcp(const std::string& local_address, const std::string& peer,
                int port, std::chrono::milliseconds timeout);

// True when `address` (numeric) is inside subnet `cidr` ("10.1.0.0/24");
// false when the two are of different families. kInvalidArgument naming the
// bad one when either does not parse.
StatusOr<bool> AddressInSubnet(const std::string& address,
                               const std::string& cidr);

}  // namespace kolo

#endif  // KOLO_NET_INTERFACES_H_
