#include "hosts.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <utility>

namespace kolo {
namespace kolorun {
namespace {

// A PlaceRanks error lists at most this many hosts: a cluster's hostfile
// may name thousands, and the first few already show which list was used.
constexpr size_t kMaxHostsInMessage = 8;

// Why `text` is not a slot count ("must be ..."), or "" when it is one;
// then *slots holds it. Only plain digits: strtol would also take " 2", "+2"
// and "0x2", none of which a hostfile means.
std::string SlotsProblem(const std::string& text, int32_t* slots) {
  const std::string not_positive = "must be a positive integer";
  if (text.empty()) return not_positive;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return not_positive;
    // Stop before the value could overflow; it is too large already.
    if (value <= kMaxSlotsPerHost) value = value * 10 + (c - '0');
  }
  if (value == 0) return not_positive;
  if (value > kMaxSlotsPerHost) {
    return "must be at most " + std::to_string(kMaxSlotsPerHost);
  }
  *slots = static_cast<int32_t>(value);
  return "";
}

// `c` as a message shows it: whitespace and control bytes by name, since
// "may not contain ' '" is easy to misread.
std::string DescribeChar(char c) {
  switch (c) {
    case ' ': return "a space";
    case '\t': return "a tab";
    case '\r': return "a carriage return";
    case '\n': return "a newline";
    default: break;
  }
  unsigned char byte = static_cast<unsigned char>(c);
  if (byte < 0x20 || byte >= 0x7f) {
    static const char kHex[] = "0123456789abcdef";
    return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 0xf];
  }
  return std::string("'") + c + "'";
}

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
         c == '_';
}

// Why `name` cannot be a host, or "" when it can: see hosts.h for what a
// name may hold. An IPv6 address is told apart by its ':'.
std::string NameProblem(const std::string& name) {
  if (name.empty()) return "the host name is empty";
  const std::string quoted = "host name '" + name + "'";
  if (name[0] == '-') return quoted + " may not start with '-'";
  if (name.find(':') == std::string::npos) {
    for (char c : name) {
      if (!IsNameChar(c)) return quoted + " may not contain " + DescribeChar(c);
    }
    return "";
  }
  // IPv6: hex digits, ':' and '.' (an embedded IPv4), then a "%zone" that
  // names an interface.
  size_t zone = name.find('%');
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = i < zone ? std::isxdigit(static_cast<unsigned char>(c)) ||
                             c == ':' || c == '.'
                       : i == zone || IsNameChar(c);
    if (!ok) {
      return quoted + " may not contain " + DescribeChar(c) +
             (i < zone ? " (an IPv6 address holds hex digits, ':' and '.')"
                       : "");
    }
  }
  if (zone + 1 == name.size()) return quoted + " has an empty %zone";
  return "";
}

// `host` as -H would take it back: IPv6 in brackets.
std::string FormatHost(const HostSlots& host) {
  std::string name = host.name.find(':') == std::string::npos
                         ? host.name
                         : "[" + host.name + "]";
  return name + ":" + std::to_string(host.slots);
}

// Splits "[addr]" or "[addr]:N" into the address and the text after ':'
// (empty without one). `what` names the spec for messages.
Status SplitBracketed(const std::string& spec, const std::string& what,
                      std::string* name, std::string* slots_text,
                      bool* has_slots) {
  size_t close = spec.find(']');
  if (close == std::string::npos) {
    return InvalidArgument(what + ": '[' without ']'");
  }
  *name = spec.substr(1, close - 1);
  std::string rest = spec.substr(close + 1);
  if (rest.empty()) return Status::Ok();
  if (rest[0] != ':') {
    return InvalidArgument(what + ": expected ':slots' after ']', got '" +
                           rest + "'");
  }
  *has_slots = true;
  *slots_text = rest.substr(1);
  return Status::Ok();
}

StatusOr<HostSlots> ParseHostListEntry(const std::string& entry) {
  const std::string what = "-H entry '" + entry + "'";
  // Checked before the entry is split, so that "h1:2 " is blamed on its
  // space rather than on a slot count "2 ".
  for (char c : entry) {
    unsigned char byte = static_cast<unsigned char>(c);
    if (std::isspace(byte) || byte < 0x20 || byte >= 0x7f) {
      return InvalidArgument(what + " may not contain " + DescribeChar(c) +
                             " (write -H h1:2,h2:2 as one argument)");
    }
  }
  std::string name = entry;
  std::string slots_text;
  bool has_slots = false;
  if (!entry.empty() && entry[0] == '[') {
    KOLO_RETURN_IF_ERROR(
        SplitBracketed(entry, what, &name, &slots_text, &has_slots));
  } else {
    size_t colon = entry.find(':');
    if (colon != std::string::npos) {
      // More than one ':' is an IPv6 address; which ':' would end it is
      // anyone's guess, so -H asks for brackets.
      if (entry.find(':', colon + 1) != std::string::npos) {
        return InvalidArgument(what +
                               ": an IPv6 address goes in brackets, as in '[" +
                               entry + "]' or '[" + entry + "]:2'");
      }
      name = entry.substr(0, colon);
      slots_text = entry.substr(colon + 1);
      has_slots = true;
    }
  }
  std::string name_problem = NameProblem(name);
  if (!name_problem.empty()) return InvalidArgument(what + ": " + name_problem);
  HostSlots host;
  host.name = name;
  if (has_slots) {
    std::string problem = SlotsProblem(slots_text, &host.slots);
    if (!problem.empty()) return InvalidArgument(what + ": slots " + problem);
  }
  return host;
}

// One hostfile line with its comment removed and the spaces around each '='
// dropped, so that "slots = 2" reads as "slots=2", then split on whitespace.
std::vector<std::string> HostfileTokens(const std::string& line) {
  std::string text = line.substr(0, line.find('#'));
  std::string joined;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '=') {
      while (!joined.empty() &&
             std::isspace(static_cast<unsigned char>(joined.back()))) {
        joined.pop_back();
      }
      joined.push_back(c);
      while (i + 1 < text.size() &&
             std::isspace(static_cast<unsigned char>(text[i + 1]))) {
        ++i;
      }
    } else {
      joined.push_back(c);
    }
  }
  // '\r' counts as a space, so a file written on Windows reads the same.
  return SplitOnWhitespace(joined);
}

// Parses one hostfile line's tokens; `where` is "HOSTS:3" for messages.
StatusOr<HostSlots> ParseHostfileLine(const std::vector<std::string>& tokens,
                                      const std::string& where) {
  const std::string& spec = tokens[0];
  if (spec.find('=') != std::string::npos) {
    return InvalidArgument(where + ": expected a host name first, got '" +
                           spec + "'");
  }
  std::string name = spec;
  std::string slots_text;
  bool has_slots = false;
  if (spec[0] == '[') {
    KOLO_RETURN_IF_ERROR(SplitBracketed(spec, where + ": '" + spec + "'", &name,
                                        &slots_text, &has_slots));
  } else {
    // One ':' is horovodrun's host:N; more are a bare IPv6 address, which
    // a hostfile line can hold because its slots come after a space.
    size_t colon = spec.find(':');
    if (colon != std::string::npos &&
        spec.find(':', colon + 1) == std::string::npos) {
      name = spec.substr(0, colon);
      slots_text = spec.substr(colon + 1);
      has_slots = true;
    }
  }
  std::string name_problem = NameProblem(name);
  if (!name_problem.empty()) {
    return InvalidArgument(where + ": " + name_problem);
  }

  HostSlots host;
  host.name = name;
  // Where the slots came from, to name both when they are given twice.
  std::string slots_from;
  if (has_slots) {
    slots_from = spec;
    std::string problem = SlotsProblem(slots_text, &host.slots);
    if (!problem.empty()) {
      return InvalidArgument(where + ": '" + spec + "': slots " + problem);
    }
  }
  bool has_max_slots = false;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    size_t eq = token.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument(where + ": unexpected '" + token +
                             "' after host '" + name + "' (expected slots=N)");
    }
    std::string key = token.substr(0, eq);
    std::string value = token.substr(eq + 1);
    int32_t count = 0;
    if (key == "slots") {
      if (!slots_from.empty()) {
        return InvalidArgument(where + ": slots given twice ('" + slots_from +
                               "' and '" + token + "')");
      }
      slots_from = token;
    } else if (key == "max_slots") {
      if (has_max_slots) {
        return InvalidArgument(where + ": max_slots given twice");
      }
      has_max_slots = true;
    } else {
      return InvalidArgument(where + ": unknown setting '" + token +
                             "' (kolorun reads slots=N and max_slots=N)");
    }
    std::string problem = SlotsProblem(value, &count);
    if (!problem.empty()) {
      return InvalidArgument(where + ": '" + token + "' " + problem);
    }
    if (key == "slots") host.slots = count;
  }
  return host;
}

}  // namespace

std::vector<std::string> SplitOnWhitespace(const std::string& text) {
  std::vector<std::string> pieces;
  std::string current;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!current.empty()) pieces.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) pieces.push_back(std::move(current));
  return pieces;
}

StatusOr<std::vector<HostSlots>> ParseHostList(const std::string& text) {
  if (text.empty()) {
    return InvalidArgument("-H is empty: expected -H host[:slots],...");
  }
  std::vector<HostSlots> hosts;
  // Each name's entry number (from 1) and text, to name both on a repeat.
  std::map<std::string, std::pair<size_t, std::string>> seen;
  size_t start = 0;
  for (size_t number = 1;; ++number) {
    size_t comma = text.find(',', start);
    std::string entry = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (entry.empty()) {
      return InvalidArgument("-H '" + text + "': entry " +
                             std::to_string(number) + " is empty");
    }
    KOLO_ASSIGN_OR_RETURN(HostSlots host, ParseHostListEntry(entry));
    auto [it, inserted] =
        seen.emplace(host.name, std::make_pair(number, entry));
    if (!inserted) {
      return InvalidArgument("-H entries " + std::to_string(it->second.first) +
                             " ('" + it->second.second + "') and " +
                             std::to_string(number) + " ('" + entry +
                             "') both name host '" + host.name +
                             "'; list it once with all its slots");
    }
    hosts.push_back(std::move(host));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

StatusOr<std::vector<HostSlots>> ParseHostfile(const std::string& text,
                                               const std::string& source) {
  std::vector<HostSlots> hosts;
  std::map<std::string, size_t> line_of;  // each host's line number
  size_t start = 0;
  size_t line_number = 0;
  while (start < text.size()) {
    ++line_number;
    size_t newline = text.find('\n', start);
    size_t end = newline == std::string::npos ? text.size() : newline;
    std::vector<std::string> tokens =
        HostfileTokens(text.substr(start, end - start));
    start = end + 1;
    if (tokens.empty()) continue;
    const std::string where = source + ":" + std::to_string(line_number);
    KOLO_ASSIGN_OR_RETURN(HostSlots host, ParseHostfileLine(tokens, where));
    auto [it, inserted] = line_of.emplace(host.name, line_number);
    if (!inserted) {
      return InvalidArgument(
          where + ": host '" + host.name + "' is already listed on line " +
          std::to_string(it->second) + "; list it once with all its slots");
    }
    hosts.push_back(std::move(host));
  }
  if (hosts.empty()) {
    const char* why = line_number == 0 ? "the file is empty"
                                       : "every line is blank or a comment";
    return InvalidArgument(source + ": no hosts (" + why + ")");
  }
  return hosts;
}

StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return InvalidArgument("cannot read hostfile '" + path +
                           "': " + std::strerror(errno));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // A directory opens but does not read (EISDIR).
      int error = errno;
      ::close(fd);
      return InvalidArgument("cannot read hostfile '" + path +
                             "': " + std::strerror(error));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return ParseHostfile(text, path);
}

StatusOr<std::vector<HostAssignment>> PlaceRanks(
    const std::vector<HostSlots>& hosts, int32_t num_ranks) {
  if (num_ranks < 1) {
    return InvalidArgument("-np must be a positive integer, got " +
                           std::to_string(num_ranks));
  }
  if (hosts.empty()) return InvalidArgument("no hosts to place ranks on");
  // int64: thousands of hosts of many slots may add up past int32.
  int64_t total_slots = 0;
  for (const HostSlots& host : hosts) {
    if (host.slots < 1) {
      return InvalidArgument("host '" + host.name + "' has " +
                             std::to_string(host.slots) +
                             " slots; it needs at least 1");
    }
    total_slots += host.slots;
  }
  if (num_ranks > total_slots) {
    std::string list;
    for (size_t i = 0; i < hosts.size() && i < kMaxHostsInMessage; ++i) {
      if (i > 0) list += ", ";
      list += FormatHost(hosts[i]);
    }
    if (hosts.size() > kMaxHostsInMessage) {
      list += ", and " + std::to_string(hosts.size() - kMaxHostsInMessage) +
              " more";
    }
    return InvalidArgument("-np " + std::to_string(num_ranks) +
                           " is more than the " + std::to_string(total_slots) +
                           " slots of the hosts (" + list + ")");
  }
  std::vector<HostAssignment> placement;
  int32_t next_rank = 0;
  for (const HostSlots& host : hosts) {
    if (next_rank == num_ranks) break;
    HostAssignment assignment;
    assignment.host = host.name;
    assignment.first_rank = next_rank;
    assignment.num_ranks = std::min(host.slots, num_ranks - next_rank);
    assignment.cross_rank = static_cast<int32_t>(placement.size());
    next_rank += assignment.num_ranks;
    placement.push_back(std::move(assignment));
  }
  return placement;
}

std::string ThisHostName(const std::string& if_unknown) {
  char buffer[HOST_NAME_MAX + 1] = {};
  // One byte short of the buffer, so that a cut name still ends in '\0'.
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return if_unknown;
  return buffer;
}

bool IsLocalHost(const std::string& host) {
  auto lower = [](std::string text) {
    for (char& c : text) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return text;
  };
  const std::string name = lower(host);
  if (name == "localhost" || name == "127.0.0.1" || name == "::1") return true;
  const std::string self = lower(ThisHostName());
  if (name.empty() || self.empty()) return false;
  if (name == self) return true;
  // An address's first '.' ends no name: "10.0.0.1" is not the host "10".
  auto is_address = [](const std::string& text) {
    return text.find(':') != std::string::npos ||
           text.find_first_not_of("0123456789.") == std::string::npos;
  };
  if (is_address(name) || is_address(self)) return false;
  auto short_name = [](const std::string& text) {
    return text.substr(0, text.find('.'));
  };
  return name == short_name(self) || short_name(name) == self;
}

}  // namespace kolorun
}  // namespace kolo
