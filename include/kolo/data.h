// kolo::data: in-memory datasets, a distributed sampler and a prefetching
// loader for data-parallel training.
//
//   KOLO_ASSIGN_OR_RETURN(
//       auto train, data::ReadFashionMnist(data::kFashionMnistDir, true));
//   KOLO_ASSIGN_OR_RETURN(auto sampler, data::DistributedSampler::Create(
//                                           train.size(), {rank, size}));
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     KOLO_ASSIGN_OR_RETURN(
//         auto loader, data::DataLoader::Create(train, sampler, epoch, {}));
//     while (true) {
//       KOLO_ASSIGN_OR_RETURN(auto batch, loader->Next());
//       if (!batch) break;  // end of this rank's epoch
//       Step(batch->images, batch->labels);
//     }
//   }
//
// A dataset is read whole into memory as normalised float32 images: the
// datasets kolo trains on (MNIST, Fashion-MNIST, CIFAR-10) are at most a few
// hundred megabytes, and a batch is then one index_select away, which keeps
// the loader simple and its batches cheap.
//
// LibTorch is ::torch here because namespace kolo::torch (kolo/torch.h)
// would otherwise capture the name.
#ifndef KOLO_DATA_H_
#define KOLO_DATA_H_

#include <torch/types.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kolo/status.h"

namespace kolo::data {

// A labelled image dataset held in memory.
//
// Thread-safety: the tensors are never written after a reader returns them,
// so a Dataset (and its copies, which share storage) may be read from any
// number of threads.
struct Dataset {
  ::torch::Tensor images;  // float32 N×C×H×W, normalised
  ::torch::Tensor labels;  // int64 N, in [0, num_classes)
  int64_t num_classes = 0;

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// The statistics of each training set's pixels, scaled to [0, 1]; readers
// normalise x to (x / 255 - mean) / std so a model sees roughly zero mean and
// unit variance.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
inline constexpr float kMnistMean = 0.1307f;
inline constexpr float kMnistStd = 0.3081f;
inline constexpr std::array<float, 3> kCifar10Mean = {0.4914f, 0.4822f,
                                                      0.4465f};
inline constexpr std::array<float, 3> kCifar10Std = {0.2470f, 0.2435f, 0.2616f};
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Reads an IDX pair: images (magic 0x00000803, big-endian u32 count, rows,
// cols, then unsigned bytes) and labels (magic 0x00000801, count, bytes).
// Each file may be gzip-compressed or raw; zlib recognises the gzip magic and
// reads other files as they are. Images come back as N×1×rows×cols,
// normalised with `mean` and `stddev` (the defaults only scale to [0, 1]);
// num_classes is the largest label plus one.
//
// Errors name the file and the cause: kNotFound for a missing file;
// kInvalidArgument for a bad magic (expected and found), truncated data
// (bytes expected and got), bytes past the end the header declares, or image
// and label files whose counts differ.
StatusOr<Dataset> ReadIdx(const std::string& images_path,
                          const std::string& labels_path, float mean = 0.0f,
                          float stddev = 1.0f);

// The standard MNIST / Fashion-MNIST files in `dir`: train-images-idx3-ubyte
// and train-labels-idx1-ubyte (t10k-... when !train), each raw or with
// ".gz" (the raw name wins when both exist). Normalised with the dataset's
// mean and std above; 10 classes.
StatusOr<Dataset> ReadFashionMnist(const std::string& dir, bool train);
StatusOr<Dataset> ReadMnist(const std::string& dir, bool train);

// CIFAR-10, binary version: data_batch_1.bin .. data_batch_5.bin in that
// order (train) or test_batch.bin, each a run of 3073-byte records (a label
// byte 0-9, then 32×32 red, green and blue planes). Images are N×3×32×32,
// normalised per channel with kCifar10Mean / kCifar10Std. Errors name the
// file: kNotFound when missing, kInvalidArgument when its size is not a
// multiple of 3073 or a label is not 0-9. Train with Cifar10Augmentation().
StatusOr<Dataset> ReadCifar10(const std::string& dir, bool train);

// `n` random images of `shape` (C, H, W) in `num_classes` classes: label
// uniform, image = prototype[label] + 0.5 · noise, where each class's
// prototype is uniform in [-1, 1] and the noise standard normal, so a model
// can learn it. The same seed gives the same dataset on every platform (kolo
// draws from its own generator, not the standard library's distributions).
// The arguments are constants in the calling code, so bad ones (n < 0, a
// shape that is not 3 positive sizes, num_classes < 1) abort.
Dataset Synthetic(int64_t n, std::vector<int64_t> shape, int64_t num_classes,
                  uint64_t seed);

// Per-batch random augmentation, as torchvision's RandomCrop(H, padding) and
// RandomHorizontalFlip() in that order.
struct Augmentation {
  // Pads each image by this many zeros on every side, then crops a random
  // H×W window; 0 disables. The images are already normalised, so the zero
  // border is the channel mean (torchvision pads before normalising, with
  // black); a mean border carries no signal either way.
  int64_t crop_padding = 0;
  bool horizontal_flip = false;  // mirror each image with probability 1/2

  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// CIFAR-10's standard training augmentation: crop 32 with padding 4, flip.
inline Augmentation Cifar10Augmentation() { return {4, true}; }

// Augments a float N×C×H×W batch; a function of (images, augmentation, seed)
// alone. Returns `images` itself when augmentation is disabled.
::torch::Tensor Augment(const ::torch::Tensor& images,
                        const Augmentation& augmentation, uint64_t seed);

// Which dataset rows one rank visits in one epoch.
//
// Every rank computes the same permutation of [0, N) for an epoch, seeded by
// seed + epoch (as torch.utils.data.DistributedSampler does; the identity when
// !shuffle), and takes the strided shard permutation[rank], [rank + W],
// [rank + 2W], ... where W = world_size. Shards are disjoint and all ranks get
// the same number of samples, because a rank that runs out of batches first
// would leave the others blocked in a collective. To make N divisible by W:
//   - by default (drop_last = false) the permutation is padded to
//     ceil(N / W) · W by repeating it from its start, so every row is seen
//     and up to W - 1 rows are seen twice per epoch;
//   - with drop_last the last N mod W rows of the permutation are dropped, so
//     no row is repeated and up to W - 1 rows (different ones each epoch when
//     shuffling) are skipped.
//
// Thread-safety: immutable after Create(); Indices() may be called from any
// thread.
class DistributedSampler {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t world_size = 1;
    bool shuffle = true;
    uint64_t seed = 0;
    bool drop_last = false;
  };

  // kInvalidArgument unless 0 <= rank < world_size and dataset_size >= 0.
  static StatusOr<DistributedSampler> Create(int64_t dataset_size,
                                             Options options);

  // This rank's num_samples() dataset rows for `epoch`, in visiting order.
  std::vector<int64_t> Indices(int64_t epoch) const;

  int64_t num_samples() const { return num_samples_; }  // per rank and epoch
  // How many of Indices()' rows are real rather than padding. Without
  // drop_last the sampler pads the N visiting positions to a multiple of W
  // by repeating the first ones, and rank r takes positions r, r + W, ...;
  // so its real rows are its first ceil((N - r) / W) (none when r >= N) and
  // the rest repeat rows another rank has too. Counting only these makes
  // every row count once across the ranks, as evaluation needs.
  int64_t real_samples() const;
  int64_t dataset_size() const { return dataset_size_; }
  const Options& options() const { return options_; }

 private:
  DistributedSampler(int64_t dataset_size, Options options, int64_t num_samples)
      : dataset_size_(dataset_size),
        options_(options),
        num_samples_(num_samples) {}

  int64_t dataset_size_;
  Options options_;
  int64_t num_samples_;
};

// One batch: rows indices[0], indices[1], ... of the dataset.
struct Batch {
  ::torch::Tensor images;   // float32 B×C×H×W, augmented if asked
  ::torch::Tensor labels;   // int64 B
  ::torch::Tensor indices;  // int64 B: the dataset rows, in sampler order
  int64_t number = 0;       // 0-based position of the batch in the epoch
};

struct LoaderOptions {
  int64_t batch_size = 64;
  // The last batch of an epoch holds the remaining (fewer than batch_size)
  // rows; with drop_last it is not produced. Kept by default so that every
  // sampled row is trained on. Under DistributedSampler all ranks have the
  // same number of rows, so they agree on the number of batches either way.
  bool drop_last = false;
  int32_t num_workers = 2;  // threads named "kolo-loader"
  // At most this many batches are ready or being built at once: the bound
  // on the loader's memory and on how far it runs ahead of training.
  int32_t prefetch = 4;
  Augmentation augmentation;
  // Batch b is augmented with a seed drawn from (augmentation_seed, b), so
  // the result does not depend on num_workers or thread timing. The
  // sampler overload of Create() mixes in the sampler's seed, the epoch and
  // the rank.
  uint64_t augmentation_seed = 0;
  // Runs on a worker after augmentation, e.g. to convert or move the batch;
  // must be safe to call from several threads at once. A non-ok Status or an
  // exception becomes the error Next() returns for this batch.
  std::function<Status(Batch&)> transform;
};

// Batches one epoch of a dataset in the order of a list of rows (normally a
// DistributedSampler's), built ahead of time by background threads.
//
// Workers take batch numbers in order, build the batch (index_select,
// Augment, transform) and park it in a map from batch number to batch; a
// worker may start batch b only while b < next + prefetch, where next is the
// batch Next() hands out next, so at most `prefetch` batches exist at once.
// Next() waits for batch `next` and returns batches strictly in order,
// whatever order the workers finish in. Waiting is on condition variables,
// never by polling.
//
// Errors are sticky: when building batch b failed, Next() returns batches
// before b, then that error for every later call, and the workers stop.
//
// Thread-safety: Next() may be called from several threads (each batch goes
// to one caller). The destructor must not run concurrently with Next(); it
// stops the workers, which finish at most the batch each one is building,
// and joins them, so destroying a loader mid-epoch returns promptly.
class DataLoader {
 public:
  // A loader over `indices`, each in [0, dataset.size()). kInvalidArgument
  // for a malformed dataset (images not float N×C×H×W, labels not int64 N),
  // an index out of range or a non-positive batch_size, num_workers or
  // prefetch, or a negative crop_padding.
  static StatusOr<std::unique_ptr<DataLoader>> Create(
      Dataset dataset, std::vector<int64_t> indices, LoaderOptions options);
  // A loader over sampler.Indices(epoch); augmentation is seeded by
  // (options.augmentation_seed, sampler seed, epoch, rank), so it is
  // reproducible, differs between epochs and ranks, and needs no setup.
  static StatusOr<std::unique_ptr<DataLoader>> Create(
      Dataset dataset, const DistributedSampler& sampler, int64_t epoch,
      LoaderOptions options);

  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch in order; std::nullopt once the epoch is done; the error
  // of a failed batch (kInternal for an exception, with its message).
  StatusOr<std::optional<Batch>> Next();

  int64_t num_batches() const { return num_batches_; }

 private:
  DataLoader(Dataset dataset, std::vector<int64_t> indices,
             LoaderOptions options);
  void WorkerLoop();
  StatusOr<Batch> Build(int64_t number) const;

  const Dataset dataset_;
  const std::vector<int64_t> indices_;
  const LoaderOptions options_;
  const int64_t num_batches_;

  std::mutex mu_;
  std::condition_variable ready_cv_;  // a batch was parked, or stopping
  std::condition_variable space_cv_;  // next_ advanced, or stopping
  bool stopping_ = false;             // GUARDED_BY(mu_)
  int64_t next_ = 0;                  // GUARDED_BY(mu_) handed out next
  int64_t next_claim_ = 0;            // GUARDED_BY(mu_) a worker builds next
  std::map<int64_t, StatusOr<Batch>> ready_;  // GUARDED_BY(mu_)
  Status error_;                              // GUARDED_BY(mu_) sticky
  std::vector<std::thread> workers_;
};

}  // namespace kolo::data

#endif  // KOLO_DATA_H_
