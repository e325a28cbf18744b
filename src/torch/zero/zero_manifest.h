// The manifest of a ZeroOptimizer checkpoint, zero_manifest.json: what is
// needed to find any element of any parameter in the checkpoint's shard
// files (zero_checkpoint.cc writes both and loads them; kolo/torch_zero.h
// says why they load at any number of ranks).
//
// A manifest is a file a user saved, copied or edited, so parsing checks
// every field the loader will index with before it is used. This unit
// needs neither LibTorch nor a process group, so that
// fuzz/zero_manifest_fuzzer.cc can feed it any text.
//
// Thread-safety: functions of their arguments.
#ifndef KOLO_TORCH_ZERO_ZERO_MANIFEST_H_
#define KOLO_TORCH_ZERO_ZERO_MANIFEST_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kolo/loss_scaler.h"
#include "kolo/status.h"

namespace kolo::torch {

// The manifest's "format" and "version" fields.
inline constexpr char kZeroManifestFormat[] = "kolo.zero-checkpoint";
inline constexpr int kZeroManifestVersion = 1;
// More shards than this is a corrupt manifest, not a cluster.
inline constexpr int64_t kMaxZeroShards = int64_t{1} << 20;

// Where one parameter's elements are in a checkpoint.
struct ManifestPlace {
  int64_t bucket = 0;
  int64_t offset = 0;  // in its bucket
  std::vector<int64_t> shape;
};

// What a manifest says, as ZeroOptimizer::Load needs it. A manifest that
// ParseZeroManifest returns holds 1 to kMaxZeroShards files, each a plain
// name in the checkpoint's directory (not empty, ".", ".." nor holding a
// '/'); as many elements as slices, every bucket's elements at least 0 and
// at most slice * files.size(), its slice at least 1 and that product an
// int64_t; and every place in a bucket of the list, with offset at least 0
// and offset + the product of its shape (its numel) at most its bucket's
// elements.
struct ZeroManifest {
  std::map<std::string, ManifestPlace> places;  // by parameter name
  std::vector<int64_t> elements;                // per bucket, unpadded
  std::vector<int64_t> slices;                  // per bucket
  std::vector<std::string> files;               // per shard
  std::vector<std::string> state_names;         // the optimizer's state tensors
  int64_t optimizer_step = 0;
  LossScaler::State scaler;
  int64_t steps_taken = 0;
};

// The manifest's "loss_scaler" object.
nlohmann::json LossScalerJson(const LossScaler::State& state);

// Parses the manifest at `path` (its contents are `text`) and checks that
// an `optimizer_kind` optimizer wrote it. kInvalidArgument naming `path`
// and the field when the text is not a manifest of this format, version
// and optimizer, or a field is missing, mistyped or out of range.
StatusOr<ZeroManifest> ParseZeroManifest(const std::string& text,
                                         const std::string& optimizer_kind,
                                         const std::string& path);

// A parameter of the model a checkpoint is loaded into.
struct ModelParameter {
  std::string name;
  std::vector<int64_t> shape;
};

// The model must be the one `manifest` describes, parameter by parameter,
// name and shape; kInvalidArgument naming `path` and the first parameter
// that differs.
Status CheckSameModel(const ZeroManifest& manifest,
                      const std::vector<ModelParameter>& model,
                      const std::string& path);

}  // namespace kolo::torch

#endif  // KOLO_TORCH_ZERO_ZERO_MANIFEST_H_
