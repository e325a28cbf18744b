// DistributedSampler: one epoch's permutation, padded or cut to a multiple of
// the world size, dealt out to ranks like cards (rank r takes positions r,
// r + W, r + 2W, ...). Padding repeats the permutation from its start, so
// position k of the padded sequence is permutation[k mod N], and a rank
// never has to materialise the whole padded sequence.
#include <numeric>
#include <string>
#include <vector>

#include "kolo/data.h"
#include "torch/data/data_random.h"

namespace kolo::data {

StatusOr<DistributedSampler> DistributedSampler::Create(int64_t dataset_size,
                                                        Options options) {
  if (options.world_size < 1) {
    return InvalidArgument("DistributedSampler: world_size must be >= 1, got " +
                           std::to_string(options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("DistributedSampler: rank " +
                           std::to_string(options.rank) +
                           " is outside [0, world_size " +
                           std::to_string(options.world_size) + ")");
  }
  if (dataset_size < 0) {
    return InvalidArgument(
        "DistributedSampler: dataset_size must be >= 0, "
        "got " +
        std::to_string(dataset_size));
  }
  const int64_t world = options.world_size;
  const int64_t num_samples = options.drop_last
                                  ? dataset_size / world
                                  : (dataset_size + world - 1) / world;
  return DistributedSampler(dataset_size, options, num_samples);
}

int64_t DistributedSampler::real_samples() const {
  if (options_.drop_last) return num_samples_;
  if (options_.rank >= dataset_size_) return 0;
  return (dataset_size_ - options_.rank + options_.world_size - 1) /
         options_.world_size;
}

std::vector<int64_t> DistributedSampler::Indices(int64_t epoch) const {
  std::vector<int64_t> permutation(static_cast<size_t>(dataset_size_));
  std::iota(permutation.begin(), permutation.end(), int64_t{0});
  if (options_.shuffle) {
    DataRandom(options_.seed + static_cast<uint64_t>(epoch))
        .Shuffle(permutation);
  }
  std::vector<int64_t> shard(static_cast<size_t>(num_samples_));
  for (int64_t j = 0; j < num_samples_; ++j) {
    // With drop_last the position is below num_samples_ · W <= N already.
    const int64_t position = options_.rank + j * options_.world_size;
    shard[j] = permutation[position % dataset_size_];
  }
  return shard;
}

}  // namespace kolo::data
