// zero_manifest.h's parsing: integers are read by ToInteger, every other
// field with nlohmann::json's checked accessors (a missing or mistyped
// field throws json::exception, turned into kInvalidArgument at the top),
// and every number the loader will index with is checked against the
// others before it is kept.
#include "torch/zero/zero_manifest.h"

#include <limits>

namespace kolo::torch {
namespace {

using nlohmann::json;

Status BadManifest(const std::string& path, const std::string& what) {
  return InvalidArgument("checkpoint manifest " + path + ": " + what);
}

// An integer, as Save writes every count, offset and step. nlohmann's
// get<int64_t>() would also take a float, with a static_cast that is
// undefined behaviour when the float is out of range (1e300), and an
// unsigned number past INT64_MAX, wrapped to a negative one.
StatusOr<int64_t> ToInteger(const json& value, const std::string& path,
                            const std::string& what,
                            int64_t min = std::numeric_limits<int64_t>::min(),
                            int64_t max = std::numeric_limits<int64_t>::max()) {
  const bool is_int64 =
      value.is_number_integer() &&
      (!value.is_number_unsigned() ||
       value.get<uint64_t>() <=
           static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!is_int64 || value.get<int64_t>() < min || value.get<int64_t>() > max) {
    return BadManifest(
        path, what + " is " + value.dump() + "; it must be an integer from " +
                  std::to_string(min) + " to " + std::to_string(max));
  }
  return value.get<int64_t>();
}

// The integer field `key` of `object`; throws json::exception when it is
// missing.
StatusOr<int64_t> ReadInteger(
    const json& object, const char* key, const std::string& path,
    const std::string& where = "",
    int64_t min = std::numeric_limits<int64_t>::min(),
    int64_t max = std::numeric_limits<int64_t>::max()) {
  return ToInteger(object.at(key), path, where + key, min, max);
}

// The inverse of LossScalerJson; throws json::exception on a missing field.
StatusOr<LossScaler::State> ScalerFromJson(const json& s,
                                           const std::string& path) {
  const std::string where = "loss_scaler.";
  LossScaler::State scaler;
  scaler.scale = s.at("scale").get<double>();
  KOLO_ASSIGN_OR_RETURN(scaler.iteration,
                        ReadInteger(s, "iteration", path, where));
  KOLO_ASSIGN_OR_RETURN(scaler.last_overflow_iteration,
                        ReadInteger(s, "last_overflow_iteration", path, where));
  KOLO_ASSIGN_OR_RETURN(const int64_t hysteresis_left,
                        ReadInteger(s, "hysteresis_left", path, where,
                                    std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max()));
  scaler.hysteresis_left = static_cast<int32_t>(hysteresis_left);
  KOLO_ASSIGN_OR_RETURN(scaler.clean_steps,
                        ReadInteger(s, "clean_steps", path, where));
  KOLO_ASSIGN_OR_RETURN(scaler.skipped_steps,
                        ReadInteger(s, "skipped_steps", path, where));
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
  KOLO_ASSIGN_OR_RETURN(place.offset, ReadInteger(p, "offset", path, where));
  const json& shape = p.at("shape");
  if (!shape.is_array())
    return BadManifest(path,
                       where + "shape " + shape.dump() + " is not an array");
  for (size_t d = 0; d < shape.size(); ++d) {
    // Negative dimensions are refused below, with the shape.
    KOLO_ASSIGN_OR_RETURN(
        const int64_t dim,
        ToInteger(shape[d], path, where + "shape[" + std::to_string(d) + "]"));
    place.shape.push_back(dim);
  }
  KOLO_ASSIGN_OR_RETURN(const int64_t numel,
                        ReadInteger(p, "numel", path, where));
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
    KOLO_ASSIGN_OR_RETURN(const int64_t elements,
                          ReadInteger(b, "elements", path, bucket));
    KOLO_ASSIGN_OR_RETURN(const int64_t slice,
                          ReadInteger(b, "slice", path, bucket));
    KOLO_ASSIGN_OR_RETURN(const int64_t padded,
                          ReadInteger(b, "padded", path, bucket));
    if (slice < 1) {
      return BadManifest(path, bucket + "slice is " + std::to_string(slice) +
                                   "; it must be at least 1");
    }
    if (elements < 0) {
      return BadManifest(path, bucket + "elements is " +
                                   std::to_string(elements) +
                                   "; it must be at least 0");
    }
    // shards >= 1 (CheckFiles): the product is checked before it is made.
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
    // Compared as JSON: a float version is not cast to int first.
    if (manifest.value("version", json()) != kZeroManifestVersion)
      return BadManifest(path, "version " + manifest["version"].dump() +
                                   " is not " +
                                   std::to_string(kZeroManifestVersion));
    const std::string kind = manifest.at("optimizer").get<std::string>();
    if (kind != optimizer_kind) {
      return BadManifest(path, "written by a " + kind +
                                   " optimizer; this one is " + optimizer_kind);
    }
    out.files = manifest.at("files").get<std::vector<std::string>>();
    KOLO_ASSIGN_OR_RETURN(const int64_t shards,
                          ReadInteger(manifest, "shards", path));
    KOLO_RETURN_IF_ERROR(CheckFiles(out.files, shards, path));
    KOLO_RETURN_IF_ERROR(
        ReadBuckets(manifest.at("buckets"), shards, path, out));
    out.state_names = manifest.at("state").get<std::vector<std::string>>();
    KOLO_ASSIGN_OR_RETURN(out.optimizer_step,
                          ReadInteger(manifest, "optimizer_step", path));
    KOLO_ASSIGN_OR_RETURN(out.steps_taken,
                          ReadInteger(manifest, "steps_taken", path));
    KOLO_ASSIGN_OR_RETURN(out.scaler,
                          ScalerFromJson(manifest.at("loss_scaler"), path));
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
