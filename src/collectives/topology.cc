#include "collectives/topology.h"

#include <algorithm>
#include <map>

namespace kolo {

int32_t HostTopology::LargestHost() const {
  size_t largest = 0;
  for (const std::vector<int32_t>& ranks : ranks_on_host) largest = std::max(largest, ranks.size());
  return static_cast<int32_t>(largest);
}

std::vector<int32_t> HostTopology::Leaders() const {
  std::vector<int32_t> leaders;
  for (const std::vector<int32_t>& ranks : ranks_on_host) leaders.push_back(ranks.front());
  return leaders;
}

HostTopology TopologyFromHostIds(int32_t rank, const std::vector<std::string>& host_ids) {
  HostTopology topology;
  std::map<std::string, int32_t> index_of_host;
  for (size_t r = 0; r < host_ids.size(); ++r) {
    auto [entry, added] = index_of_host.emplace(host_ids[r], topology.HostCount());
    if (added) topology.ranks_on_host.emplace_back();
    topology.host_of_rank.push_back(entry->second);
    topology.ranks_on_host[entry->second].push_back(static_cast<int32_t>(r));
  }
  const int32_t host = topology.host_of_rank[rank];
  const std::vector<int32_t>& neighbours = topology.ranks_on_host[host];
  WorldInfo& w = topology.world;
  w.rank = rank;
  w.size = static_cast<int32_t>(host_ids.size());
  w.local_rank = static_cast<int32_t>(
      std::find(neighbours.begin(), neighbours.end(), rank) - neighbours.begin());
  w.local_size = static_cast<int32_t>(neighbours.size());
  w.cross_rank = host;
  w.cross_size = topology.HostCount();
  return topology;
}

StatusOr<HostTopology> DiscoverTopology(Store& store, const std::string& prefix,
                                        const WorldInfo& world, const std::string& host_id,
                                        std::chrono::milliseconds timeout) {
  KOLO_RETURN_IF_ERROR(store.Set(prefix + "/" + std::to_string(world.rank), host_id));
  std::vector<std::string> host_ids;
  for (int32_t r = 0; r < world.size; ++r) {
    StatusOr<std::string> id = store.Get(prefix + "/" + std::to_string(r), timeout);
    if (!id.ok()) {
      return id.status().WithContext("rank " + std::to_string(world.rank) +
                                     " waited for rank " + std::to_string(r) +
                                     "'s host identity");
    }
    host_ids.push_back(*std::move(id));
  }
  return TopologyFromHostIds(world.rank, host_ids);
}

}  // namespace kolo
