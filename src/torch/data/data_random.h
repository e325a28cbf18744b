// The random numbers behind kolo::data's shuffles, augmentation and
// synthetic data. Every rank must draw the same permutation from the same
// seed, and a seed must mean the same data on every platform, so this uses
// std::mt19937_64 (whose output the standard fixes) with its own reductions
// to ranges and floats: std::uniform_int_distribution, std::shuffle and
// std::normal_distribution differ between standard libraries.
//
// (Named data_random.h, not random.h: src/ is on the include path, and a
// header here must not shadow one of LibTorch's <torch/data/...>.)
//
// Thread-safety: a DataRandom is used by one thread at a time.
#ifndef KOLO_SRC_TORCH_DATA_DATA_RANDOM_H_
#define KOLO_SRC_TORCH_DATA_DATA_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <utility>
#include <vector>

namespace kolo::data {

// Folds several values into one well-spread seed (SplitMix64's finaliser per
// value), so that seeds such as (seed, epoch, rank) and (seed, rank, epoch)
// or neighbouring batch numbers give unrelated streams.
inline uint64_t MixSeed(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t v : values) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return h;
}

class DataRandom {
 public:
  explicit DataRandom(uint64_t seed) : engine_(seed) {}

  uint64_t Next() { return engine_(); }

  // Uniform in [0, n), n > 0, without modulo bias: draws below 2^64 mod n
  // are redrawn, so every residue has the same number of preimages.
  uint64_t Below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    while (true) {
      const uint64_t r = engine_();
      if (r >= threshold) return r % n;
    }
  }

  // Uniform in [0, 1) with 53 random bits.
  double Unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Standard normal by Box-Muller (one of the pair; simplicity over speed).
  double Normal() {
    const double u1 = 1.0 - Unit();  // (0, 1]: log stays finite
    const double u2 = Unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // Fisher-Yates, from the last position down.
  void Shuffle(std::vector<int64_t>& values) {
    for (size_t i = values.size(); i > 1; --i) {
      std::swap(values[i - 1], values[Below(i)]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace kolo::data

#endif  // KOLO_SRC_TORCH_DATA_DATA_RANDOM_H_
