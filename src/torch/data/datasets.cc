// Dataset readers (IDX for MNIST and Fashion-MNIST, CIFAR-10 binary) and the
// synthetic dataset. Readers load the whole file into bytes, check it
// against its header, then convert once to normalised float32.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "kolo/data.h"
#include "torch/data/data_random.h"

namespace kolo::data {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
constexpr int64_t kCifarImageBytes = 3 * 32 * 32;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;

std::string Hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

Status OpenError(const std::string& path, int error) {
  std::string message = path + ": cannot open: " + std::strerror(error);
  if (error == ENOENT) return NotFound(std::move(message));
  return InvalidArgument(std::move(message));
}

// A file read through zlib, which decompresses gzip files and passes other
// files through unchanged ("transparent" mode).
class GzReader {
 public:
  GzReader() = default;
  ~GzReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  Status Open(const std::string& path) {
    path_ = path;
    // open() first: gzopen() does not reliably say why it failed.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(path, errno);
    struct stat info;
    if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
      ::close(fd);
      return InvalidArgument(path + ": is a directory, not an IDX file");
    }
    file_ = gzdopen(fd, "rb");
    if (file_ == nullptr) {
      ::close(fd);
      return Internal(path + ": zlib could not open the file");
    }
    gzbuffer(file_, 1 << 18);
    return Status::Ok();
  }

  // Reads up to `n` bytes; fewer only at the end of the file.
  StatusOr<int64_t> Read(void* data, int64_t n) {
    auto* out = static_cast<unsigned char*>(data);
    int64_t done = 0;
    while (done < n) {
      // gzread counts in unsigned int; read at most 1 GiB per call.
      const unsigned chunk =
          static_cast<unsigned>(std::min<int64_t>(n - done, int64_t{1} << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int code = 0;
        return InvalidArgument(path_ + ": corrupt gzip data after " +
                               std::to_string(done) +
                               " bytes: " + gzerror(file_, &code));
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

// Reads the big-endian u32 header words of an IDX file and checks its magic.
Status ReadHeader(GzReader& reader, const std::string& path, uint32_t magic,
                  const char* kind, uint32_t* words, int count) {
  unsigned char bytes[16];
  const int64_t want = 4 * count;
  KOLO_ASSIGN_OR_RETURN(int64_t got, reader.Read(bytes, want));
  if (got >= 4) {
    const uint32_t found = (uint32_t{bytes[0]} << 24) |
                           (uint32_t{bytes[1]} << 16) |
                           (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
    if (found != magic) {
      return InvalidArgument(path + ": bad magic: expected " + Hex32(magic) +
                             " (" + kind + "), found " + Hex32(found));
    }
  }
  if (got < want) {
    return InvalidArgument(path + ": truncated header: expected " +
                           std::to_string(want) + " bytes, got " +
                           std::to_string(got));
  }
  for (int i = 0; i < count; ++i) {
    const unsigned char* b = bytes + 4 * i;
    words[i] = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
               (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  }
  return Status::Ok();
}

// Reads exactly `n` payload bytes after a header of `header_bytes`, and
// checks that nothing follows them.
StatusOr<std::vector<uint8_t>> ReadPayload(GzReader& reader,
                                           const std::string& path,
                                           int64_t header_bytes, int64_t n,
                                           const char* what) {
  // Grow as data arrives rather than trusting the header with one huge
  // allocation; a corrupt count then ends as "truncated", not bad_alloc.
  std::vector<uint8_t> data;
  data.reserve(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 28)));
  constexpr int64_t kChunk = int64_t{1} << 22;
  while (static_cast<int64_t>(data.size()) < n) {
    const int64_t offset = static_cast<int64_t>(data.size());
    const int64_t want = std::min(kChunk, n - offset);
    data.resize(static_cast<size_t>(offset + want));
    KOLO_ASSIGN_OR_RETURN(int64_t got, reader.Read(data.data() + offset, want));
    if (got < want) {
      return InvalidArgument(
          path + ": truncated " + what + ": expected " + std::to_string(n) +
          " bytes after the " + std::to_string(header_bytes) +
          "-byte header, got " + std::to_string(offset + got));
    }
  }
  unsigned char extra[1];
  KOLO_ASSIGN_OR_RETURN(int64_t more, reader.Read(extra, 1));
  if (more != 0) {
    return InvalidArgument(path + ": longer than its header says: more than " +
                           std::to_string(n) + " bytes of " + what +
                           " after the " + std::to_string(header_bytes) +
                           "-byte header");
  }
  return data;
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

// `dir`/`name`, or `dir`/`name`.gz when only that exists. When neither does,
// the raw name, so that the error names a file.
std::string ResolveIdx(const std::string& dir, const std::string& name) {
  const std::string raw = dir + "/" + name;
  if (Exists(raw)) return raw;
  if (Exists(raw + ".gz")) return raw + ".gz";
  return raw;
}

StatusOr<Dataset> ReadMnistLike(const std::string& dir, bool train, float mean,
                                float stddev) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images = ResolveIdx(dir, prefix + "-images-idx3-ubyte");
  const std::string labels = ResolveIdx(dir, prefix + "-labels-idx1-ubyte");
  for (const std::string& path : {images, labels}) {
    // ResolveIdx() returns the raw name when neither file exists.
    if (!Exists(path)) {
      return NotFound(path + ": no such file (nor " + path + ".gz)");
    }
  }
  KOLO_ASSIGN_OR_RETURN(Dataset dataset, ReadIdx(images, labels, mean, stddev));
  dataset.num_classes = 10;
  return dataset;
}

}  // namespace

StatusOr<Dataset> ReadIdx(const std::string& images_path,
                          const std::string& labels_path, float mean,
                          float stddev) {
  if (!(stddev > 0.0f)) {
    return InvalidArgument("ReadIdx(" + images_path +
                           "): stddev must be positive, got " +
                           std::to_string(stddev));
  }
  GzReader images_file;
  KOLO_RETURN_IF_ERROR(images_file.Open(images_path));
  uint32_t image_header[4];  // magic, count, rows, cols
  KOLO_RETURN_IF_ERROR(ReadHeader(images_file, images_path, kIdxImagesMagic,
                                  "IDX images: unsigned bytes, 3 dimensions",
                                  image_header, 4));
  const int64_t count = image_header[1];
  const int64_t rows = image_header[2];
  const int64_t cols = image_header[3];
  // Each factor is below 2^32; rows·cols is checked before the product with
  // count so that it cannot overflow int64.
  if (rows * cols > (int64_t{1} << 30)) {
    return InvalidArgument(images_path + ": implausible image size " +
                           std::to_string(rows) + "x" + std::to_string(cols));
  }
  KOLO_ASSIGN_OR_RETURN(std::vector<uint8_t> pixels,
                        ReadPayload(images_file, images_path, 16,
                                    count * rows * cols, "pixel data"));

  GzReader labels_file;
  KOLO_RETURN_IF_ERROR(labels_file.Open(labels_path));
  uint32_t label_header[2];  // magic, count
  KOLO_RETURN_IF_ERROR(ReadHeader(labels_file, labels_path, kIdxLabelsMagic,
                                  "IDX labels: unsigned bytes, 1 dimension",
                                  label_header, 2));
  if (label_header[1] != count) {
    return InvalidArgument("count mismatch: " + images_path + " has " +
                           std::to_string(count) + " images but " +
                           labels_path + " has " +
                           std::to_string(label_header[1]) + " labels");
  }
  KOLO_ASSIGN_OR_RETURN(
      std::vector<uint8_t> label_bytes,
      ReadPayload(labels_file, labels_path, 8, count, "label data"));

  Dataset dataset;
  dataset.images =
      ::torch::from_blob(pixels.data(), {count, 1, rows, cols}, ::torch::kUInt8)
          .to(::torch::kFloat)
          .div_(255.0f)
          .sub_(mean)
          .div_(stddev);
  dataset.labels =
      ::torch::from_blob(label_bytes.data(), {count}, ::torch::kUInt8)
          .to(::torch::kLong);
  const auto largest = std::max_element(label_bytes.begin(), label_bytes.end());
  dataset.num_classes = largest == label_bytes.end() ? 0 : *largest + 1;
  return dataset;
}

StatusOr<Dataset> ReadFashionMnist(const std::string& dir, bool train) {
  return ReadMnistLike(dir, train, kFashionMnistMean, kFashionMnistStd);
}

StatusOr<Dataset> ReadMnist(const std::string& dir, bool train) {
  return ReadMnistLike(dir, train, kMnistMean, kMnistStd);
}

StatusOr<Dataset> ReadCifar10(const std::string& dir, bool train) {
  std::vector<std::string> paths;
  if (train) {
    for (int i = 1; i <= 5; ++i) {
      paths.push_back(dir + "/data_batch_" + std::to_string(i) + ".bin");
    }
  } else {
    paths.push_back(dir + "/test_batch.bin");
  }
  // Check every file before reading any, so a missing or damaged fifth file
  // fails in milliseconds rather than after reading the first four.
  std::vector<int64_t> sizes;
  for (const std::string& path : paths) {
    struct stat info;
    if (::stat(path.c_str(), &info) != 0) return OpenError(path, errno);
    if (info.st_size % kCifarRecordBytes != 0) {
      return InvalidArgument(
          path + ": size " + std::to_string(info.st_size) +
          " bytes is not a multiple of the 3073-byte CIFAR-10 record (1 "
          "label byte + 3072 pixel bytes)");
    }
    sizes.push_back(info.st_size);
  }
  int64_t total_bytes = 0;
  for (int64_t size : sizes) total_bytes += size;
  std::vector<uint8_t> records(static_cast<size_t>(total_bytes));
  int64_t offset = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    const std::string& path = paths[f];
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) return OpenError(path, errno);
    const size_t want = static_cast<size_t>(sizes[f]);
    const size_t got = std::fread(records.data() + offset, 1, want, file);
    std::fclose(file);
    if (got != want) {
      return InvalidArgument(path + ": truncated while reading: expected " +
                             std::to_string(want) + " bytes, got " +
                             std::to_string(got));
    }
    for (int64_t r = 0; r < sizes[f] / kCifarRecordBytes; ++r) {
      const uint8_t label = records[offset + r * kCifarRecordBytes];
      if (label > 9) {
        return InvalidArgument(path + ": record " + std::to_string(r) +
                               " has label " + std::to_string(label) +
                               "; CIFAR-10 labels are 0-9");
      }
    }
    offset += sizes[f];
  }
  const int64_t count = total_bytes / kCifarRecordBytes;
  const ::torch::Tensor raw = ::torch::from_blob(
      records.data(), {count, kCifarRecordBytes}, ::torch::kUInt8);
  const ::torch::Tensor mean =
      ::torch::tensor(
          std::vector<float>(kCifar10Mean.begin(), kCifar10Mean.end()))
          .view({1, 3, 1, 1});
  const ::torch::Tensor stddev =
      ::torch::tensor(
          std::vector<float>(kCifar10Std.begin(), kCifar10Std.end()))
          .view({1, 3, 1, 1});
  Dataset dataset;
  dataset.images = raw.narrow(1, 1, kCifarImageBytes)
                       .reshape({count, 3, 32, 32})
                       .to(::torch::kFloat)
                       .div_(255.0f)
                       .sub_(mean)
                       .div_(stddev);
  dataset.labels = raw.select(1, 0).to(::torch::kLong);
  dataset.num_classes = 10;
  return dataset;
}

Dataset Synthetic(int64_t n, std::vector<int64_t> shape, int64_t num_classes,
                  uint64_t seed) {
  KOLO_CHECK(n >= 0) << "Synthetic: n = " << n;
  KOLO_CHECK(shape.size() == 3 && shape[0] > 0 && shape[1] > 0 && shape[2] > 0)
      << "Synthetic: shape must be (C, H, W), all positive";
  KOLO_CHECK(num_classes >= 1) << "Synthetic: num_classes = " << num_classes;
  const int64_t pixels = shape[0] * shape[1] * shape[2];
  DataRandom random(seed);
  std::vector<float> prototypes(static_cast<size_t>(num_classes * pixels));
  for (float& p : prototypes) p = static_cast<float>(2.0 * random.Unit() - 1);
  Dataset dataset;
  dataset.num_classes = num_classes;
  dataset.labels = ::torch::empty({n}, ::torch::kLong);
  dataset.images =
      ::torch::empty({n, shape[0], shape[1], shape[2]}, ::torch::kFloat);
  int64_t* labels = dataset.labels.data_ptr<int64_t>();
  float* images = dataset.images.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    labels[i] =
        static_cast<int64_t>(random.Below(static_cast<uint64_t>(num_classes)));
    const float* prototype = prototypes.data() + labels[i] * pixels;
    float* image = images + i * pixels;
    for (int64_t j = 0; j < pixels; ++j) {
      image[j] = prototype[j] + 0.5f * static_cast<float>(random.Normal());
    }
  }
  return dataset;
}

}  // namespace kolo::data
