// Where each parameter's shards live, and the names of the modes. Pure
// functions: every rank computes the same placement from the same names and
// sizes, so nothing about it is ever sent.
#include <algorithm>
#include <cctype>

#include "common/enum_names.h"
#include "kolo/torch_parameter_server.h"

namespace kolo::torch {

namespace {

// Each mode's own name first, then its long spelling.
constexpr EnumName<ParameterServerMode> kModeNames[] = {
    {"sync", ParameterServerMode::kSynchronous},
    {"async", ParameterServerMode::kAsynchronous},
    {"ssp", ParameterServerMode::kBoundedStaleness},
    {"synchronous", ParameterServerMode::kSynchronous},
    {"asynchronous", ParameterServerMode::kAsynchronous},
    {"bounded_staleness", ParameterServerMode::kBoundedStaleness}};

}  // namespace

StatusOr<ParameterServerMode> ParseParameterServerMode(
    const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (std::optional<ParameterServerMode> mode = ValueOf(kModeNames, lower)) {
    return *mode;
  }
  return InvalidArgument(
      "parameter server mode must be sync, async or ssp, "
      "got '" +
      text + "'");
}

const char* ParameterServerModeName(ParameterServerMode mode) {
  return NameOf(kModeNames, mode);
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;  // the FNV-1a 64-bit offset basis
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;  // the FNV 64-bit prime
  }
  return hash;
}

std::vector<std::vector<ParameterShard>> PlaceParameters(
    const std::vector<std::string>& names, const std::vector<int64_t>& numels,
    int32_t server_count, int64_t shard_threshold_elements) {
  std::vector<std::vector<ParameterShard>> placement(
      static_cast<size_t>(std::max(server_count, 0)));
  if (server_count <= 0) return placement;
  for (size_t i = 0; i < names.size() && i < numels.size(); ++i) {
    const int64_t n = numels[i];
    if (n <= 0) continue;
    ParameterShard shard;
    shard.name = names[i];
    shard.parameter = static_cast<int32_t>(i);
    if (n >= shard_threshold_elements && server_count > 1) {
      // Server s holds [s·n/K, (s+1)·n/K): slices differ by at most one
      // element and cover the tensor exactly.
      for (int32_t s = 0; s < server_count; ++s) {
        const int64_t begin = n * s / server_count;
        const int64_t end = n * (s + 1) / server_count;
        if (end == begin) continue;
        shard.offset = begin;
        shard.count = end - begin;
        shard.server = s;
        placement[s].push_back(shard);
      }
    } else {
      shard.offset = 0;
      shard.count = n;
      shard.server = static_cast<int32_t>(Fnv1a64(names[i]) %
                                          static_cast<uint64_t>(server_count));
      placement[shard.server].push_back(shard);
    }
  }
  return placement;
}

}  // namespace kolo::torch
