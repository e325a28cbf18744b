// TrainingPeers and PeerStrategy (kolo/trainer_model_parallel.h), and what
// the model-parallel strategies share: gathering checksums, evaluating
// test shards.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/trainer_model_parallel.h"
#include "torch/training/agreement.h"
#include "torch/training/shard_evaluation.h"

namespace kolo::torch {

int32_t TrainingPeers::size() const { return group_ ? group_->size() : Size(); }

int32_t TrainingPeers::rank() const { return group_ ? group_->rank() : Rank(); }

Status TrainingPeers::Allreduce(void* values, int64_t count, DataType type,
                                ReduceOp op) {
  return group_ ? group_->Allreduce(values, values, count, type, op)
                : kolo::Allreduce(values, values, count, type, op);
}

Status TrainingPeers::Allgather(const void* send, void* recv, int64_t count,
                                DataType type) {
  return group_ ? group_->Allgather(send, recv, count, type)
                : kolo::Allgather(send, recv, count, type);
}

Status TrainingPeers::Barrier() {
  return group_ ? group_->Barrier() : kolo::Barrier();
}

StatusOr<double> TrainingPeers::Average(double value) {
  KOLO_RETURN_IF_ERROR(
      Allreduce(&value, 1, DataType::kFloat64, ReduceOp::kSum));
  return value / size();
}

StatusOr<double> PeerStrategy::AverageLoss(double loss, const std::string&) {
  return peers_.Average(loss);
}

namespace internal {

StatusOr<std::vector<uint64_t>> GatherChecksums(
    const ::torch::nn::Module& model, TrainingPeers& peers) {
  const uint64_t checksum = ParameterChecksum(model);
  std::vector<uint64_t> all(static_cast<size_t>(peers.size()));
  KOLO_RETURN_IF_ERROR(
      peers.Allgather(&checksum, all.data(), 1, DataType::kInt64));
  return all;
}

StatusOr<Evaluation> EvaluateShard(const data::Dataset& test, int32_t shard,
                                   int32_t shards, int64_t batch_size,
                                   bool counts, const ShardLogits& logits,
                                   TrainingPeers& peers) {
  data::DistributedSampler::Options sampling;
  sampling.rank = shard;
  sampling.world_size = shards;
  sampling.shuffle = false;
  KOLO_ASSIGN_OR_RETURN(
      data::DistributedSampler sampler,
      data::DistributedSampler::Create(test.size(), sampling));
  const int64_t real_rows = sampler.real_samples();
  data::LoaderOptions loading;
  loading.batch_size = batch_size;
  loading.num_workers = 1;
  KOLO_ASSIGN_OR_RETURN(
      std::unique_ptr<data::DataLoader> loader,
      data::DataLoader::Create(test, sampler.Indices(0), loading));
  int64_t offset = 0;
  int64_t counted[2] = {0, counts ? real_rows : 0};  // correct, total
  while (true) {
    KOLO_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
    if (!batch) break;
    const int64_t n = batch->labels.size(0);
    const int64_t real = std::clamp<int64_t>(real_rows - offset, 0, n);
    offset += n;
    KOLO_ASSIGN_OR_RETURN(::torch::Tensor out, logits(batch->images, real));
    if (!counts || real == 0) continue;
    counted[0] += out.narrow(0, 0, real)
                      .argmax(1)
                      .eq(batch->labels.narrow(0, 0, real))
                      .sum()
                      .item<int64_t>();
  }
  KOLO_RETURN_IF_ERROR(
      peers.Allreduce(counted, 2, DataType::kInt64, ReduceOp::kSum));
  if (counted[1] != test.size()) {
    return Internal("evaluation counted " + std::to_string(counted[1]) +
                    " test images across the ranks, not " +
                    std::to_string(test.size()));
  }
  Evaluation result;
  result.correct = counted[0];
  result.total = counted[1];
  return result;
}

}  // namespace internal
}  // namespace kolo::torch
