// Fuzzes the training configuration (training/training_config.cc), a
// DeepSpeed-style ds_config.json the user hands kolo-train. Whatever the
// text, parsing must return a configuration or kInvalidArgument, and a
// configuration it returns must fill in its batch sizes or refuse them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kolo/training_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = kolo::ParseTrainingConfig(text, "ds_config.json");
  if (!config.ok()) {
    if (config.status().code() != kolo::StatusCode::kInvalidArgument)
      std::abort();
    return 0;
  }
  for (int32_t world_size : {1, 3, 8}) {
    kolo::TrainingConfig resolved = *config;
    (void)kolo::ResolveBatchSizes(&resolved, world_size);
  }
  return 0;
}
