// What the Trainer's strategies share about checking that ranks ended
// alike (kolo/trainer.h, kolo/trainer_model_parallel.h).
#ifndef KOLO_SRC_TORCH_TRAINING_AGREEMENT_H_
#define KOLO_SRC_TORCH_TRAINING_AGREEMENT_H_

#include <cstdint>
#include <vector>

#include "kolo/status.h"
#include "kolo/trainer_model_parallel.h"

namespace kolo::torch::internal {

// `checksums[i]` is peer i's ParameterChecksum; peer i must hold what peer
// i % replica_stride holds (1: everyone rank 0's; a pipeline's stage count:
// every replica its stage's first). kInternal names the first peer that
// differs, as "<peer> i", and the one it should equal.
Status CheckReplicasAgree(const std::vector<uint64_t>& checksums,
                          int32_t replica_stride, const char* peer);

// Every peer's ParameterChecksum(model), in peer order.
StatusOr<std::vector<uint64_t>> GatherChecksums(
    const ::torch::nn::Module& model, TrainingPeers& peers);

}  // namespace kolo::torch::internal

#endif  // KOLO_SRC_TORCH_TRAINING_AGREEMENT_H_
