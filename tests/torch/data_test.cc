// Tests of kolo::data. Fixture files are written with known pixels, so every
// value read back has a closed form: pixel p becomes (p / 255 - mean) / std.
#include "kolo/data.h"

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

namespace kolo::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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
  if (!std::filesystem::exists(std::string(kFashionMnistDir) +
                               "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "no Fashion-MNIST at " << kFashionMnistDir;
  }
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

// The sequence the ranks' shards interleave into: position r + j·W is
// rank r's j-th index.
std::vector<int64_t> Interleave(int64_t n, DistributedSampler::Options options,
                                int64_t epoch) {
  std::vector<std::vector<int64_t>> shards;
  for (int32_t r = 0; r < options.world_size; ++r) {
    options.rank = r;
    auto sampler = DistributedSampler::Create(n, options);
    EXPECT_TRUE(sampler.ok()) << sampler.status().ToString();
    shards.push_back(sampler->Indices(epoch));
    EXPECT_EQ(static_cast<int64_t>(shards.back().size()),
              sampler->num_samples());
    EXPECT_EQ(shards.back().size(), shards.front().size()) << "rank " << r;
  }
  std::vector<int64_t> sequence;
  for (size_t j = 0; j < shards.front().size(); ++j) {
    for (const auto& shard : shards) sequence.push_back(shard[j]);
  }
  return sequence;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(DistributedSamplerTest, PadModeCoversAllAndRepeatsFromStart) {
  // N = 10, W = 3: ceil(10 / 3) = 4 each; 12 positions, 2 repeated.
  const auto sequence = Interleave(10, {0, 3, true, 7, false}, 2);
  ASSERT_EQ(sequence.size(), 12u);
  const std::vector<int64_t> permutation(sequence.begin(),
                                         sequence.begin() + 10);
  EXPECT_EQ(Sorted(permutation), Iota(10));  // disjoint and covering
  EXPECT_EQ(sequence[10], sequence[0]);
  EXPECT_EQ(sequence[11], sequence[1]);
}

TEST(DistributedSamplerTest, PadModeWithFewerRowsThanRanks) {
  const auto sequence = Interleave(2, {0, 5, true, 1, false}, 0);
  ASSERT_EQ(sequence.size(), 5u);
  EXPECT_EQ(Sorted({sequence[0], sequence[1]}), Iota(2));
  EXPECT_EQ(sequence[2], sequence[0]);
  EXPECT_EQ(sequence[3], sequence[1]);
  EXPECT_EQ(sequence[4], sequence[0]);
}

TEST(DistributedSamplerTest, DropModeDropsTheRemainder) {
  // N = 10, W = 3: 3 each; 9 distinct rows, one dropped.
  const auto sequence = Interleave(10, {0, 3, true, 7, true}, 2);
  ASSERT_EQ(sequence.size(), 9u);
  const std::set<int64_t> distinct(sequence.begin(), sequence.end());
  EXPECT_EQ(distinct.size(), 9u);
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LE(*distinct.rbegin(), 9);
  // The dropped row is the permutation's last, so it changes per epoch.
  std::set<int64_t> dropped;
  for (int64_t epoch = 0; epoch < 10; ++epoch) {
    const auto s = Interleave(10, {0, 3, true, 7, true}, epoch);
    for (int64_t i = 0; i < 10; ++i) {
      if (std::find(s.begin(), s.end(), i) == s.end()) dropped.insert(i);
    }
  }
  EXPECT_GT(dropped.size(), 1u);
}

TEST(DistributedSamplerTest, ReshufflesPerEpochIdenticallyOnAllRanks) {
  const DistributedSampler::Options options{0, 4, true, 11, false};
  const auto epoch0 = Interleave(1000, options, 0);
  const auto epoch1 = Interleave(1000, options, 1);
  EXPECT_EQ(Sorted(epoch0), Iota(1000));
  EXPECT_EQ(Sorted(epoch1), Iota(1000));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, Iota(1000));
  // Independently built samplers (as on other ranks) agree.
  EXPECT_EQ(Interleave(1000, options, 1), epoch1);
  // Another seed, another order.
  EXPECT_NE(Interleave(1000, {0, 4, true, 12, false}, 1), epoch1);
}

TEST(DistributedSamplerTest, NoShuffleIsStrided) {
  auto sampler = DistributedSampler::Create(10, {1, 3, false, 0, false});
  ASSERT_TRUE(sampler.ok());
  EXPECT_EQ(sampler->Indices(0), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(sampler->Indices(5), (std::vector<int64_t>{1, 4, 7, 0}));
}

TEST(DistributedSamplerTest, RejectsBadRank) {
  auto sampler = DistributedSampler::Create(10, {3, 3});
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(sampler.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sampler.status().message(), HasSubstr("rank 3"));
  EXPECT_FALSE(DistributedSampler::Create(10, {0, 0}).ok());
}

// images[i] is filled with i and labels[i] = i, so a batch shows which rows
// it holds.
Dataset RowNumbers(int64_t n) {
  Dataset d;
  d.labels = ::torch::arange(n, ::torch::kLong);
  d.images = d.labels.to(::torch::kFloat)
                 .view({n, 1, 1, 1})
                 .expand({n, 1, 2, 2})
                 .contiguous();
  d.num_classes = n;
  return d;
}

// Every batch of a loader, asserting each is ok.
std::vector<Batch> Drain(DataLoader& loader) {
  std::vector<Batch> batches;
  while (true) {
    auto next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    batches.push_back(**next);
  }
  return batches;
}

TEST(DataLoaderTest, YieldsSampledRowsOnceInOrderWithPartialLastBatch) {
  // N = 23, W = 2: 12 rows for rank 1, in batches of 5, 5 and 2.
  auto sampler = DistributedSampler::Create(23, {1, 2, true, 3, false});
  ASSERT_TRUE(sampler.ok());
  LoaderOptions options;
  options.batch_size = 5;
  options.num_workers = 3;
  options.prefetch = 2;
  // Later batches finish first, so order comes from the loader, not timing.
  options.transform = [](Batch& batch) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(20 * (3 - batch.number)));
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(23), *sampler, 4, options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ((*loader)->num_batches(), 3);
  const std::vector<Batch> batches = Drain(**loader);
  ASSERT_EQ(batches.size(), 3u);
  std::vector<int64_t> seen;
  const int64_t sizes[] = {5, 5, 2};
  for (size_t b = 0; b < batches.size(); ++b) {
    const Batch& batch = batches[b];
    EXPECT_EQ(batch.number, static_cast<int64_t>(b));
    EXPECT_EQ(batch.images.sizes(), (std::vector<int64_t>{sizes[b], 1, 2, 2}));
    EXPECT_TRUE(::torch::equal(batch.labels, batch.indices));
    EXPECT_TRUE(::torch::equal(batch.images, batch.indices.to(::torch::kFloat)
                                                 .view({-1, 1, 1, 1})
                                                 .expand_as(batch.images)));
    for (int64_t j = 0; j < batch.indices.size(0); ++j) {
      seen.push_back(batch.indices[j].item<int64_t>());
    }
  }
  EXPECT_EQ(seen, sampler->Indices(4));
  auto after = (*loader)->Next();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
}

TEST(DataLoaderTest, DropLastSkipsPartialBatch) {
  LoaderOptions options;
  options.batch_size = 5;
  options.drop_last = true;
  auto loader = DataLoader::Create(RowNumbers(12), Iota(12), options);
  ASSERT_TRUE(loader.ok());
  const std::vector<Batch> batches = Drain(**loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_TRUE(::torch::equal(batches[1].indices,
                             ::torch::arange(5, 10, ::torch::kLong)));
}

TEST(DataLoaderTest, EmptyEpochEndsAtOnce) {
  auto loader = DataLoader::Create(RowNumbers(4), {}, {});
  ASSERT_TRUE(loader.ok());
  auto next = (*loader)->Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

// Waits (bounded) until `count` reaches `at_least`.
bool WaitFor(const std::atomic<int>& count, int at_least) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.load() < at_least) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(DataLoaderTest, PrefetchBoundsBatchesBuiltAhead) {
  std::atomic<int> built{0};
  LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 4;
  options.prefetch = 2;
  options.transform = [&built](Batch&) {
    ++built;
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(20), Iota(20), options);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE(WaitFor(built, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(built.load(), 2);  // four workers, but only two slots
  ASSERT_TRUE((*loader)->Next().ok());
  ASSERT_TRUE(WaitFor(built, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(built.load(), 3);
}

TEST(DataLoaderTest, WorkerExceptionBecomesStickyStatus) {
  LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 3;
  options.transform = [](Batch& batch) -> Status {
    if (batch.number == 2) throw std::runtime_error("boom in batch two");
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(20), Iota(20), options);
  ASSERT_TRUE(loader.ok());
  for (int64_t b = 0; b < 2; ++b) {
    auto next = (*loader)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ((*next)->number, b);
  }
  for (int i = 0; i < 2; ++i) {
    auto next = (*loader)->Next();
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), StatusCode::kInternal);
    EXPECT_THAT(next.status().message(),
                AllOf(HasSubstr("data loader batch 2 of 10"),
                      HasSubstr("boom in batch two")));
  }
}

TEST(DataLoaderTest, TransformStatusAndTorchErrorsReachNext) {
  LoaderOptions options;
  options.batch_size = 3;
  options.transform = [](Batch& batch) {
    if (batch.number == 1) return InvalidArgument("bad batch");
    return Status::Ok();
  };
  auto loader = DataLoader::Create(RowNumbers(9), Iota(9), options);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE((*loader)->Next().ok());
  auto failed = (*loader)->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "data loader batch 1 of 3: bad batch");

  options.transform = [](Batch& batch) {
    batch.images = batch.images.view({-1, 7});  // 12 elements: throws
    return Status::Ok();
  };
  loader = DataLoader::Create(RowNumbers(9), Iota(9), options);
  ASSERT_TRUE(loader.ok());
  failed = (*loader)->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("data loader batch 0 of 3: shape '[-1, 7]'"));
}

TEST(DataLoaderTest, RejectsBadIndexAndOptions) {
  auto loader = DataLoader::Create(RowNumbers(4), {0, 4}, {});
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(
      loader.status().message(),
      HasSubstr("index 4 at position 1 is outside the dataset's [0, 4)"));
  LoaderOptions options;
  options.batch_size = 0;
  EXPECT_FALSE(DataLoader::Create(RowNumbers(4), {0}, options).ok());
}

// Destroys the loader on another thread; true if that took under `limit`.
bool DestroyWithin(std::unique_ptr<DataLoader> loader,
                   std::chrono::seconds limit) {
  std::promise<void> done;
  std::future<void> destroyed = done.get_future();
  // The thread owns the promise, so a hung destructor outlives this call
  // safely; the test has failed by then.
  std::thread([done = std::move(done), l = std::move(loader)]() mutable {
    l.reset();
    done.set_value();
  }).detach();
  return destroyed.wait_for(limit) == std::future_status::ready;
}

TEST(DataLoaderTest, DestructionMidEpochReturnsPromptly) {
  LoaderOptions options;
  options.batch_size = 16;
  options.num_workers = 3;
  options.prefetch = 4;
  options.transform = [](Batch&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Status::Ok();
  };
  const Dataset dataset = Synthetic(4096, {1, 8, 8}, 10, 1);
  for (int consumed : {0, 1, 5}) {
    auto loader = DataLoader::Create(dataset, Iota(4096), options);
    ASSERT_TRUE(loader.ok());
    for (int i = 0; i < consumed; ++i) ASSERT_TRUE((*loader)->Next().ok());
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<DataLoader> owned = std::move(*loader);
    ASSERT_TRUE(DestroyWithin(std::move(owned), std::chrono::seconds(10)))
        << "destroying a loader after " << consumed << " batches hung";
    // Workers finish at most their current 20 ms batch.
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(2));
  }
}

TEST(AugmentTest, EachImageIsAWindowOfThePaddedImageMaybeMirrored) {
  const int64_t n = 16, pad = 2;
  // Values 1.. so that a zero can only be padding.
  const ::torch::Tensor images =
      ::torch::arange(1, 1 + n * 3 * 6 * 5, ::torch::kFloat).view({n, 3, 6, 5});
  const ::torch::Tensor out = Augment(images, {pad, true}, 5);
  ASSERT_EQ(out.sizes(), images.sizes());
  const ::torch::Tensor padded =
      ::torch::constant_pad_nd(images, {pad, pad, pad, pad}, 0);
  std::set<std::tuple<int64_t, int64_t, bool>> choices;
  for (int64_t i = 0; i < n; ++i) {
    bool found = false;
    for (int64_t top = 0; top <= 2 * pad && !found; ++top) {
      for (int64_t left = 0; left <= 2 * pad && !found; ++left) {
        const ::torch::Tensor window =
            padded[i].narrow(1, top, 6).narrow(2, left, 5);
        for (bool flip : {false, true}) {
          if (::torch::equal(out[i], flip ? window.flip({2}) : window)) {
            choices.insert({top, left, flip});
            found = true;
            break;
          }
        }
      }
    }
    EXPECT_TRUE(found) << "image " << i << " is no crop of its padded input";
  }
  EXPECT_GT(choices.size(), 4u);  // 16 draws from 50 choices
  EXPECT_TRUE(Augment(images, {}, 5).is_same(images));
  EXPECT_TRUE(::torch::equal(Augment(images, {pad, true}, 5), out));
  EXPECT_FALSE(::torch::equal(Augment(images, {pad, true}, 6), out));
}

std::vector<Batch> Epoch(const Dataset& dataset, int32_t rank, int64_t epoch,
                         int32_t workers) {
  auto sampler =
      DistributedSampler::Create(dataset.size(), {rank, 2, false, 9, false});
  EXPECT_TRUE(sampler.ok());
  LoaderOptions options;
  options.batch_size = 8;
  options.num_workers = workers;
  options.augmentation = Cifar10Augmentation();
  auto loader = DataLoader::Create(dataset, *sampler, epoch, options);
  EXPECT_TRUE(loader.ok());
  return Drain(**loader);
}

TEST(AugmentTest, LoaderAugmentationIsSeededBySeedEpochAndRank) {
  const Dataset dataset = Synthetic(40, {3, 32, 32}, 10, 3);
  const auto first = Epoch(dataset, 0, 0, 1);
  const auto again = Epoch(dataset, 0, 0, 3);  // other thread timing
  const auto next_epoch = Epoch(dataset, 0, 1, 1);
  ASSERT_EQ(first.size(), 3u);  // 20 rows: 8, 8, 4
  ASSERT_EQ(again.size(), first.size());
  ASSERT_EQ(next_epoch.size(), first.size());
  for (size_t b = 0; b < first.size(); ++b) {
    // No shuffling: the same rows each epoch, differently augmented.
    ASSERT_TRUE(::torch::equal(first[b].indices, next_epoch[b].indices));
    EXPECT_TRUE(::torch::equal(first[b].images, again[b].images)) << b;
    EXPECT_FALSE(::torch::equal(first[b].images, next_epoch[b].images)) << b;
    EXPECT_FALSE(::torch::equal(
        first[b].images, dataset.images.index_select(0, first[b].indices)));
    EXPECT_TRUE(::torch::equal(first[b].labels, next_epoch[b].labels));
  }
}

}  // namespace
}  // namespace kolo::data
