// Evaluation over a model-parallel strategy's test shards
// (kolo/trainer_model_parallel.h).
#ifndef KOLO_SRC_TORCH_TRAINING_SHARD_EVALUATION_H_
#define KOLO_SRC_TORCH_TRAINING_SHARD_EVALUATION_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "kolo/data.h"
#include "kolo/status.h"
#include "kolo/trainer_model_parallel.h"

namespace kolo::torch::internal {

// The logits of the first `real_rows` rows of `images` (a batch of a test
// shard, whose other rows are the sampler's padding), or an undefined
// tensor where this rank has none to count.
using ShardLogits = std::function<StatusOr<::torch::Tensor>(
    const ::torch::Tensor& images, int64_t real_rows)>;

// Shard `shard` of `shards` of `test`, unshuffled and padded to equal sizes
// as DistributedSampler pads, in batches of `batch_size`: each batch goes
// through `logits` (also one with no real row, so that a collective forward
// runs equally often on every rank), and where `counts`, its real rows'
// correct predictions are counted. Correct and total are summed over
// `peers`; kInternal when the total is not the test set's size.
StatusOr<Evaluation> EvaluateShard(const data::Dataset& test, int32_t shard,
                                   int32_t shards, int64_t batch_size,
                                   bool counts, const ShardLogits& logits,
                                   TrainingPeers& peers);

}  // namespace kolo::torch::internal

#endif  // KOLO_SRC_TORCH_TRAINING_SHARD_EVALUATION_H_
