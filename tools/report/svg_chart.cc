#include "svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>

namespace kolo::bench {
namespace {

// Line chart geometry (viewBox units): the plot area, then the legend to
// its right, where long series names have room.
constexpr double kLineWidth = 800;
constexpr double kLineHeight = 380;
constexpr double kPlotLeft = 72;
constexpr double kPlotRight = 580;
constexpr double kPlotTop = 16;
constexpr double kPlotBottom = 316;
constexpr double kLegendLeft = 600;

// Bar chart geometry: category labels right-aligned before the bars.
constexpr double kBarWidth = 800;
constexpr double kBarLabelRight = 236;
constexpr double kBarLeft = 244;
constexpr double kBarRight = 700;
constexpr double kBarThickness = 14;
constexpr double kBarGap = 2;
constexpr double kGroupGap = 12;
constexpr size_t kLegendPerRow = 3;
constexpr size_t kMaxLabelBytes = 36;

constexpr const char* kAxisColor = "#333333";
constexpr const char* kGridColor = "#e4e4e4";

std::string Px(double value) { return fmt::format("{:.1f}", value); }

// The exponents of the powers of two around [lo, hi]: the largest at or
// below lo and the smallest at or above hi, never the same one.
std::pair<int, int> Log2Bounds(double lo, double hi) {
  int first = std::ilogb(lo);  // floor(log2 lo), exact for doubles
  int last = std::ilogb(hi);
  if (std::ldexp(1.0, last) < hi) ++last;
  if (first == last) {
    --first;
    ++last;
  }
  return {first, last};
}

std::string FormatValue(double value) {
  if (value != 0 && (std::abs(value) >= 1e6 || std::abs(value) < 1e-3)) {
    return fmt::format("{:.3g}", value);
  }
  std::string text = fmt::format("{:.3f}", value);
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// Cuts `text` to at most kMaxLabelBytes, at a UTF-8 character boundary.
std::string Shorten(const std::string& text) {
  if (text.size() <= kMaxLabelBytes) return text;
  size_t cut = kMaxLabelBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return text.substr(0, cut) + "\u2026";
}

// Where one axis puts its values and its ticks.
struct AxisLayout {
  Scale scale;
  std::vector<std::pair<double, std::string>> labelled;  // value, label
  std::vector<double> minor;                             // unlabelled
};

AxisLayout LayOutAxis(const ChartAxis& axis, std::vector<double> values,
                      double pixel_lo, double pixel_hi) {
  auto label = [&](double value, double step) {
    return axis.bytes ? FormatBytes(value) : FormatTick(value, step);
  };
  if (axis.ticks == ChartAxis::Ticks::kLog2) {
    values.erase(std::remove_if(values.begin(), values.end(),
                                [](double v) { return !(v > 0); }),
                 values.end());
    double lo = 1;
    double hi = 2;
    if (!values.empty()) {
      lo = *std::min_element(values.begin(), values.end());
      hi = *std::max_element(values.begin(), values.end());
    }
    const auto [first, last] = Log2Bounds(lo, hi);
    AxisLayout layout{Scale::Log2(std::ldexp(1.0, first), std::ldexp(1.0, last),
                                  pixel_lo, pixel_hi),
                      {},
                      {}};
    for (int e : Log2TickExponents(lo, hi, 10)) {
      layout.labelled.push_back(
          {std::ldexp(1.0, e), label(std::ldexp(1.0, e), 1)});
    }
    if (last - first <= 64) {
      for (int e = first; e <= last; ++e)
        layout.minor.push_back(std::ldexp(1.0, e));
    }
    return layout;
  }
  if (axis.ticks == ChartAxis::Ticks::kAtData && !values.empty()) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    double lo = values.front();
    double hi = values.back();
    if (lo == hi) {
      lo -= 1;
      hi += 1;
    }
    AxisLayout layout{Scale::Linear(lo, hi, pixel_lo, pixel_hi), {}, {}};
    for (double v : values) layout.labelled.push_back({v, FormatValue(v)});
    return layout;
  }
  double lo = 0;
  double hi = 1;
  if (!values.empty()) {
    lo = *std::min_element(values.begin(), values.end());
    hi = *std::max_element(values.begin(), values.end());
  }
  if (axis.zero_based) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  const std::vector<double> ticks = NiceTicks(lo, hi, 5);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  AxisLayout layout{
      Scale::Linear(ticks.front(), ticks.back(), pixel_lo, pixel_hi), {}, {}};
  for (double t : ticks) layout.labelled.push_back({t, label(t, step)});
  return layout;
}

std::string ColorOf(const std::string& color, size_t index) {
  return color.empty() ? PaletteColor(index) : color;
}

std::string DashOf(bool dashed) {
  return dashed ? " stroke-dasharray=\"6 4\"" : "";
}

// The opening of every chart. No xmlns: inline SVG in HTML needs none, and
// the page then holds no address at all.
std::string SvgOpen(double width, double height, const std::string& title) {
  return fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" role=\"img\" aria-label=\"{2}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"12\">\n<title>{2}</title>\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
      Px(width), Px(height), EscapeHtml(title));
}

}  // namespace

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Scale::Scale(bool log2, double lo, double hi, double pixel_lo, double pixel_hi)
    : log2_(log2), lo_(lo), hi_(hi), pixel_lo_(pixel_lo), pixel_hi_(pixel_hi) {}

Scale Scale::Linear(double lo, double hi, double pixel_lo, double pixel_hi) {
  return Scale(false, lo, hi, pixel_lo, pixel_hi);
}

Scale Scale::Log2(double lo, double hi, double pixel_lo, double pixel_hi) {
  return Scale(true, std::log2(lo), std::log2(hi), pixel_lo, pixel_hi);
}

double Scale::Map(double value) const {
  const double v = log2_ ? std::log2(value) : value;
  if (hi_ == lo_) return (pixel_lo_ + pixel_hi_) / 2;
  return pixel_lo_ + (v - lo_) / (hi_ - lo_) * (pixel_hi_ - pixel_lo_);
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) {
    if (lo == 0) {
      hi = 1;
    } else {
      const double pad = std::abs(lo) * 0.1;
      lo -= pad;
      hi += pad;
    }
  }
  const double raw = (hi - lo) / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  double nice = 10;
  if (normalized <= 1) {
    nice = 1;
  } else if (normalized <= 2) {
    nice = 2;
  } else if (normalized <= 5) {
    nice = 5;
  }
  const double step = nice * magnitude;
  // The tolerance keeps 100 / 20 = 5.000000001 from adding a tick.
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last + 0.5; k += 1) ticks.push_back(k * step);
  return ticks;
}

std::vector<int> Log2TickExponents(double lo, double hi, int max_ticks) {
  const auto [first, last] = Log2Bounds(lo, hi);
  for (int k : {1, 2, 4, 5, 10, 20, 50}) {
    std::vector<int> kept;
    for (int e = first; e <= last; ++e) {
      if (((e % k) + k) % k == 0) kept.push_back(e);
    }
    if (static_cast<int>(kept.size()) <= max_ticks && !kept.empty()) {
      return kept;
    }
  }
  return {first, last};
}

std::string FormatTick(double value, double step) {
  int decimals = 0;
  if (step > 0 && step < 1) {
    decimals =
        std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  }
  if (step > 0 && std::abs(value) < step * 1e-6) value = 0;  // never "-0"
  return fmt::format("{:.{}f}", value, decimals);
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T"};
  size_t unit = 0;
  double scaled = bytes;
  while (unit + 1 < std::size(kUnits) && std::abs(scaled) >= 1024) {
    scaled /= 1024;
    ++unit;
  }
  if (scaled == std::floor(scaled)) {
    return fmt::format("{:.0f}{}", scaled, kUnits[unit]);
  }
  return fmt::format("{:.1f}{}", scaled, kUnits[unit]);
}

std::string PaletteColor(size_t index) {
  static const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73",
                                        "#CC79A7", "#E69F00", "#56B4E9",
                                        "#000000"};
  return kColors[index % std::size(kColors)];
}

std::string RenderLineChart(const LineChart& chart) {
  const bool log_x = chart.x.ticks == ChartAxis::Ticks::kLog2;
  auto shown = [&](const std::pair<double, double>& p) {
    return std::isfinite(p.first) && std::isfinite(p.second) &&
           (!log_x || p.first > 0);
  };
  std::vector<double> xs;
  std::vector<double> ys;
  for (const ChartSeries& series : chart.series) {
    for (const auto& p : series.points) {
      if (!shown(p)) continue;
      xs.push_back(p.first);
      ys.push_back(p.second);
    }
  }
  const AxisLayout x = LayOutAxis(chart.x, xs, kPlotLeft, kPlotRight);
  const AxisLayout y = LayOutAxis(chart.y, ys, kPlotBottom, kPlotTop);

  std::string svg = SvgOpen(kLineWidth, kLineHeight, chart.title);
  // Grid first, so axes and series are drawn over it.
  for (const auto& [value, text] : y.labelled) {
    const std::string py = Px(y.scale.Map(value));
    svg += fmt::format("<path d=\"M{} {}H{}\" stroke=\"{}\"/>\n", Px(kPlotLeft),
                       py, Px(kPlotRight), kGridColor);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" "
        "dominant-baseline=\"middle\">{}</text>\n",
        Px(kPlotLeft - 6), py, EscapeHtml(text));
  }
  for (double value : x.minor) {
    svg += fmt::format("<path d=\"M{} {}v3\" stroke=\"{}\"/>\n",
                       Px(x.scale.Map(value)), Px(kPlotBottom), kAxisColor);
  }
  for (const auto& [value, text] : x.labelled) {
    const std::string px = Px(x.scale.Map(value));
    svg += fmt::format("<path d=\"M{} {}V{}\" stroke=\"{}\"/>\n", px,
                       Px(kPlotTop), Px(kPlotBottom), kGridColor);
    svg += fmt::format("<path d=\"M{} {}v6\" stroke=\"{}\"/>\n", px,
                       Px(kPlotBottom), kAxisColor);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px,
        Px(kPlotBottom + 20), EscapeHtml(text));
  }
  svg += fmt::format("<path d=\"M{} {}V{}H{}\" stroke=\"{}\" fill=\"none\"/>\n",
                     Px(kPlotLeft), Px(kPlotTop), Px(kPlotBottom),
                     Px(kPlotRight), kAxisColor);
  svg +=
      fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  Px((kPlotLeft + kPlotRight) / 2), Px(kPlotBottom + 44),
                  EscapeHtml(chart.x.label));
  svg += fmt::format(
      "<text transform=\"translate({} {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      Px(16), Px((kPlotTop + kPlotBottom) / 2), EscapeHtml(chart.y.label));

  for (size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& series = chart.series[i];
    const std::string color = ColorOf(series.color, i);
    std::vector<std::pair<double, double>> points;
    std::copy_if(series.points.begin(), series.points.end(),
                 std::back_inserter(points), shown);
    std::sort(points.begin(), points.end());
    svg += fmt::format("<g class=\"series\" data-series=\"{}\">\n",
                       EscapeHtml(series.name));
    std::string coordinates;
    for (const auto& [px, py] : points) {
      if (!coordinates.empty()) coordinates += ' ';
      coordinates += Px(x.scale.Map(px)) + "," + Px(y.scale.Map(py));
    }
    svg += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2\"{}/>\n",
        coordinates, color, DashOf(series.dashed));
    if (!series.dashed) {
      for (const auto& [px, py] : points) {
        svg += fmt::format(
            "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{}: {} "
            "\u2192 {}</title></circle>\n",
            Px(x.scale.Map(px)), Px(y.scale.Map(py)), color,
            EscapeHtml(series.name),
            chart.x.bytes ? FormatBytes(px) : FormatValue(px), FormatValue(py));
      }
    }
    svg += "</g>\n";
    const double legend_y = kPlotTop + 8 + 20 * static_cast<double>(i);
    svg += fmt::format(
        "<path d=\"M{} {}h24\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
        Px(kLegendLeft), Px(legend_y), color, DashOf(series.dashed));
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
        Px(kLegendLeft + 30), Px(legend_y), EscapeHtml(series.name));
  }
  svg += "</svg>\n";
  return svg;
}

std::string RenderBarChart(const BarChart& chart) {
  const size_t n_series = chart.series.size();
  const size_t n_categories = chart.categories.size();
  double largest = 0;
  for (const BarSeries& series : chart.series) {
    for (const std::optional<double>& v : series.values) {
      if (v && std::isfinite(*v)) largest = std::max(largest, *v);
    }
  }
  const std::vector<double> ticks =
      NiceTicks(0, chart.max_value ? *chart.max_value : largest, 5);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  const Scale scale = Scale::Linear(0, ticks.back(), kBarLeft, kBarRight);

  const size_t legend_rows = (n_series + kLegendPerRow - 1) / kLegendPerRow;
  const double top = 12 + 20 * static_cast<double>(legend_rows) + 8;
  const double group =
      static_cast<double>(n_series) * (kBarThickness + kBarGap) + kGroupGap;
  const double bottom = top + group * static_cast<double>(n_categories);
  const double height = bottom + 52;

  std::string svg = SvgOpen(kBarWidth, height, chart.title);
  for (size_t s = 0; s < n_series; ++s) {
    const double lx = 16 + 260 * static_cast<double>(s % kLegendPerRow);
    const double ly = 18 + 20 * static_cast<double>(s / kLegendPerRow);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/>\n",
        Px(lx), Px(ly - 6), ColorOf(chart.series[s].color, s));
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
        Px(lx + 20), Px(ly), EscapeHtml(chart.series[s].name));
  }
  for (double t : ticks) {
    const std::string px = Px(scale.Map(t));
    svg += fmt::format("<path d=\"M{} {}V{}\" stroke=\"{}\"/>\n", px, Px(top),
                       Px(bottom), kGridColor);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px,
        Px(bottom + 18), FormatTick(t, step));
  }
  svg +=
      fmt::format("<path d=\"M{} {}V{}H{}\" stroke=\"{}\" fill=\"none\"/>\n",
                  Px(kBarLeft), Px(top), Px(bottom), Px(kBarRight), kAxisColor);
  svg +=
      fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  Px((kBarLeft + kBarRight) / 2), Px(bottom + 42),
                  EscapeHtml(chart.value_label));
  for (size_t c = 0; c < n_categories; ++c) {
    const double group_top =
        top + group * static_cast<double>(c) + kGroupGap / 2;
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" "
        "dominant-baseline=\"middle\">{}<title>{}</title></text>\n",
        Px(kBarLabelRight), Px(group_top + (group - kGroupGap) / 2),
        EscapeHtml(Shorten(chart.categories[c])),
        EscapeHtml(chart.categories[c]));
    for (size_t s = 0; s < n_series; ++s) {
      const BarSeries& series = chart.series[s];
      if (c >= series.values.size() || !series.values[c] ||
          !std::isfinite(*series.values[c])) {
        continue;
      }
      const double value = *series.values[c];
      const double bar_top =
          group_top + static_cast<double>(s) * (kBarThickness + kBarGap);
      const double end = scale.Map(std::clamp(value, 0.0, ticks.back()));
      const std::string text = FormatValue(value) + chart.value_suffix;
      svg += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>{} \u2014 {}: {}</title></rect>\n",
          Px(kBarLeft), Px(bar_top), Px(end - kBarLeft), Px(kBarThickness),
          ColorOf(series.color, s), EscapeHtml(chart.categories[c]),
          EscapeHtml(series.name), EscapeHtml(text));
      svg += fmt::format(
          "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
          Px(end + 4), Px(bar_top + kBarThickness / 2), EscapeHtml(text));
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kolo::bench
