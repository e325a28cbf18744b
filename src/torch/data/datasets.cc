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
// An IDX image is at most 2^15 pixels on a side, so rows·cols ≤ 2^30 and,
// with a count below 2^32, count·rows·cols < 2^62 cannot overflow int64.
constexpr uint32_t kMaxIdxSide = 1u << 15;
// deflate cannot compress better than 1032:1, so a gzip file of n bytes
// holds at most 1032·n: a header claiming more is corrupt.
constexpr int64_t kMaxDeflateRatio = 1032;

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
    if (::fstat(fd, &info) != 0) {
      const int error = errno;
      ::close(fd);
      return InvalidArgument(path + ": cannot stat: " + std::strerror(error));
    }
    if (S_ISDIR(info.st_mode)) {
      ::close(fd);
      return InvalidArgument(path + ": is a directory, not an IDX file");
    }
    file_bytes_ = static_cast<int64_t>(info.st_size);
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

  // The file's size on disk, compressed or not.
  int64_t file_bytes() const { return file_bytes_; }
  // Whether zlib is decompressing; known once something has been read.
  bool compressed() const { return gzdirect(file_) == 0; }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  int64_t file_bytes_ = 0;
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

// Checks, before a byte of it is read, that the file can hold the `n`
// payload bytes its header announces (`fields` says which header fields
// make n): exactly, for a raw file; within deflate's best ratio, for gzip.
Status CheckPayloadSize(const GzReader& reader, const std::string& path,
                        int64_t header_bytes, int64_t n, const char* what,
                        const std::string& fields) {
  const int64_t on_disk = reader.file_bytes();
  if (reader.compressed()) {
    if (n / kMaxDeflateRatio > on_disk) {
      return InvalidArgument(path + ": header " + fields + " announces " +
                             std::to_string(n) + " bytes of " + what +
                             "; a gzip file of " + std::to_string(on_disk) +
                             " bytes cannot hold more than " +
                             std::to_string(on_disk * kMaxDeflateRatio));
    }
    return Status::Ok();
  }
  const int64_t payload = on_disk - header_bytes;
  if (payload < n) {
    return InvalidArgument(path + ": truncated " + what + ": expected " +
                           std::to_string(n) + " bytes after the " +
                           std::to_string(header_bytes) + "-byte header (" +
                           fields + "), got " + std::to_string(payload));
  }
  if (payload > n) {
    return InvalidArgument(
        path + ": longer than its header says: " + std::to_string(payload) +
        " bytes of " + what + " after the " + std::to_string(header_bytes) +
        "-byte header, not " + std::to_string(n) + " (" + fields + ")");
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
  // allocation; a corrupt count then ends as "truncated". An allocation
  // that fails all the same is an error, not an exception.
  std::vector<uint8_t> data;
  constexpr int64_t kChunk = int64_t{1} << 22;
  try {
    data.reserve(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 28)));
    while (static_cast<int64_t>(data.size()) < n) {
      const int64_t offset = static_cast<int64_t>(data.size());
      const int64_t want = std::min(kChunk, n - offset);
      data.resize(static_cast<size_t>(offset + want));
      KOLO_ASSIGN_OR_RETURN(int64_t got,
                            reader.Read(data.data() + offset, want));
      if (got < want) {
        return InvalidArgument(
            path + ": truncated " + what + ": expected " + std::to_string(n) +
            " bytes after the " + std::to_string(header_bytes) +
            "-byte header, got " + std::to_string(offset + got));
      }
    }
  } catch (const std::exception& e) {
    return InvalidArgument(path + ": cannot hold " + std::to_string(n) +
                           " bytes of " + what + ": " + e.what());
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

// The rows and cols fields of an IDX images header (magic, count, rows,
// cols) are between 1 and kMaxIdxSide.
Status CheckImageSides(const std::string& path, const uint32_t* header) {
  const char* names[] = {"rows", "cols"};
  for (int i = 0; i < 2; ++i) {
    const uint32_t side = header[2 + i];
    if (side < 1 || side > kMaxIdxSide) {
      return InvalidArgument(path + ": header field " + names[i] + " is " +
                             std::to_string(side) + "; it must be 1 to " +
                             std::to_string(kMaxIdxSide));
    }
  }
  return Status::Ok();
}

// Converting the bytes to float tensors allocates; LibTorch throws when it
// cannot, and the readers return a Status.
Status ConversionError(const std::string& path, const std::exception& e) {
  const std::string message = e.what();
  return InvalidArgument(path + ": cannot convert to tensors: " +
                         message.substr(0, message.find('\n')));
}

// The size of the CIFAR-10 batch file at `path`, checked before it is
// read: a regular file of one or more whole records.
StatusOr<int64_t> CifarBatchBytes(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return OpenError(path, errno);
  if (!S_ISREG(info.st_mode))
    return InvalidArgument(path + ": not a regular file");
  const int64_t size = static_cast<int64_t>(info.st_size);
  if (size == 0) {
    return InvalidArgument(path +
                           ": empty; a CIFAR-10 batch file holds at "
                           "least one 3073-byte record");
  }
  if (size % kCifarRecordBytes != 0) {
    return InvalidArgument(
        path + ": size " + std::to_string(size) +
        " bytes is not a multiple of the 3073-byte CIFAR-10 record (1 label "
        "byte + 3072 pixel bytes)");
  }
  return size;
}

// Reads the `size` bytes of the CIFAR-10 batch file `path` into `into` and
// checks every record's label.
Status ReadCifarBatch(const std::string& path, int64_t size, uint8_t* into) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return OpenError(path, errno);
  const size_t want = static_cast<size_t>(size);
  const size_t got = std::fread(into, 1, want, file);
  // One more byte would mean the file grew since it was measured.
  const bool longer = got == want && std::fgetc(file) != EOF;
  std::fclose(file);
  if (got != want || longer) {
    return InvalidArgument(path + ": changed while reading: expected " +
                           std::to_string(want) + " bytes, got " +
                           (longer ? "more" : std::to_string(got)));
  }
  for (int64_t r = 0; r < size / kCifarRecordBytes; ++r) {
    const uint8_t label = into[r * kCifarRecordBytes];
    if (label > 9) {
      return InvalidArgument(path + ": record " + std::to_string(r) +
                             " has label " + std::to_string(label) +
                             "; CIFAR-10 labels are 0-9");
    }
  }
  return Status::Ok();
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
  KOLO_RETURN_IF_ERROR(CheckImageSides(images_path, image_header));
  const int64_t count = image_header[1];
  const int64_t rows = image_header[2];
  const int64_t cols = image_header[3];
  const std::string image_fields = "count " + std::to_string(count) +
                                   " x rows " + std::to_string(rows) +
                                   " x cols " + std::to_string(cols);
  KOLO_RETURN_IF_ERROR(CheckPayloadSize(images_file, images_path, 16,
                                        count * rows * cols, "pixel data",
                                        image_fields));
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
  KOLO_RETURN_IF_ERROR(CheckPayloadSize(labels_file, labels_path, 8, count,
                                        "label data",
                                        "count " + std::to_string(count)));
  KOLO_ASSIGN_OR_RETURN(
      std::vector<uint8_t> label_bytes,
      ReadPayload(labels_file, labels_path, 8, count, "label data"));

  Dataset dataset;
  try {
    dataset.images = ::torch::from_blob(pixels.data(), {count, 1, rows, cols},
                                        ::torch::kUInt8)
                         .to(::torch::kFloat)
                         .div_(255.0f)
                         .sub_(mean)
                         .div_(stddev);
    dataset.labels =
        ::torch::from_blob(label_bytes.data(), {count}, ::torch::kUInt8)
            .to(::torch::kLong);
  } catch (const std::exception& e) {
    return ConversionError(images_path, e);
  }
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
  int64_t total_bytes = 0;
  for (const std::string& path : paths) {
    KOLO_ASSIGN_OR_RETURN(const int64_t size, CifarBatchBytes(path));
    sizes.push_back(size);
    total_bytes += size;
  }
  std::vector<uint8_t> records;
  try {
    records.resize(static_cast<size_t>(total_bytes));
  } catch (const std::exception& e) {
    return InvalidArgument(
        paths.front() + " and the other batch files: " + "cannot hold their " +
        std::to_string(total_bytes) + " bytes: " + e.what());
  }
  int64_t offset = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    KOLO_RETURN_IF_ERROR(
        ReadCifarBatch(paths[f], sizes[f], records.data() + offset));
    offset += sizes[f];
  }
  const int64_t count = total_bytes / kCifarRecordBytes;
  Dataset dataset;
  try {
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
    dataset.images = raw.narrow(1, 1, kCifarImageBytes)
                         .reshape({count, 3, 32, 32})
                         .to(::torch::kFloat)
                         .div_(255.0f)
                         .sub_(mean)
                         .div_(stddev);
    dataset.labels = raw.select(1, 0).to(::torch::kLong);
  } catch (const std::exception& e) {
    return ConversionError(paths.front(), e);
  }
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
