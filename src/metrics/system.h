// Process and host figures read from /proc when a scrape asks for them, so
// that nothing in a rank spends time on them: a rank's CPU seconds, resident
// memory and threads (by its pid), and the host's bytes per network
// interface.
#ifndef KOLO_METRICS_SYSTEM_H_
#define KOLO_METRICS_SYSTEM_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metrics/arena.h"
#include "metrics/text_format.h"

namespace kolo {
namespace metrics {

struct ProcessFigures {
  double cpu_seconds = 0;  // user + system
  int64_t resident_bytes = 0;
  int64_t threads = 0;
};
// nullopt when the process is gone (or a zombie that kolorun has not yet
// reaped).
std::optional<ProcessFigures> ReadProcessFigures(pid_t pid);

struct InterfaceBytes {
  std::string name;
  int64_t received = 0;
  int64_t transmitted = 0;
};
// Every interface of /proc/net/dev as seen from this process's network
// namespace.
std::vector<InterfaceBytes> ReadInterfaceBytes();
// Parses /proc/net/dev's text.
std::vector<InterfaceBytes> ParseNetDev(const std::string& text);

// kolo_process_cpu_seconds_total, kolo_process_resident_memory_bytes and
// kolo_process_threads of every live rank in `ranks`.
std::vector<Family> ProcessFamilies(const std::vector<ArenaSnapshot>& ranks);
// kolo_host_network_{receive,transmit}_bytes_total per interface, labelled
// with job and host.
std::vector<Family> HostFamilies(const std::string& job,
                                 const std::string& host);

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_SYSTEM_H_
