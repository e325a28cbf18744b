#include "metrics/system.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace kolo {
namespace metrics {
namespace {

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream contents;
  contents << in.rdbuf();
  *text = contents.str();
  return true;
}

}  // namespace

std::optional<ProcessFigures> ReadProcessFigures(pid_t pid) {
  std::string stat;
  if (!ReadFile("/proc/" + std::to_string(pid) + "/stat", &stat)) {
    return std::nullopt;
  }
  // The command name, in parentheses, may hold spaces: fields are counted
  // from the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string state;
  fields >> state;  // field 3
  if (state == "Z" || state == "X") return std::nullopt;
  std::string skip;
  for (int field = 4; field <= 13; ++field) fields >> skip;
  uint64_t user_ticks = 0;
  uint64_t system_ticks = 0;
  fields >> user_ticks >> system_ticks;  // fields 14 and 15
  for (int field = 16; field <= 19; ++field) fields >> skip;
  int64_t threads = 0;
  fields >> threads;  // field 20
  for (int field = 21; field <= 23; ++field) fields >> skip;
  int64_t resident_pages = 0;
  fields >> resident_pages;  // field 24
  if (!fields) return std::nullopt;
  ProcessFigures figures;
  double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  figures.cpu_seconds =
      static_cast<double>(user_ticks + system_ticks) / ticks_per_second;
  figures.resident_bytes = resident_pages * sysconf(_SC_PAGESIZE);
  figures.threads = threads;
  return figures;
}

std::vector<InterfaceBytes> ParseNetDev(const std::string& text) {
  std::vector<InterfaceBytes> interfaces;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    InterfaceBytes interface;
    size_t begin = line.find_first_not_of(' ');
    interface.name = line.substr(begin, colon - begin);
    std::istringstream fields(line.substr(colon + 1));
    // Receive: bytes packets errs drop fifo frame compressed multicast;
    // then transmit: bytes ...
    int64_t skip = 0;
    fields >> interface.received;
    for (int i = 0; i < 7; ++i) fields >> skip;
    fields >> interface.transmitted;
    if (fields) interfaces.push_back(interface);
  }
  return interfaces;
}

std::vector<InterfaceBytes> ReadInterfaceBytes() {
  std::string text;
  if (!ReadFile("/proc/net/dev", &text)) return {};
  return ParseNetDev(text);
}

std::vector<Family> ProcessFamilies(const std::vector<ArenaSnapshot>& ranks) {
  Family cpu{"kolo_process_cpu_seconds_total",
             "CPU time of the rank's process, user and system.",
             MetricType::kCounter,
             {},
             {}};
  Family memory{"kolo_process_resident_memory_bytes",
                "Resident memory of the rank's process.",
                MetricType::kGauge,
                {},
                {}};
  Family threads{"kolo_process_threads",
                 "Threads of the rank's process.",
                 MetricType::kGauge,
                 {},
                 {}};
  for (const ArenaSnapshot& rank : ranks) {
    std::optional<ProcessFigures> figures = ReadProcessFigures(rank.pid);
    if (!figures) continue;
    std::string labels = RankLabels(rank.job, rank.rank, rank.host);
    cpu.series.push_back({labels, figures->cpu_seconds, {}});
    memory.series.push_back(
        {labels, static_cast<double>(figures->resident_bytes), {}});
    threads.series.push_back(
        {labels, static_cast<double>(figures->threads), {}});
  }
  return {cpu, memory, threads};
}

std::vector<Family> HostFamilies(const std::string& job,
                                 const std::string& host) {
  Family received{"kolo_host_network_receive_bytes_total",
                  "Bytes received by the host's network interface.",
                  MetricType::kCounter,
                  {},
                  {}};
  Family transmitted{"kolo_host_network_transmit_bytes_total",
                     "Bytes sent by the host's network interface.",
                     MetricType::kCounter,
                     {},
                     {}};
  std::string prefix = "job=\"" + EscapeLabelValue(job) + "\",host=\"" +
                       EscapeLabelValue(host) + "\",interface=\"";
  for (const InterfaceBytes& interface : ReadInterfaceBytes()) {
    std::string labels = prefix + EscapeLabelValue(interface.name) + "\"";
    received.series.push_back(
        {labels, static_cast<double>(interface.received), {}});
    transmitted.series.push_back(
        {labels, static_cast<double>(interface.transmitted), {}});
  }
  return {received, transmitted};
}

}  // namespace metrics
}  // namespace kolo
