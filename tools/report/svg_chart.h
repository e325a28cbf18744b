// Line and bar charts as inline SVG, drawn by kolo itself so that a report
// page is one file that needs nothing from the network: no script, no style
// sheet, no font.
//
// A line chart maps each axis through a Scale: linear, or log2 for message
// sizes, which a benchmark sweeps by doubling, so every doubling gets the
// same width. Ticks come at round values (1, 2 or 5 times a power of ten)
// on a linear axis, at powers of two on a log2 axis, and at the data's own
// values on an axis of worker counts (1, 2, 4, 8 are the points measured;
// 2.5 workers means nothing). Each series gets one colour, the same in the
// legend, the line and its markers; a dashed series (an ideal, a reference)
// has no markers. Every text is escaped, so names read from result files
// cannot break the page.
//
// Thread-safety: free functions over values; safe from any thread.
#ifndef KOLO_TOOLS_REPORT_SVG_CHART_H_
#define KOLO_TOOLS_REPORT_SVG_CHART_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kolo::bench {

// `text` with &, <, >, " and ' replaced by entities: safe as element text
// and inside a quoted attribute, in HTML and in SVG.
std::string EscapeHtml(std::string_view text);

// Maps a data interval onto a pixel interval. Pixel intervals may run
// backwards (SVG's y grows downwards).
class Scale {
 public:
  static Scale Linear(double lo, double hi, double pixel_lo, double pixel_hi);
  // lo and hi must be positive: equal pixel distance per doubling.
  static Scale Log2(double lo, double hi, double pixel_lo, double pixel_hi);

  double Map(double value) const;

 private:
  Scale(bool log2, double lo, double hi, double pixel_lo, double pixel_hi);

  bool log2_;
  double lo_;  // in log2 units when log2_
  double hi_;
  double pixel_lo_;
  double pixel_hi_;
};

// Round values 1, 2 or 5 times a power of ten apart, about `target`
// intervals, from the largest multiple of the step at or below `lo` to the
// smallest at or above `hi`. An empty interval (lo == hi) is widened to
// show its value.
std::vector<double> NiceTicks(double lo, double hi, int target);

// The exponents e with 2^e between the largest power of two at or below
// `lo` and the smallest at or above `hi` (lo, hi > 0), keeping every k-th:
// k is the smallest of 1, 2, 4, 5, 10 that leaves at most `max_ticks`,
// and the kept exponents are the multiples of k, so labels land on 1K, 1M.
std::vector<int> Log2TickExponents(double lo, double hi, int max_ticks);

// `value` with as many decimals as a tick spacing of `step` needs ("0.5",
// "20", "1500").
std::string FormatTick(double value, double step);

// A byte count: powers of two in K, M, G of 1024 ("8", "1K", "64M");
// anything else with one decimal in the largest unit it reaches ("1.5K").
std::string FormatBytes(double bytes);

// The report's colours, colour-blind safe (Okabe and Ito), cycling.
std::string PaletteColor(size_t index);

struct ChartSeries {
  std::string name;
  std::string color;  // any CSS colour; empty: PaletteColor(position)
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), any order
};

struct ChartAxis {
  enum class Ticks {
    kLinear,  // NiceTicks
    kLog2,    // a log2 scale, ticks at powers of two
    kAtData,  // a linear scale, ticks at the distinct values plotted
  };
  std::string label;
  Ticks ticks = Ticks::kLinear;
  bool bytes = false;  // tick labels by FormatBytes
  // A linear axis reaches down to 0, so a cut axis cannot make a small
  // difference between rates look large.
  bool zero_based = true;
};

struct LineChart {
  std::string title;  // read by screen readers and shown as a tooltip
  ChartAxis x;
  ChartAxis y;
  std::vector<ChartSeries> series;
};

// An <svg> element. Points that a log2 axis cannot show (x <= 0) and
// non-finite points are left out.
std::string RenderLineChart(const LineChart& chart);

struct BarSeries {
  std::string name;
  std::string color;                          // empty: PaletteColor
  std::vector<std::optional<double>> values;  // one per category; empty: no bar
};

// Horizontal grouped bars: one group per category, labelled on the left,
// one bar per series in each group, its value printed at its end.
struct BarChart {
  std::string title;
  std::string value_label;          // the value axis, "test accuracy (%)"
  std::string value_suffix;         // printed after each bar's value, "%"
  std::optional<double> max_value;  // the axis's end; default: the data's
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
};

std::string RenderBarChart(const BarChart& chart);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_SVG_CHART_H_
