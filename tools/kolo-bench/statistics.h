// The few statistics kolo-bench's tables give: a sample's median and range,
// its mean with a 95% interval, and the largest of a per-rank figure. Every
// command summarises its repeats with these, so they live apart from any
// one command.
#ifndef KOLO_TOOLS_KOLO_BENCH_STATISTICS_H_
#define KOLO_TOOLS_KOLO_BENCH_STATISTICS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace kolo::bench {

// Median, smallest and largest of a sample (all 0 when it is empty).
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
};
Spread SpreadOf(std::vector<double> values);

// Mean and half-width of the 95% confidence interval of `values`
// (Student's t with n-1 degrees of freedom; 0 for fewer than 2 values).
struct MeanInterval {
  double mean = 0;
  double half_width = 0;
};
MeanInterval Summarize(const std::vector<double>& values);

// The largest of a per-rank figure as a double; 0 when `values` is empty
// or holds nothing above 0.
template <typename T>
double Largest(const std::vector<T>& values) {
  double most = 0;
  for (T v : values) most = std::max(most, static_cast<double>(v));
  return most;
}

// The median over a command's repeats of one figure of each measurement:
// `figure`, a member or a function of the measurement, a number.
template <typename M, typename Figure>
double MedianOver(const std::vector<M>& repeats, Figure figure) {
  std::vector<double> values;
  for (const M& m : repeats) {
    values.push_back(static_cast<double>(std::invoke(figure, m)));
  }
  return SpreadOf(std::move(values)).median;
}

// The median over the repeats of the largest rank's `figure`.
template <typename M, typename T>
double MedianOfLargest(const std::vector<M>& repeats,
                       std::vector<T> M::*figure) {
  return MedianOver(repeats,
                    [figure](const M& m) { return Largest(m.*figure); });
}

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_STATISTICS_H_
