// The hosts a job runs on, and which of its ranks each one gets.
//
// A job's hosts come from -H or from a hostfile; both say how many ranks
// (slots) a host takes:
//
//   -H h1:2,h2:2,h3             h3 takes 1 rank
//   -H [::1]:2,10.0.0.7:4       an IPv6 address goes in brackets in -H,
//                               because its ':'s would read as ":slots"
//
//   # hostfile: the format horovodrun and mpirun share
//   h1 slots=2                  # a trailing comment
//   h2:2                        horovodrun's form
//   fe80::1%eth0 slots=4        a hostfile may name IPv6 bare or in brackets
//   h3                          1 slot
//   h4 slots=2 max_slots=8      max_slots: see below
//
// The brackets are syntax, not part of the name: "[::1]:2" names "::1",
// which is what ssh and IsLocalHost() expect.
//
// Decisions that differ between the tools kolorun's users come from:
//  - A host listed twice is an error naming both places. mpirun adds the
//    slots up, but then the host's ranks either move to its first place or
//    stop being consecutive, and a repeat is most often a copy-paste slip;
//    listing the host once with its total says which was meant. Names are
//    compared as written, so "h1" and "h1.example.com" are two hosts.
//  - max_slots=N (mpirun's cap for oversubscription) is checked to be a
//    positive integer and otherwise ignored: kolorun never puts more ranks
//    on a host than its slots, so the cap can never be reached. Accepting it
//    lets an existing mpirun hostfile be used as it is.
//  - Names hold only letters, digits, '.', '-' and '_' (hostnames, IPv4
//    addresses, network namespace names), or are IPv6 addresses (hex digits,
//    ':', '.', and a "%zone"); none may start with '-', where ssh would read
//    it as an option. Anything else (whitespace, ',', '@', quotes) is an
//    error that names the character.
#ifndef KOLO_TOOLS_KOLORUN_HOSTS_H_
#define KOLO_TOOLS_KOLORUN_HOSTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {
namespace kolorun {

// The most slots one host may have; like -np's limit it only keeps the rank
// arithmetic in int32.
inline constexpr int32_t kMaxSlotsPerHost = 1 << 16;

struct HostSlots {
  // As the user wrote it (without -H's brackets): a hostname, an IPv4 or
  // IPv6 address, or a network namespace name.
  std::string name;
  int32_t slots = 1;
};

// Parses -H's value, `h1:2,h2:2,h3` (a host without ":N" has 1 slot). Every
// error is kInvalidArgument and names the entry:
// "-H entry 'h1:x': slots must be a positive integer".
StatusOr<std::vector<HostSlots>> ParseHostList(const std::string& text);

// Parses a hostfile's contents: one host per line, optionally followed by
// slots=N and max_slots=N (spaces around '=' allowed) or written host:N; '#'
// starts a comment, whole-line or trailing; blank lines are skipped.
// `source` is the file's name for messages. Every error is kInvalidArgument
// and names the file and the line: "HOSTS:3: 'slots=0' must be a positive
// integer". A file without a host is an error.
StatusOr<std::vector<HostSlots>> ParseHostfile(const std::string& text,
                                               const std::string& source);

// Reads and parses the hostfile at `path`; a file that cannot be read is a
// kInvalidArgument naming it and errno's text.
StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path);

// Where the ranks of a job go: one per host that receives a rank.
struct HostAssignment {
  std::string host;
  int32_t first_rank = 0;  // ranks first_rank .. first_rank+num_ranks-1
  int32_t num_ranks = 0;   // = LOCAL_SIZE on that host
  int32_t cross_rank = 0;  // index of this host among the used hosts
};

// Ranks fill the hosts in the order given: host 0 gets ranks 0..slots0-1,
// host 1 the next slots1, and so on; hosts that receive no rank are left
// out, so the last used host may be partly filled. Filling hosts (rather
// than dealing ranks round-robin) keeps neighbouring ranks on one host,
// where ring and tree neighbours talk over shared memory. An error
// (kInvalidArgument) when num_ranks exceeds the total slots names both
// numbers and the hosts (the first few of a long list): "-np 5 is more than
// the 4 slots of the hosts (h1:2, h2:2)".
StatusOr<std::vector<HostAssignment>> PlaceRanks(
    const std::vector<HostSlots>& hosts, int32_t num_ranks);

// Whether `host` names this machine: "localhost", "127.0.0.1", "::1", or
// gethostname()'s name, or either's short name (before the first '.') equal
// to the other. Compared ignoring case, as DNS does. This lets a launcher
// start this machine's ranks without ssh.
bool IsLocalHost(const std::string& host);

// This machine's name as gethostname() gives it; `if_unknown` if it cannot.
std::string ThisHostName(const std::string& if_unknown = "");

// Splits `text` on runs of white space (std::isspace: spaces, tabs, line
// ends), dropping empty pieces: a hostfile line, --mpi-args, --remote-shell.
std::vector<std::string> SplitOnWhitespace(const std::string& text);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_HOSTS_H_
