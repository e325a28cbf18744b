#include "statistics.h"

#include <cmath>

namespace kolo::bench {
namespace {

// Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
double StudentT95(int64_t dof) {
  static const double kTable[] = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof < 1) return 0;
  if (dof <= 30) return kTable[dof - 1];
  return 1.96;
}

}  // namespace

Spread SpreadOf(std::vector<double> values) {
  Spread spread;
  if (values.empty()) return spread;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  spread.median = values.size() % 2 == 1
                      ? values[middle]
                      : (values[middle - 1] + values[middle]) / 2;
  spread.min = values.front();
  spread.max = values.back();
  return spread;
}

MeanInterval Summarize(const std::vector<double>& values) {
  MeanInterval out;
  if (values.empty()) return out;
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / static_cast<double>(values.size());
  if (values.size() < 2) return out;
  double squares = 0;
  for (double v : values) squares += (v - out.mean) * (v - out.mean);
  const double n = static_cast<double>(values.size());
  const double stddev = std::sqrt(squares / (n - 1));
  out.half_width = StudentT95(static_cast<int64_t>(values.size()) - 1) *
                   stddev / std::sqrt(n);
  return out;
}

}  // namespace kolo::bench
