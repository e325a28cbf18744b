// ZeroOptimizer's checkpoints: per-rank shard files plus one manifest, and
// loading them into any layout (kolo/torch_zero.h says why and how).
//
// A shard file is a LibTorch archive holding, for every bucket i, the
// rank's slice of the master weights ("b<i>.master") and of each optimizer
// state tensor ("b<i>.exp_avg", ...). The manifest (JSON, zero_manifest.h)
// holds what is needed to find any element of any parameter in those files.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "common/atomic_file.h"
#include "kolo/kolo.h"
#include "kolo/torch_zero.h"
#include "torch/distributed/optimizer_state.h"
#include "torch/zero/zero_internal.h"
#include "torch/zero/zero_manifest.h"

namespace kolo::torch {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kManifestName[] = "zero_manifest.json";
// Shard files of every save start with it; those no manifest names are
// removed once a new manifest is committed.
constexpr char kShardPrefix[] = "zero-step";

// A save's shard files carry its id as well as its step, so that a save
// never overwrites a file the current manifest names (two saves at one
// step, a retry after a failed save).
std::string ShardName(int64_t steps, uint64_t save_id, int32_t rank,
                      int32_t shards) {
  char id[17];
  std::snprintf(id, sizeof(id), "%016llx",
                static_cast<unsigned long long>(save_id));
  return kShardPrefix + std::to_string(steps) + "-" + id + "-shard" +
         std::to_string(rank) + "-of" + std::to_string(shards) + ".pt";
}

// One id for this save on every rank: rank 0's random draw.
StatusOr<uint64_t> AgreeOnSaveId() {
  std::random_device entropy;
  int64_t id = static_cast<int64_t>((uint64_t{entropy()} << 32) ^ entropy());
  if (Size() > 1)
    KOLO_RETURN_IF_ERROR(Broadcast(&id, &id, 1, DataType::kInt64, 0));
  return static_cast<uint64_t>(id);
}

std::string TensorKey(int64_t bucket, const std::string& what) {
  return "b" + std::to_string(bucket) + "." + what;
}

// Every rank learns whether `status` failed anywhere; the message names the
// first rank that failed.
Status AgreeAcrossRanks(const Status& status, const std::string& what) {
  if (Size() == 1) return status;
  const int32_t failed = status.ok() ? 0 : 1;
  std::vector<int32_t> all(static_cast<size_t>(Size()));
  KOLO_RETURN_IF_ERROR(Allgather(&failed, all.data(), 1, DataType::kInt32));
  if (!status.ok()) return status;
  for (int32_t r = 0; r < Size(); ++r) {
    if (all[r] != 0) {
      return Aborted(what + " failed on rank " + std::to_string(r) +
                     " (its error is in its output)");
    }
  }
  return Status::Ok();
}

// The shard files of a checkpoint, read on first use and checked against
// the manifest's slice sizes.
class ShardReader {
 public:
  ShardReader(std::string dir, std::vector<std::string> files,
              std::vector<int64_t> slices)
      : dir_(std::move(dir)),
        files_(std::move(files)),
        slices_(std::move(slices)) {}

  StatusOr<::torch::Tensor> Slice(int32_t shard, int64_t bucket,
                                  const std::string& what) {
    // ParseZeroManifest makes these hold; a bug must not read past the lists.
    if (shard < 0 || static_cast<size_t>(shard) >= files_.size() ||
        bucket < 0 || static_cast<size_t>(bucket) >= slices_.size()) {
      return Internal("checkpoint in " + dir_ + ": shard " +
                      std::to_string(shard) + " of bucket " +
                      std::to_string(bucket) + " is outside the manifest (" +
                      std::to_string(files_.size()) + " files, " +
                      std::to_string(slices_.size()) + " buckets)");
    }
    const std::string key = TensorKey(bucket, what);
    auto& tensors = cache_[shard];
    auto found = tensors.find(key);
    if (found != tensors.end()) return found->second;
    if (archives_.count(shard) == 0) {
      const std::string path = (fs::path(dir_) / files_[shard]).string();
      if (!fs::exists(path)) {
        return InvalidArgument("checkpoint shard " + path +
                               " is missing (the manifest lists it)");
      }
      try {
        archives_[shard].load_from(path);
      } catch (const std::exception& e) {
        std::string message = e.what();
        return InvalidArgument(
            "checkpoint shard " + path +
            " cannot be read: " + message.substr(0, message.find('\n')));
      }
    }
    ::torch::Tensor tensor;
    const std::string path = (fs::path(dir_) / files_[shard]).string();
    if (!archives_[shard].try_read(key, tensor)) {
      return InvalidArgument("checkpoint shard " + path + " has no tensor " +
                             key);
    }
    if (tensor.dim() != 1 || tensor.numel() != slices_[bucket] ||
        tensor.scalar_type() != ::torch::kFloat32) {
      return InvalidArgument(
          "checkpoint shard " + path + ": tensor " + key + " has " +
          std::to_string(tensor.numel()) + " elements; the manifest gives " +
          "bucket " + std::to_string(bucket) + " slices of " +
          std::to_string(slices_[bucket]) + " float32 elements");
    }
    tensors[key] = tensor;
    return tensor;
  }

  // Fills `into` with elements [begin, begin + into.numel()) of the
  // parameter at `old`, run by run, from the old slices that hold them.
  Status ReadParameter(const ManifestPlace& old, const std::string& what,
                       int64_t begin, ::torch::Tensor into) {
    const int64_t old_slice = slices_[old.bucket];
    for (int64_t done = 0; done < into.numel();) {
      const int64_t old_at = old.offset + begin + done;
      const int32_t shard = static_cast<int32_t>(old_at / old_slice);
      const int64_t run =
          std::min(into.numel() - done, (shard + 1) * old_slice - old_at);
      KOLO_ASSIGN_OR_RETURN(::torch::Tensor source,
                            Slice(shard, old.bucket, what));
      into.narrow(0, done, run)
          .copy_(source.narrow(0, old_at - shard * old_slice, run));
      done += run;
    }
    return Status::Ok();
  }

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<int64_t> slices_;
  std::map<int32_t, ::torch::serialize::InputArchive> archives_;
  std::map<int32_t, std::map<std::string, ::torch::Tensor>> cache_;
};

// Removes the shard files in `dir` other than `named` (the committed
// manifest's), and the hidden temporary files a crashed write left.
void RemoveUnnamedShards(const std::string& dir,
                         const std::vector<std::string>& named) {
  const std::set<std::string> keep(named.begin(), named.end());
  const std::string hidden = std::string(".") + kShardPrefix;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name.rfind(kShardPrefix, 0) == 0 ||
                      name.rfind(hidden, 0) == 0 ||
                      name.rfind(std::string(".") + kManifestName, 0) == 0;
    if (ours && keep.count(name) == 0) fs::remove(entry.path(), error);
  }
}

}  // namespace

Status ZeroOptimizer::Save(const std::string& dir) {
  KOLO_ASSIGN_OR_RETURN(const uint64_t save_id, AgreeOnSaveId());
  std::error_code error;
  fs::create_directories(dir, error);
  Status written;
  if (error) {
    written = InvalidArgument("checkpoint directory " + dir +
                              " cannot be created: " + error.message());
  }
  std::vector<std::string> files;
  for (int32_t r = 0; r < shard_count_; ++r)
    files.push_back(ShardName(steps_taken_, save_id, r, shard_count_));
  std::set<std::string> state_keys;
  if (written.ok() && rank_ < shard_count_) {
    try {
      ::torch::serialize::OutputArchive archive;
      for (auto& b : buckets_) {
        archive.write(TensorKey(b->index, "master"), b->master);
        for (const auto& [name, tensor] :
             GetParameterState(*optimizer_, b->master).tensors) {
          archive.write(TensorKey(b->index, name), tensor);
        }
      }
      std::ostringstream bytes;
      archive.save_to(bytes);
      written = WriteFileAtomically((fs::path(dir) / files[rank_]).string(),
                                    bytes.str());
    } catch (const std::exception& e) {
      std::string message = e.what();
      written = Internal("checkpoint shard " + files[rank_] + " in " + dir +
                         ": " + message.substr(0, message.find('\n')));
    }
  }
  // The manifest only once every shard is on disk.
  KOLO_RETURN_IF_ERROR(AgreeAcrossRanks(written, "writing checkpoint shards"));
  Status manifest_written;
  if (rank_ == 0) {
    json buckets = json::array();
    for (auto& b : buckets_) {
      json members = json::array();
      for (Parameter* p : b->members) {
        members.push_back({{"name", p->name},
                           {"shape", p->tensor.sizes().vec()},
                           {"offset", p->offset},
                           {"numel", p->tensor.numel()}});
      }
      buckets.push_back({{"elements", b->elements},
                         {"padded", b->padded},
                         {"slice", b->slice},
                         {"parameters", members}});
    }
    json state = json::array();
    int64_t optimizer_step = 0;
    if (!buckets_.empty()) {
      ParameterState first =
          GetParameterState(*optimizer_, buckets_[0]->master);
      for (const auto& named : first.tensors) state.push_back(named.first);
      optimizer_step = first.step;
    }
    json manifest = {{"format", kZeroManifestFormat},
                     {"version", kZeroManifestVersion},
                     {"shards", shard_count_},
                     {"world_size", Size()},
                     {"stage", options_.stage},
                     {"optimizer", OptimizerKind(*optimizer_)},
                     {"state", state},
                     {"optimizer_step", optimizer_step},
                     {"steps_taken", steps_taken_},
                     {"loss_scaler", LossScalerJson(loss_scaler_.state())},
                     {"buckets", buckets},
                     {"files", files}};
    manifest_written = WriteFileAtomically(
        (fs::path(dir) / kManifestName).string(), manifest.dump(1));
    // Only now, with the new manifest committed, are the shards of
    // earlier saves (and the temporary files of crashed ones) garbage.
    if (manifest_written.ok()) RemoveUnnamedShards(dir, files);
  }
  return AgreeAcrossRanks(manifest_written, "writing the checkpoint manifest");
}

Status ZeroOptimizer::Load(const std::string& dir) {
  const std::string manifest_path = (fs::path(dir) / kManifestName).string();
  StatusOr<std::string> text = ReadWholeFile(manifest_path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return NotFound("no ZeRO checkpoint in " + dir + ": " + manifest_path +
                      " does not exist");
    return text.status();
  }
  KOLO_ASSIGN_OR_RETURN(
      const ZeroManifest manifest,
      ParseZeroManifest(*text, OptimizerKind(*optimizer_), manifest_path));
  std::vector<ModelParameter> model;
  for (auto& p : parameters_)
    model.push_back({p->name, p->tensor.sizes().vec()});
  KOLO_RETURN_IF_ERROR(CheckSameModel(manifest, model, manifest_path));

  // Each rank fills the elements it owns, parameter by parameter, from the
  // old slices that hold them.
  ShardReader reader(dir, manifest.files, manifest.slices);
  std::vector<std::string> what = {"master"};
  what.insert(what.end(), manifest.state_names.begin(),
              manifest.state_names.end());
  std::map<std::string, std::vector<::torch::Tensor>> loaded;
  Status status;
  for (const std::string& name : what) {
    for (auto& b : buckets_) {
      ::torch::Tensor into = ::torch::zeros({b->slice}, ::torch::kFloat32);
      const int64_t low = (rank_ % shard_count_) * b->slice;
      const int64_t high = low + b->slice;
      for (Parameter* p : b->members) {
        const int64_t first = std::max(low, p->offset);
        const int64_t last = std::min(high, p->offset + p->tensor.numel());
        if (first >= last || !status.ok()) continue;
        status = reader.ReadParameter(
            manifest.places.at(p->name), name, first - p->offset,
            into.narrow(0, first - low, last - first));
      }
      loaded[name].push_back(into);
    }
  }
  KOLO_RETURN_IF_ERROR(AgreeAcrossRanks(status, "loading the checkpoint"));

  ::torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = *buckets_[i];
    b.master.copy_(loaded["master"][i]);
    if (manifest.state_names.empty()) continue;
    ParameterState state;
    state.step = manifest.optimizer_step;
    for (const std::string& name : manifest.state_names)
      state.tensors.emplace_back(name, loaded[name][i]);
    KOLO_RETURN_IF_ERROR(SetParameterState(*optimizer_, b.master, state)
                             .WithContext("checkpoint " + manifest_path));
  }
  loss_scaler_.Restore(manifest.scaler);
  steps_taken_ = manifest.steps_taken;
  return GatherWeights();
}

}  // namespace kolo::torch
