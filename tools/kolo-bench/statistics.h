// The summaries kolo-bench takes of a command's repeated runs.
#pragma once

#include <vector>

namespace kolo::bench {

// Median, smallest and largest of a sample (all 0 when it is empty). The
// median of an even sample is the mean of its two middle values.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
};
Spread SpreadOf(std::vector<double> values);

}  // namespace kolo::bench
