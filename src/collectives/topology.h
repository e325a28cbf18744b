// Which ranks share a host. Launchers describe hosts in different ways (or
// not at all), and a test wants one machine to play several hosts, so the
// job agrees on its own topology at start-up: each rank publishes its host
// identity (KOLO_HOST_ID, else the hostname) in the store and reads
// everyone else's. Hosts are numbered in the order their lowest rank
// appears, and ranks within a host by global rank, so every rank derives
// the same numbering without further talk.
#ifndef KOLO_COLLECTIVES_TOPOLOGY_H_
#define KOLO_COLLECTIVES_TOPOLOGY_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "store/store.h"

namespace kolo {

struct HostTopology {
  WorldInfo world;  // local_* and cross_* derived from the host identities
  // host_of_rank[r]: the host index (0 .. cross_size-1) rank r lives on.
  std::vector<int32_t> host_of_rank;
  // ranks_on_host[h]: the global ranks on host h, ascending; the first is
  // the host's leader.
  std::vector<std::vector<int32_t>> ranks_on_host;

  int32_t HostCount() const {
    return static_cast<int32_t>(ranks_on_host.size());
  }
  // The most ranks any one host holds.
  int32_t LargestHost() const;
  bool IsLeader(int32_t rank) const {
    return ranks_on_host[host_of_rank[rank]].front() == rank;
  }
  // The leaders of every host, by host index.
  std::vector<int32_t> Leaders() const;
};

// The topology `rank` sees when rank r's host identity is host_ids[r].
HostTopology TopologyFromHostIds(int32_t rank,
                                 const std::vector<std::string>& host_ids);

// Every rank of `world` publishes `host_id` under `prefix`; rank 0 reads
// them all (within `timeout` in all) and publishes the table, which the others
// read. That is about 3N store operations for N ranks instead of the N^2 of
// every rank reading every identity. A missing rank's error names it, on
// rank 0 and, through the table, on every other rank.
StatusOr<HostTopology> DiscoverTopology(Store& store, const std::string& prefix,
                                        const WorldInfo& world,
                                        const std::string& host_id,
                                        std::chrono::milliseconds timeout);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_TOPOLOGY_H_
