#include "collectives/topology.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace kolo {

int32_t HostTopology::LargestHost() const {
  size_t largest = 0;
  for (const std::vector<int32_t>& ranks : ranks_on_host)
    largest = std::max(largest, ranks.size());
  return static_cast<int32_t>(largest);
}

std::vector<int32_t> HostTopology::Leaders() const {
  std::vector<int32_t> leaders;
  for (const std::vector<int32_t>& ranks : ranks_on_host)
    leaders.push_back(ranks.front());
  return leaders;
}

HostTopology TopologyFromHostIds(int32_t rank,
                                 const std::vector<std::string>& host_ids) {
  HostTopology topology;
  std::map<std::string, int32_t> index_of_host;
  for (size_t r = 0; r < host_ids.size(); ++r) {
    auto [entry, added] =
        index_of_host.emplace(host_ids[r], topology.HostCount());
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
      std::find(neighbours.begin(), neighbours.end(), rank) -
      neighbours.begin());
  w.local_size = static_cast<int32_t>(neighbours.size());
  w.cross_rank = host;
  w.cross_size = topology.HostCount();
  return topology;
}

namespace {

// The table rank 0 publishes: every identity as "<bytes>:<identity>", in
// rank order, or "!" and the error that kept rank 0 from gathering them.
std::string EncodeHostIds(const std::vector<std::string>& host_ids) {
  std::string table;
  for (const std::string& id : host_ids)
    table += std::to_string(id.size()) + ":" + id;
  return table;
}

StatusOr<std::vector<std::string>> DecodeHostIds(const std::string& table,
                                                 int32_t size) {
  std::vector<std::string> host_ids;
  size_t offset = 0;
  while (offset < table.size()) {
    const size_t colon = table.find(':', offset);
    if (colon == std::string::npos) break;
    // from_chars, not stoull: a length too large to represent is malformed
    // input, not an exception.
    size_t length = 0;
    const auto [end, error] =
        std::from_chars(table.data() + offset, table.data() + colon, length);
    if (error != std::errc() || end != table.data() + colon || colon == offset)
      break;
    if (length > table.size() - colon - 1) break;
    host_ids.push_back(table.substr(colon + 1, length));
    offset = colon + 1 + length;
  }
  if (offset != table.size() || static_cast<int32_t>(host_ids.size()) != size) {
    return Internal("the table of host identities is malformed (" +
                    std::to_string(table.size()) + " bytes, " +
                    std::to_string(size) + " ranks expected)");
  }
  return host_ids;
}

}  // namespace

StatusOr<HostTopology> DiscoverTopology(Store& store, const std::string& prefix,
                                        const WorldInfo& world,
                                        const std::string& host_id,
                                        std::chrono::milliseconds timeout) {
  KOLO_RETURN_IF_ERROR(
      store.Set(prefix + "/" + std::to_string(world.rank), host_id));
  const std::string table_key = prefix + "/table";
  if (world.rank == 0) {
    // One deadline for all of them, so the others know how long to wait.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::string> host_ids;
    for (int32_t r = 0; r < world.size; ++r) {
      const auto left =
          std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                       deadline - std::chrono::steady_clock::now()),
                   std::chrono::milliseconds(1));
      StatusOr<std::string> id =
          store.Get(prefix + "/" + std::to_string(r), left);
      if (!id.ok()) {
        const Status error = id.status().WithContext(
            "rank 0 waited for rank " + std::to_string(r) + "'s host identity");
        // The others learn why instead of timing out on the table.
        (void)store.Set(table_key, "!" + error.message());
        return error;
      }
      host_ids.push_back(*std::move(id));
    }
    KOLO_RETURN_IF_ERROR(store.Set(table_key, EncodeHostIds(host_ids)));
    return TopologyFromHostIds(0, host_ids);
  }
  // Rank 0 may wait up to `timeout` for the identities before it publishes.
  StatusOr<std::string> table = store.Get(table_key, timeout * 2);
  const std::string me = "rank " + std::to_string(world.rank);
  if (!table.ok()) {
    return table.status().WithContext(
        me + " waited for rank 0's table of host identities");
  }
  if (!table->empty() && (*table)[0] == '!') {
    return Timeout(me + ": " + table->substr(1));
  }
  KOLO_ASSIGN_OR_RETURN(std::vector<std::string> host_ids,
                        DecodeHostIds(*table, world.size));
  return TopologyFromHostIds(world.rank, host_ids);
}

}  // namespace kolo
