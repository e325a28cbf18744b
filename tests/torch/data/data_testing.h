// Helpers shared by the kolo::data tests (tests/torch/data/*_test.cc).
#ifndef KOLO_TESTS_TORCH_DATA_DATA_TESTING_H_
#define KOLO_TESTS_TORCH_DATA_DATA_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace kolo::data::testing {

inline std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

inline std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace kolo::data::testing

#endif  // KOLO_TESTS_TORCH_DATA_DATA_TESTING_H_
