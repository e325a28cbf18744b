// Tests of the dataset readers (src/torch/data/datasets.cc). Fixture files
// are written with known pixels, so every value read back has a closed
// form: pixel p becomes (p / 255 - mean) / std.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kolo/data.h"
#include "testing/requirements.h"
#include "torch/data/data_testing.h"

namespace kolo::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Iota;
using testing::Sorted;

// A directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/kolo-data-test-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes,
               bool gzip) {
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr) << path;
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(file), Z_OK);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
  }
}

void PutBigEndian(std::vector<uint8_t>& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    bytes.push_back(static_cast<uint8_t>(value >> shift));
  }
}

// Pixel y, x of image i: distinct small values, 0 first and 255 last.
uint8_t IdxPixel(int64_t i, int64_t y, int64_t x, int64_t n, int64_t rows,
                 int64_t cols) {
  if (i == n - 1 && y == rows - 1 && x == cols - 1) return 255;
  return static_cast<uint8_t>((i * 97 + y * 31 + x * 7) % 256);
}

int64_t IdxLabel(int64_t i) { return (3 * i + 1) % 10; }

// An IDX images file of n rows×cols images; `drop` bytes cut from the end.
std::vector<uint8_t> IdxImages(int64_t n, int64_t rows, int64_t cols,
                               size_t drop = 0) {
  std::vector<uint8_t> bytes;
  PutBigEndian(bytes, 0x00000803);
  PutBigEndian(bytes, static_cast<uint32_t>(n));
  PutBigEndian(bytes, static_cast<uint32_t>(rows));
  PutBigEndian(bytes, static_cast<uint32_t>(cols));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t y = 0; y < rows; ++y) {
      for (int64_t x = 0; x < cols; ++x) {
        bytes.push_back(IdxPixel(i, y, x, n, rows, cols));
      }
    }
  }
  bytes.resize(bytes.size() - drop);
  return bytes;
}

std::vector<uint8_t> IdxLabels(int64_t n) {
  std::vector<uint8_t> bytes;
  PutBigEndian(bytes, 0x00000801);
  PutBigEndian(bytes, static_cast<uint32_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    bytes.push_back(static_cast<uint8_t>(IdxLabel(i)));
  }
  return bytes;
}

// Every value of an IDX dataset written by IdxImages / IdxLabels.
void ExpectIdxDataset(const Dataset& d, int64_t n, int64_t rows, int64_t cols,
                      float mean, float stddev) {
  ASSERT_EQ(d.images.sizes(), (std::vector<int64_t>{n, 1, rows, cols}));
  ASSERT_EQ(d.images.scalar_type(), ::torch::kFloat);
  ASSERT_EQ(d.labels.sizes(), (std::vector<int64_t>{n}));
  ASSERT_EQ(d.labels.scalar_type(), ::torch::kLong);
  auto images = d.images.accessor<float, 4>();
  auto labels = d.labels.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(labels[i], IdxLabel(i)) << "label " << i;
    for (int64_t y = 0; y < rows; ++y) {
      for (int64_t x = 0; x < cols; ++x) {
        const int pixel = IdxPixel(i, y, x, n, rows, cols);
        const float value = images[i][0][y][x];
        EXPECT_NEAR(value, (pixel / 255.0f - mean) / stddev, 1e-5f)
            << "image " << i << " at " << y << "," << x;
        // Undoing the normalisation recovers the byte exactly.
        EXPECT_EQ(std::lround((value * stddev + mean) * 255.0f), pixel);
      }
    }
  }
}

TEST(ReadIdxTest, RawFilesScaleToUnitInterval) {
  TempDir dir;
  WriteFile(dir.File("images"), IdxImages(3, 2, 4), false);
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  auto d = ReadIdx(dir.File("images"), dir.File("labels"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ExpectIdxDataset(*d, 3, 2, 4, 0.0f, 1.0f);
  EXPECT_FLOAT_EQ(d->images[0][0][0][0].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(d->images[2][0][1][3].item<float>(), 1.0f);
  EXPECT_EQ(d->num_classes, IdxLabel(2) + 1);  // labels 1, 4, 7
}

TEST(ReadIdxTest, GzipAndRawFilesNormalise) {
  TempDir dir;
  WriteFile(dir.File("images.gz"), IdxImages(5, 3, 2), true);
  WriteFile(dir.File("labels.gz"), IdxLabels(5), true);
  WriteFile(dir.File("labels"), IdxLabels(5), false);
  auto gz = ReadIdx(dir.File("images.gz"), dir.File("labels.gz"),
                    kFashionMnistMean, kFashionMnistStd);
  ASSERT_TRUE(gz.ok()) << gz.status().ToString();
  ExpectIdxDataset(*gz, 5, 3, 2, kFashionMnistMean, kFashionMnistStd);
  auto mixed = ReadIdx(dir.File("images.gz"), dir.File("labels"), 0.5f, 0.25f);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ExpectIdxDataset(*mixed, 5, 3, 2, 0.5f, 0.25f);
}

TEST(ReadIdxTest, MissingFileIsNotFound) {
  TempDir dir;
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  auto d = ReadIdx(dir.File("absent-images"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), AllOf(HasSubstr(dir.File("absent-images")),
                                          HasSubstr("No such file")));

  WriteFile(dir.File("images"), IdxImages(3, 2, 2), false);
  d = ReadIdx(dir.File("images"), dir.File("absent-labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr(dir.File("absent-labels")));
}

TEST(ReadIdxTest, BadMagicSaysExpectedAndFound) {
  TempDir dir;
  WriteFile(dir.File("images.gz"), IdxImages(3, 2, 2), true);
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  // The files swapped: each has the other's magic.
  auto d = ReadIdx(dir.File("labels"), dir.File("images.gz"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      d.status().message(),
      AllOf(HasSubstr(dir.File("labels")), HasSubstr("bad magic"),
            HasSubstr("expected 0x00000803"), HasSubstr("found 0x00000801")));

  WriteFile(dir.File("images"), IdxImages(3, 2, 2), false);
  d = ReadIdx(dir.File("images"), dir.File("images.gz"));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(
      d.status().message(),
      AllOf(HasSubstr(dir.File("images.gz")), HasSubstr("bad magic"),
            HasSubstr("expected 0x00000801"), HasSubstr("found 0x00000803")));
}

// Found by fuzz/dataset_header_fuzzer.cc (the input is
// fuzz/regressions/dataset_header_fuzzer/idx_rows_times_cols_overflow): an
// images header of 0xFFFFFFFF images of 0xFFFFFFFF x 0xFFFFFFFF pixels.
// rows x cols overflows int64_t in ReadIdx (datasets.cc:210, UBSan: signed
// integer overflow) in the very check meant to refuse implausible sizes.
// It must be refused with the file's name and the dimensions.
TEST(ReadIdxTest, DimensionsWhoseProductOverflowAreRefused) {
  TempDir dir;
  std::vector<uint8_t> images;
  for (uint32_t word : {0x803u, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu})
    PutBigEndian(images, word);
  WriteFile(dir.File("images"), images, false);
  WriteFile(dir.File("labels"), IdxLabels(0), false);
  auto d = ReadIdx(dir.File("images"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("images")), HasSubstr("4294967295")));
}

TEST(ReadIdxTest, TruncatedImagesSayExpectedAndGotBytes) {
  TempDir dir;
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  for (bool gzip : {false, true}) {
    const std::string path = dir.File(gzip ? "short.gz" : "short");
    // 3 images of 2×4 = 24 bytes of pixels; 4 are missing.
    WriteFile(path, IdxImages(3, 2, 4, /*drop=*/4), gzip);
    auto d = ReadIdx(path, dir.File("labels"));
    ASSERT_FALSE(d.ok()) << path;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(),
                AllOf(HasSubstr(path), HasSubstr("truncated pixel data"),
                      HasSubstr("expected 24 bytes"), HasSubstr("got 20")));
  }
}

TEST(ReadIdxTest, TruncatedHeaderAndTrailingBytes) {
  TempDir dir;
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  std::vector<uint8_t> header = IdxImages(3, 2, 4);
  header.resize(6);
  WriteFile(dir.File("header"), header, false);
  auto d = ReadIdx(dir.File("header"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("header")),
                    HasSubstr("truncated header: expected 16 bytes, got 6")));

  std::vector<uint8_t> long_file = IdxImages(3, 2, 4);
  long_file.push_back(0);
  WriteFile(dir.File("long"), long_file, false);
  d = ReadIdx(dir.File("long"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("long")),
                    HasSubstr("longer than its header says")));
}

// An IDX images header (count, rows, cols) followed by `payload` bytes.
std::vector<uint8_t> IdxImagesHeader(uint32_t count, uint32_t rows,
                                     uint32_t cols, size_t payload) {
  std::vector<uint8_t> bytes;
  for (uint32_t word : {0x00000803u, count, rows, cols})
    PutBigEndian(bytes, word);
  bytes.resize(bytes.size() + payload, 7);
  return bytes;
}

// rows·cols of two 32-bit fields overflows int64 and came out negative:
// the sides are bounded first, naming the field.
TEST(ReadIdxTest, ImageSidesAreBoundedNamingTheField) {
  TempDir dir;
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  const struct {
    uint32_t rows, cols;
    const char* expected;
  } cases[] = {
      {0xffffffffu, 0xffffffffu,
       "header field rows is 4294967295; it must be 1 to 32768"},
      {28, 40000, "header field cols is 40000; it must be 1 to 32768"},
      {0, 28, "header field rows is 0; it must be 1 to 32768"},
  };
  for (const auto& c : cases) {
    WriteFile(dir.File("images"), IdxImagesHeader(3, c.rows, c.cols, 0), false);
    auto d = ReadIdx(dir.File("images"), dir.File("labels"));
    ASSERT_FALSE(d.ok()) << c.expected;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(),
                AllOf(HasSubstr(dir.File("images")), HasSubstr(c.expected)));
  }
}

// A header that claims more than the file holds is refused before any
// payload is read or allocated: raw files by their size, gzip files by
// deflate's best ratio (1032:1).
TEST(ReadIdxTest, FileSizeIsCheckedAgainstTheHeaderBeforeReading) {
  TempDir dir;
  WriteFile(dir.File("labels"), IdxLabels(3), false);
  WriteFile(dir.File("images"), IdxImagesHeader(0xffffffffu, 28, 28, 10),
            false);
  auto d = ReadIdx(dir.File("images"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("images")),
                    HasSubstr("truncated pixel data: expected 3367254359280 "
                              "bytes after the 16-byte header (count "
                              "4294967295 x rows 28 x cols 28), got 10")));

  WriteFile(dir.File("images.gz"), IdxImagesHeader(0xffffffffu, 28, 28, 10),
            true);
  d = ReadIdx(dir.File("images.gz"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(
      d.status().message(),
      AllOf(HasSubstr(dir.File("images.gz")),
            HasSubstr("header count 4294967295 x rows 28 x cols 28 announces "
                      "3367254359280 bytes of pixel data; a gzip file of"),
            HasSubstr("bytes cannot hold more than")));

  // The labels file too: 3 labels announced, 2 present.
  WriteFile(dir.File("images"), IdxImages(3, 2, 2), false);
  std::vector<uint8_t> labels = IdxLabels(3);
  labels.pop_back();
  WriteFile(dir.File("labels"), labels, false);
  d = ReadIdx(dir.File("images"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("labels")),
                    HasSubstr("truncated label data: expected 3 bytes after "
                              "the 8-byte header (count 3), got 2")));
}

TEST(ReadIdxTest, LabelCountMismatchNamesBothFiles) {
  TempDir dir;
  WriteFile(dir.File("images"), IdxImages(3, 2, 2), false);
  WriteFile(dir.File("labels"), IdxLabels(4), false);
  auto d = ReadIdx(dir.File("images"), dir.File("labels"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr("count mismatch"), HasSubstr(dir.File("images")),
                    HasSubstr("3 images"), HasSubstr(dir.File("labels")),
                    HasSubstr("4 labels")));
}

TEST(ReadIdxTest, StandardNamesRawOrGzip) {
  TempDir dir;
  WriteFile(dir.File("train-images-idx3-ubyte"), IdxImages(4, 3, 3), false);
  WriteFile(dir.File("train-labels-idx1-ubyte.gz"), IdxLabels(4), true);
  WriteFile(dir.File("t10k-images-idx3-ubyte.gz"), IdxImages(2, 3, 3), true);
  WriteFile(dir.File("t10k-labels-idx1-ubyte"), IdxLabels(2), false);
  auto train = ReadFashionMnist(dir.path(), true);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  ExpectIdxDataset(*train, 4, 3, 3, kFashionMnistMean, kFashionMnistStd);
  EXPECT_EQ(train->num_classes, 10);
  auto test = ReadMnist(dir.path(), false);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  ExpectIdxDataset(*test, 2, 3, 3, kMnistMean, kMnistStd);

  auto missing = ReadFashionMnist(dir.File("nowhere"), true);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr(dir.File("nowhere/train-images-idx3-ubyte")));
}

// The real Fashion-MNIST: 60,000 + 10,000 28×28 images, 10 balanced
// classes; the first training image is an ankle boot (9). Normalising with
// the training set's own mean and std gives it mean 0 and std 1.
TEST(FashionMnistTest, ReadsRealDataset) {
  KOLO_REQUIRE_OR_SKIP(
      std::filesystem::exists(std::string(kFashionMnistDir) +
                              "/train-images-idx3-ubyte.gz"),
      "Fashion-MNIST at " << kFashionMnistDir << " (dataset-fashion-mnist)");
  for (bool train : {true, false}) {
    const auto start = std::chrono::steady_clock::now();
    auto d = ReadFashionMnist(kFashionMnistDir, train);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    std::cout << "Fashion-MNIST " << (train ? "train" : "test") << ": read "
              << d->size() << " images in " << seconds << " s\n";
    const int64_t n = train ? 60000 : 10000;
    EXPECT_EQ(d->images.sizes(), (std::vector<int64_t>{n, 1, 28, 28}));
    EXPECT_EQ(d->labels.sizes(), (std::vector<int64_t>{n}));
    EXPECT_EQ(d->num_classes, 10);
    const ::torch::Tensor counts = ::torch::bincount(d->labels);
    ASSERT_EQ(counts.size(0), 10);
    EXPECT_TRUE(
        ::torch::equal(counts, ::torch::full({10}, n / 10, ::torch::kLong)))
        << counts;
    const double pixel_min = (0.0 - kFashionMnistMean) / kFashionMnistStd;
    const double pixel_max = (1.0 - kFashionMnistMean) / kFashionMnistStd;
    EXPECT_NEAR(d->images.min().item<double>(), pixel_min, 1e-5);
    EXPECT_NEAR(d->images.max().item<double>(), pixel_max, 1e-5);
    if (train) {
      EXPECT_EQ(d->labels[0].item<int64_t>(), 9);
      EXPECT_NEAR(d->images.mean().item<double>(), 0.0, 2e-3);
      EXPECT_NEAR(d->images.std().item<double>(), 1.0, 2e-3);
    }
  }
}

// CIFAR-10 record r (counted across files), channel c, pixel y, x.
uint8_t CifarPixel(int64_t r, int64_t c, int64_t y, int64_t x) {
  return static_cast<uint8_t>((r * 13 + c * 71 + y * 3 + x * 5) % 256);
}
int64_t CifarLabel(int64_t r) { return (7 * r) % 10; }

std::vector<uint8_t> CifarRecords(int64_t first, int64_t count) {
  std::vector<uint8_t> bytes;
  for (int64_t r = first; r < first + count; ++r) {
    bytes.push_back(static_cast<uint8_t>(CifarLabel(r)));
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t y = 0; y < 32; ++y) {
        for (int64_t x = 0; x < 32; ++x)
          bytes.push_back(CifarPixel(r, c, y, x));
      }
    }
  }
  return bytes;
}

// Training files of 1, 2, 3, 1 and 2 records (9 in all), a test file of 4.
void WriteCifar(const TempDir& dir) {
  const int64_t counts[] = {1, 2, 3, 1, 2};
  int64_t first = 0;
  for (int i = 0; i < 5; ++i) {
    WriteFile(dir.File("data_batch_" + std::to_string(i + 1) + ".bin"),
              CifarRecords(first, counts[i]), false);
    first += counts[i];
  }
  WriteFile(dir.File("test_batch.bin"), CifarRecords(100, 4), false);
}

void ExpectCifar(const Dataset& d, int64_t first, int64_t n) {
  ASSERT_EQ(d.images.sizes(), (std::vector<int64_t>{n, 3, 32, 32}));
  ASSERT_EQ(d.labels.sizes(), (std::vector<int64_t>{n}));
  EXPECT_EQ(d.num_classes, 10);
  auto images = d.images.accessor<float, 4>();
  auto labels = d.labels.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(labels[i], CifarLabel(first + i));
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t y = 0; y < 32; ++y) {
        for (int64_t x = 0; x < 32; ++x) {
          const float expected =
              (CifarPixel(first + i, c, y, x) / 255.0f - kCifar10Mean[c]) /
              kCifar10Std[c];
          ASSERT_NEAR(images[i][c][y][x], expected, 1e-5f)
              << "record " << i << " channel " << c << " at " << y << "," << x;
        }
      }
    }
  }
}

TEST(Cifar10Test, ReadsTrainFilesInOrderAndTestFile) {
  TempDir dir;
  WriteCifar(dir);
  auto train = ReadCifar10(dir.path(), true);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  ExpectCifar(*train, 0, 9);
  auto test = ReadCifar10(dir.path(), false);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  ExpectCifar(*test, 100, 4);
}

TEST(Cifar10Test, MissingFileIsNotFound) {
  TempDir dir;
  WriteCifar(dir);
  std::filesystem::remove(dir.File("data_batch_3.bin"));
  auto d = ReadCifar10(dir.path(), true);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("data_batch_3.bin")),
                    HasSubstr("No such file")));
}

TEST(Cifar10Test, SizeNotMultipleOfRecordAndBadLabel) {
  TempDir dir;
  WriteCifar(dir);
  std::vector<uint8_t> bytes = CifarRecords(0, 2);
  bytes.resize(bytes.size() + 5);  // 2 · 3073 + 5 = 6151
  WriteFile(dir.File("test_batch.bin"), bytes, false);
  auto d = ReadCifar10(dir.path(), false);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("test_batch.bin")), HasSubstr("6151"),
                    HasSubstr("not a multiple of the 3073-byte")));

  bytes = CifarRecords(0, 2);
  bytes[3073] = 10;  // the second record's label
  WriteFile(dir.File("test_batch.bin"), bytes, false);
  d = ReadCifar10(dir.path(), false);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), AllOf(HasSubstr(dir.File("test_batch.bin")),
                                          HasSubstr("record 1 has label 10")));
}

TEST(Cifar10Test, EmptyOrDirectoryBatchFilesAreRefused) {
  TempDir dir;
  WriteCifar(dir);
  WriteFile(dir.File("test_batch.bin"), {}, false);
  auto d = ReadCifar10(dir.path(), false);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr(dir.File("test_batch.bin")),
                    HasSubstr("empty; a CIFAR-10 batch file holds at least "
                              "one 3073-byte record")));
  std::filesystem::remove(dir.File("test_batch.bin"));
  std::filesystem::create_directory(dir.File("test_batch.bin"));
  d = ReadCifar10(dir.path(), false);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), AllOf(HasSubstr(dir.File("test_batch.bin")),
                                          HasSubstr("not a regular file")));
}

TEST(SyntheticTest, DeterministicForSeedWithDocumentedNoise) {
  const Dataset a = Synthetic(200, {3, 16, 16}, 4, 42);
  const Dataset b = Synthetic(200, {3, 16, 16}, 4, 42);
  const Dataset c = Synthetic(200, {3, 16, 16}, 4, 43);
  EXPECT_EQ(a.images.sizes(), (std::vector<int64_t>{200, 3, 16, 16}));
  EXPECT_EQ(a.num_classes, 4);
  EXPECT_TRUE(::torch::equal(a.images, b.images));
  EXPECT_TRUE(::torch::equal(a.labels, b.labels));
  EXPECT_FALSE(::torch::equal(a.images, c.images));
  EXPECT_GE(a.labels.min().item<int64_t>(), 0);
  EXPECT_LE(a.labels.max().item<int64_t>(), 3);
  // Two images of one class differ only by noise: 0.5·(n1 - n2) has std
  // 0.5·√2 over 768 pixels.
  for (int64_t k = 0; k < 4; ++k) {
    const ::torch::Tensor rows = (a.labels == k).nonzero().flatten();
    ASSERT_GE(rows.size(0), 2) << "class " << k;
    const ::torch::Tensor diff =
        a.images[rows[0].item<int64_t>()] - a.images[rows[1].item<int64_t>()];
    EXPECT_NEAR(diff.std().item<double>(), 0.5 * std::sqrt(2.0), 0.06);
  }
}

}  // namespace
}  // namespace kolo::data
