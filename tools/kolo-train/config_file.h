// kolo-train's --config FILE: a DeepSpeed-style configuration
// (kolo/training_config.h) merged into the flags, and what the merged
// flags ask of the optimizer.
//
// Precedence: a flag given on the command line wins over the file; the file
// wins over kolo-train's defaults. Batch sizes follow DeepSpeed's rule
// (train_batch_size = micro batch x accumulation steps x workers, any two
// give the third), where --batch-size is the micro batch and
// --backward-passes-per-step the accumulation steps; either flag replaces
// the file's train_batch_size, which is then recomputed.
//
// The learning rate. Without a file (or with a file that names neither an
// optimizer nor a scheduler), kolo-train's own plan applies (plan.h: the
// rate of one worker, scaled by the workers, warm-up, cosine). With a file
// that names either, the file's rate is the rate of the global batch, as in
// DeepSpeed: no scaling, and the file's scheduler (or none: constant)
// decides the rate of each optimizer step; a step skipped for a float16
// overflow does not advance it.
//
// Thread-safety: pure functions of their arguments.
#ifndef KOLO_TOOLS_KOLO_TRAIN_CONFIG_FILE_H_
#define KOLO_TOOLS_KOLO_TRAIN_CONFIG_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "flags.h"
#include "kolo/status.h"
#include "kolo/training_config.h"

namespace kolo::train {

// Reads f->config_path (when set) and merges it into `f` for a job of
// `world_size` workers; `warnings` gets one line per key kolo ignores.
// Errors name the file and the key, or the flag that contradicts it. Then
// checks the combinations the merged flags may not make (ZeRO with
// --elastic, --no-kolo or --compression).
Status ApplyConfigFile(Flags* f, int32_t world_size,
                       std::vector<std::string>* warnings);

// The file decides the learning rate of each step (see above).
bool FileDrivesLearningRate(const Flags& f);

// The optimizer the run builds: --optimizer, --lr, --momentum, --nesterov,
// --weight-decay, with the file's betas, eps and amsgrad when it has them.
OptimizerConfig RunOptimizerConfig(const Flags& f);

// The precision --precision selects (fp32, bf16, fp16).
Precision RunPrecision(const Flags& f);

}  // namespace kolo::train

#endif  // KOLO_TOOLS_KOLO_TRAIN_CONFIG_FILE_H_
