// zero_manifest.h's parsing: every field is read with nlohmann::json's
// checked accessors (a missing or mistyped field throws json::exception,
// turned into kInvalidArgument at the top) and every number the loader
// will index with is checked against the others before it is kept.
#include "torch/zero/zero_manifest.h"

#include <limits>

namespace kolo::torch {
namespace {

using nlohmann::json;

Status BadManifest(const std::string& path, const std::string& what) {
  return InvalidArgument("checkpoint manifest " + path + ": " + what);
}

// The inverse of LossScalerJson; throws json::exception on a missing field.
LossScaler::State ScalerFromJson(const json& s) {
  LossScaler::State scaler;
  scaler.scale = s.at("scale").get<double>();
  scaler.iteration = s.at("iteration").get<int64_t>();
  scaler.last_overflow_iteration =
      s.at("last_overflow_iteration").get<int64_t>();
  scaler.hysteresis_left = s.at("hysteresis_left").get<int32_t>();
  scaler.clean_steps = s.at("clean_steps").get<int64_t>();
  scaler.skipped_steps = s.at("skipped_steps").get<int64_t>();
  return scaler;
}

// Reads bucket `bucket`'s parameter `p` into `place`, checking its numel
// against its shape and that it lies inside the bucket's `elements`;
// throws json::exception on a missing or mistyped field.
Status ReadPlace(const json& p, int64_t bucket, int64_t elements,
                 const std::string& path, std::string& name,
                 ManifestPlace& place) {
  name = p.at("name").get<std::string>();
  const std::string where =
      "bucket " + std::to_string(bucket) + " parameter " + name + ": ";
  place.bucket = bucket;
  place.offset = p.at("offset").get<int64_t>();
  place.shape = p.at("shape").get<std::vector<int64_t>>();
  const int64_t numel = p.at("numel").get<int64_t>();
  int64_t product = 1;
  for (int64_t dim : place.shape) {
    if (dim < 0 || (dim > 0 && product > elements / dim)) {
      return BadManifest(path, where + "shape " + json(place.shape).dump() +
                                   " does not fit in the bucket's " +
                                   std::to_string(elements) + " elements");
    }
    product *= dim;
  }
  if (numel != product) {
    return BadManifest(path, where + "numel " + std::to_string(numel) +
                                 " is not the product of its shape " +
                                 json(place.shape).dump() + " (" +
                                 std::to_string(product) + ")");
  }
  // Written so that no sum can overflow: 0 <= numel <= elements here.
  if (place.offset < 0 || place.offset > elements - numel) {
    return BadManifest(path, where + "offset " + std::to_string(place.offset) +
                                 " + numel " + std::to_string(numel) +
                                 " lies outside the bucket's " +
                                 std::to_string(elements) + " elements");
  }
  return Status::Ok();
}

// Reads the manifest's buckets into `out`'s slices and places, checking
// that the `shards` slices of each cover it and that its parameters lie
// inside it; throws json::exception on a missing or mistyped field.
Status ReadBuckets(const json& buckets, int64_t shards, const std::string& path,
                   ZeroManifest& out) {
  for (size_t i = 0; i < buckets.size(); ++i) {
    const json& b = buckets[i];
    const std::string bucket = "bucket " + std::to_string(i) + ": ";
    const int64_t elements = b.at("elements").get<int64_t>();
    const int64_t slice = b.at("slice").get<int64_t>();
    const int64_t padded = b.at("padded").get<int64_t>();
    if (slice < 1) {
      return BadManifest(path, bucket + "slice is " + std::to_string(slice) +
                                   "; it must be at least 1");
    }
    if (elements < 0) {
      return BadManifest(path, bucket + "elements is " +
                                   std::to_string(elements) +
                                   "; it must be at least 0");
    }
    // shards >= 1 (ParseManifest): the product is checked before it is made.
    if (slice > std::numeric_limits<int64_t>::max() / shards ||
        slice * shards != padded || padded < elements) {
      return BadManifest(path, bucket + std::to_string(elements) +
                                   " elements in " + std::to_string(shards) +
                                   " slices of " + std::to_string(slice) +
                                   " (padded " + std::to_string(padded) +
                                   "), which do not cover it evenly");
    }
    out.elements.push_back(elements);
    out.slices.push_back(slice);
    for (const json& p : b.at("parameters")) {
      std::string name;
      ManifestPlace place;
      KOLO_RETURN_IF_ERROR(
          ReadPlace(p, static_cast<int64_t>(i), elements, path, name, place));
      if (!out.places.emplace(name, place).second)
        return BadManifest(path, "parameter " + name + " appears twice");
    }
  }
  return Status::Ok();
}

// Shard files are plain names inside the checkpoint's directory.
Status CheckFiles(const std::vector<std::string>& files, int64_t shards,
                  const std::string& path) {
  if (shards < 1 || shards > kMaxZeroShards) {
    return BadManifest(path, "shards is " + std::to_string(shards) +
                                 "; it must be 1 to " +
                                 std::to_string(kMaxZeroShards));
  }
  if (static_cast<int64_t>(files.size()) != shards)
    return BadManifest(path, std::to_string(files.size()) + " files for " +
                                 std::to_string(shards) + " shards");
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    if (file.empty() || file == "." || file == ".." ||
        file.find('/') != std::string::npos) {
      return BadManifest(path, "files[" + std::to_string(i) + "] '" + file +
                                   "' is not a file name in the checkpoint's "
                                   "directory");
    }
  }
  return Status::Ok();
}

}  // namespace

json LossScalerJson(const LossScaler::State& s) {
  return {{"scale", s.scale},
          {"iteration", s.iteration},
          {"last_overflow_iteration", s.last_overflow_iteration},
          {"hysteresis_left", s.hysteresis_left},
          {"clean_steps", s.clean_steps},
          {"skipped_steps", s.skipped_steps}};
}

StatusOr<ZeroManifest> ParseZeroManifest(const std::string& text,
                                         const std::string& optimizer_kind,
                                         const std::string& path) {
  ZeroManifest out;
  try {
    json manifest = json::parse(text);
    if (manifest.value("format", "") != kZeroManifestFormat)
      return BadManifest(path, "not a kolo ZeRO checkpoint (format is not " +
                                   std::string(kZeroManifestFormat) + ")");
    if (manifest.value("version", 0) != kZeroManifestVersion)
      return BadManifest(path, "version " + manifest["version"].dump() +
                                   " is not " +
                                   std::to_string(kZeroManifestVersion));
    const std::string kind = manifest.at("optimizer").get<std::string>();
    if (kind != optimizer_kind) {
      return BadManifest(path, "written by a " + kind +
                                   " optimizer; this one is " + optimizer_kind);
    }
    out.files = manifest.at("files").get<std::vector<std::string>>();
    const int64_t shards = manifest.at("shards").get<int64_t>();
    KOLO_RETURN_IF_ERROR(CheckFiles(out.files, shards, path));
    KOLO_RETURN_IF_ERROR(
        ReadBuckets(manifest.at("buckets"), shards, path, out));
    out.state_names = manifest.at("state").get<std::vector<std::string>>();
    out.optimizer_step = manifest.at("optimizer_step").get<int64_t>();
    out.steps_taken = manifest.at("steps_taken").get<int64_t>();
    out.scaler = ScalerFromJson(manifest.at("loss_scaler"));
  } catch (const json::exception& e) {
    return BadManifest(path, e.what());
  }
  return out;
}

Status CheckSameModel(const ZeroManifest& manifest,
                      const std::vector<ModelParameter>& model,
                      const std::string& path) {
  const std::map<std::string, ManifestPlace>& places = manifest.places;
  if (places.size() != model.size()) {
    for (const auto& [name, place] : places) {
      bool found = false;
      for (const ModelParameter& p : model) found = found || p.name == name;
      if (!found)
        return BadManifest(path, "parameter " + name + " is not in this model");
    }
  }
  for (const ModelParameter& p : model) {
    auto it = places.find(p.name);
    if (it == places.end())
      return BadManifest(path,
                         "has no parameter " + p.name + " (this model has it)");
    if (it->second.shape != p.shape) {
      return BadManifest(path, "parameter " + p.name + " has shape " +
                                   json(it->second.shape).dump() +
                                   "; in this model it is " +
                                   json(p.shape).dump());
    }
  }
  return Status::Ok();
}

}  // namespace kolo::torch
