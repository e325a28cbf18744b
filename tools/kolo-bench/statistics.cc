#include "statistics.h"

#include <algorithm>

namespace kolo::bench {

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

}  // namespace kolo::bench
