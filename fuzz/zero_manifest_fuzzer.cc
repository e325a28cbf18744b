// Fuzzes the manifest of ZeroOptimizer's checkpoints
// (src/torch/zero/zero_manifest.cc), zero_manifest.json in a checkpoint
// directory a user saved and may have edited or copied in part. Whatever
// the text, parsing must return a manifest or kInvalidArgument naming the
// file; a manifest it returns must keep zero_manifest.h's promises, on
// which the loader indexes its shard files and slices without further
// checks.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "torch/zero/zero_manifest.h"

namespace {

constexpr char kPath[] = "ckpt/zero_manifest.json";

// Traps with the broken promise on stderr.
void Promise(bool kept, const char* what) {
  if (kept) return;
  std::fprintf(stderr, "fuzz: a broken promise: %s\n", what);
  __builtin_trap();
}

bool IsPlainFileName(const std::string& file) {
  return !file.empty() && file != "." && file != ".." &&
         file.find('/') == std::string::npos;
}

void CheckPromises(const kolo::torch::ZeroManifest& manifest) {
  const int64_t shards = static_cast<int64_t>(manifest.files.size());
  Promise(shards >= 1 && shards <= kolo::torch::kMaxZeroShards,
          "1 to kMaxZeroShards files, one per shard");
  for (const std::string& file : manifest.files)
    Promise(IsPlainFileName(file), "every file a plain name");
  Promise(manifest.elements.size() == manifest.slices.size(),
          "elements and a slice for every bucket");
  for (size_t b = 0; b < manifest.slices.size(); ++b) {
    int64_t padded = 0;
    Promise(manifest.slices[b] >= 1, "every slice at least 1");
    Promise(!__builtin_mul_overflow(manifest.slices[b], shards, &padded),
            "slice * shards an int64_t");
    Promise(manifest.elements[b] >= 0 && manifest.elements[b] <= padded,
            "a bucket's elements within its shards' slices");
  }
  for (const auto& [name, place] : manifest.places) {
    Promise(place.bucket >= 0 &&
                static_cast<size_t>(place.bucket) < manifest.slices.size(),
            "every parameter in a listed bucket");
    int64_t numel = 1;
    for (int64_t dim : place.shape) {
      Promise(dim >= 0, "no negative dimension");
      Promise(!__builtin_mul_overflow(numel, dim, &numel),
              "a shape's product an int64_t");
    }
    int64_t end = 0;
    Promise(place.offset >= 0, "every offset at least 0");
    Promise(!__builtin_add_overflow(place.offset, numel, &end) &&
                end <= manifest.elements[place.bucket],
            "every offset + numel within its bucket");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto manifest = kolo::torch::ParseZeroManifest(text, "adam", kPath);
  if (!manifest.ok()) {
    Promise(manifest.status().code() == kolo::StatusCode::kInvalidArgument &&
                manifest.status().message().find(kPath) != std::string::npos,
            "errors are kInvalidArgument naming the file");
    return 0;
  }
  CheckPromises(*manifest);
  // The model the manifest describes is the one it must accept.
  std::vector<kolo::torch::ModelParameter> model;
  for (const auto& [name, place] : manifest->places)
    model.push_back({name, place.shape});
  Promise(kolo::torch::CheckSameModel(*manifest, model, kPath).ok(),
          "its own model accepted");
  return 0;
}
