#include "report.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "bench_common.h"
#include "json_file.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIdealColor = "#888888";
constexpr const char* kMemcpyColor = "#555555";

// ---- Reading: every field optional, a wrong type counts as absent, so a
// record from an older or newer kolo-bench still draws what it can.

std::optional<double> Number(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  const double value = it->get<double>();
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

std::string Text(const json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

const json& Member(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// Whether `record` has a "rows" array whose first row carries `field`: how
// a record from a kolo-bench that did not name itself is still known.
bool RowsCarry(const json& record, const char* field) {
  const json& rows = Member(record, "rows");
  return rows.is_array() && !rows.empty() && rows[0].is_object() &&
         rows[0].contains(field);
}

bool IsTrainRecord(const json& record) {
  return Text(record, "tool") == "kolo-bench train" ||
         (record.is_object() && !record.contains("benchmark") &&
          RowsCarry(record, "framework"));
}

bool IsCollectivesRecord(const json& record) {
  return Text(record, "benchmark") == "collectives" ||
         (record.is_object() && !record.contains("tool") &&
          RowsCarry(record, "collective"));
}

bool IsZeroRecord(const json& record) {
  return Text(record, "benchmark") == "zero";
}

bool IsPipelineRecord(const json& record) {
  return Text(record, "benchmark") == "pipeline";
}

bool IsCheckpointRecord(const json& record) {
  return Text(record, "benchmark") == "checkpoint";
}

int AddEnvironment(const json& record, const std::string& source,
                   Results* results) {
  const json& fields = Member(record, "environment");
  if (!fields.is_object() || fields.empty()) return -1;
  std::vector<Environment>& all = results->environments;
  auto it = std::find_if(all.begin(), all.end(), [&](const Environment& e) {
    return e.fields == fields;
  });
  if (it == all.end()) {
    all.push_back({fields, {}});
    it = all.end() - 1;
  }
  if (std::find(it->sources.begin(), it->sources.end(), source) ==
      it->sources.end()) {
    it->sources.push_back(source);
  }
  return static_cast<int>(it - all.begin());
}

TrainRecord ParseTrainRecord(const json& record, const std::string& source,
                             Results* results) {
  TrainRecord out;
  out.source = source;
  const json& config = Member(record, "config");
  out.config.study = Text(record, "study");
  if (out.config.study.empty()) out.config.study = Text(config, "study");
  out.config.model = Text(config, "model");
  out.config.dataset = Text(config, "dataset");
  out.config.batch_size =
      static_cast<int64_t>(Number(config, "batch_size").value_or(0));
  out.config.scaling = Text(config, "scaling");
  out.config.threads =
      static_cast<int32_t>(Number(config, "threads").value_or(0));
  const json& rows = Member(record, "rows");
  if (rows.is_array()) {
    for (const json& row : rows) {
      TrainRow r;
      r.framework = Text(row, "framework");
      if (r.framework.empty()) continue;
      if (row.contains("missing")) {
        out.missing.push_back({r.framework, Text(row, "missing")});
        continue;
      }
      const std::optional<double> np = Number(row, "np");
      if (!np || *np < 1) continue;
      r.np = static_cast<int32_t>(*np);
      if (auto b = Number(row, "batch_per_worker")) {
        r.batch_per_worker = static_cast<int64_t>(*b);
      }
      r.images_per_second = Number(row, "images_per_second_mean");
      r.images_per_second_ci95 = Number(row, "images_per_second_ci95");
      r.step_ms = Number(row, "step_ms_mean");
      r.communication_ms_per_step = Number(row, "communication_ms_per_step");
      r.peak_rss_mib = Number(row, "peak_rss_mib");
      r.test_accuracy = Number(row, "test_accuracy");
      r.wall_seconds = Number(row, "wall_seconds");
      r.epochs = Number(row, "epochs");
      out.rows.push_back(std::move(r));
    }
  }
  out.environment = AddEnvironment(record, source, results);
  return out;
}

ZeroRecord ParseZeroRecord(const json& record, const std::string& source,
                           Results* results) {
  ZeroRecord out;
  out.source = source;
  const json& config = Member(record, "config");
  out.config.optimizer = Text(config, "optimizer");
  out.config.precision = Text(config, "precision");
  out.config.dataset = Text(config, "dataset");
  out.config.image_size =
      static_cast<int64_t>(Number(config, "image_size").value_or(0));
  out.config.batch_size =
      static_cast<int64_t>(Number(config, "batch_size").value_or(0));
  out.config.threads =
      static_cast<int32_t>(Number(config, "threads").value_or(0));
  const json& rows = Member(record, "rows");
  if (rows.is_array()) {
    for (const json& row : rows) {
      ZeroReportRow r;
      r.variant = Text(row, "variant");
      if (r.variant.empty()) continue;
      if (row.contains("missing")) {
        out.missing.push_back({r.variant, Text(row, "missing")});
        continue;
      }
      r.model = Text(row, "model");
      const std::optional<double> np = Number(row, "np");
      if (r.model.empty() || !np || *np < 1) continue;
      r.np = static_cast<int32_t>(*np);
      r.images_per_second = Number(row, "images_per_second_median");
      r.step_ms = Number(row, "step_ms_median");
      r.optimizer_state_bytes = Number(row, "optimizer_state_bytes");
      r.gradient_bytes = Number(row, "gradient_bytes");
      r.peak_rss_mib = Number(row, "peak_rss_mib");
      out.rows.push_back(std::move(r));
    }
  }
  out.environment = AddEnvironment(record, source, results);
  return out;
}

BandwidthRun ParseBandwidthRows(const json& rows, std::string name, bool kolo) {
  BandwidthRun run;
  run.name = std::move(name);
  run.kolo = kolo;
  if (!rows.is_array()) return run;
  for (const json& row : rows) {
    BandwidthRow r;
    r.collective = Text(row, "collective");
    r.type = Text(row, "type");
    const std::optional<double> bytes = Number(row, "size");
    const json& out_of_place = Member(row, "out_of_place");
    const std::optional<double> busbw = Number(out_of_place, "busbw_gbps");
    if (r.collective.empty() || !bytes || !busbw) continue;
    r.bytes = static_cast<int64_t>(*bytes);
    r.busbw_gbps = *busbw;
    const json& in_place = Member(row, "in_place");
    r.in_place_busbw_gbps = Number(in_place, "busbw_gbps");
    r.wrong = static_cast<int64_t>(Number(out_of_place, "wrong").value_or(0) +
                                   Number(in_place, "wrong").value_or(0));
    run.rows.push_back(std::move(r));
  }
  return run;
}

CollectivesRecord ParseCollectivesRecord(const json& record,
                                         const std::string& source,
                                         Results* results) {
  CollectivesRecord out;
  out.source = source;
  out.np = static_cast<int32_t>(Number(record, "np").value_or(0));
  const std::string backend = Text(record, "backend");
  out.runs.push_back(ParseBandwidthRows(
      Member(record, "rows"),
      backend.empty() ? std::string(kKolo) : std::string(kKolo) + " " + backend,
      /*kolo=*/true));
  const json& peers = Member(record, "peers");
  if (peers.is_array()) {
    for (const json& peer : peers) {
      const std::string engine = Text(peer, "engine");
      if (engine.empty()) continue;
      out.runs.push_back(
          ParseBandwidthRows(Member(peer, "rows"), "raw " + engine, false));
    }
  }
  const json& memcpy = Member(record, "memcpy_2thread");
  if (memcpy.is_array()) {
    for (const json& point : memcpy) {
      const std::optional<double> bytes = Number(point, "size");
      const std::optional<double> gbps = Number(point, "gbps");
      if (bytes && gbps) {
        out.memcpy_gbps.push_back({static_cast<int64_t>(*bytes), *gbps});
      }
    }
  }
  out.environment = AddEnvironment(record, source, results);
  return out;
}

// ---- Formatting figures for the tables.

// Rates to about four significant digits without a decimal point on big
// ones: 15512, 91.3, 4.27.
std::string FormatRate(double value) {
  if (std::abs(value) >= 100) return fmt::format("{:.0f}", value);
  if (std::abs(value) >= 10) return fmt::format("{:.1f}", value);
  return fmt::format("{:.2f}", value);
}

std::string FormatGbps(double value) {
  if (std::abs(value) >= 10) return fmt::format("{:.1f}", value);
  if (std::abs(value) >= 1) return fmt::format("{:.2f}", value);
  return fmt::format("{:.3g}", value);
}

std::string Fixed(const std::optional<double>& value, int decimals) {
  if (!value) return "";
  return fmt::format("{:.{}f}", *value, decimals);
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// One HTML table cell: text (escaped here), numeric cells right-aligned.
struct Cell {
  std::string text;
  bool numeric = true;
  int span = 1;
};

Cell Label(std::string text) { return {std::move(text), false, 1}; }

std::string HtmlTable(const std::vector<std::string>& headers,
                      const std::vector<std::vector<Cell>>& rows) {
  // Wide tables scroll inside their box instead of running off the page.
  std::string html = "<div class=\"table\"><table>\n<thead><tr>";
  for (const std::string& h : headers) html += "<th>" + EscapeHtml(h) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (const std::vector<Cell>& row : rows) {
    html += "<tr>";
    for (const Cell& cell : row) {
      html += "<td";
      if (cell.numeric) html += " class=\"num\"";
      if (cell.span > 1) html += fmt::format(" colspan=\"{}\"", cell.span);
      html += ">" + EscapeHtml(cell.text) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table></div>\n";
}

std::string Paragraph(const std::string& text) {
  return "<p class=\"note\">" + EscapeHtml(text) + "</p>\n";
}

std::string Figure(const std::string& caption, const std::string& svg) {
  return "<figure>\n<figcaption>" + EscapeHtml(caption) + "</figcaption>\n" +
         svg + "</figure>\n";
}

// The page under construction. Colours are handed out by series name, so a
// framework or an engine has the same colour in every chart.
class Page {
 public:
  explicit Page(const Results& results) : results_(results) {}

  std::string Render();

 private:
  std::string ColorFor(const std::string& name);
  std::vector<ChartSeries> Colored(std::vector<ChartSeries> series);

  std::string ThroughputSection(const std::vector<TrainConfigView>& views);
  std::string TrainTable(const TrainConfigView& view);
  std::string EfficiencySection(const std::vector<TrainConfigView>& views);
  std::string AccuracySection(const std::vector<TrainConfigView>& views);
  std::string BandwidthSection();
  std::string BandwidthTable(const BandwidthView& view);
  std::string ZeroSection();
  std::string ZeroTable(const ZeroView& view);
  std::string PipelineSection();
  std::string CheckpointSection();
  std::string EnvironmentSection();

  const Results& results_;
  std::map<std::string, size_t> colors_;
};

std::string Page::ColorFor(const std::string& name) {
  auto it = colors_.find(name);
  if (it == colors_.end()) it = colors_.emplace(name, colors_.size()).first;
  return PaletteColor(it->second);
}

std::vector<ChartSeries> Page::Colored(std::vector<ChartSeries> series) {
  for (ChartSeries& s : series) {
    if (s.color.empty()) s.color = ColorFor(s.name);
  }
  return series;
}

const TrainRow* RowAt(const TrainConfigView& view, const std::string& framework,
                      int32_t np) {
  for (const auto& [name, rows] : view.frameworks) {
    if (name != framework) continue;
    const auto it = rows.find(np);
    return it == rows.end() ? nullptr : &it->second;
  }
  return nullptr;
}

std::optional<double> RateAt(const TrainConfigView& view,
                             const std::string& framework, int32_t np) {
  const TrainRow* row = RowAt(view, framework, np);
  if (row == nullptr) return std::nullopt;
  return row->images_per_second;
}

bool AnyAccuracy(const TrainConfigView& view) {
  for (const auto& [name, rows] : view.frameworks) {
    for (const auto& [np, row] : rows) {
      if (row.test_accuracy || row.epochs || row.wall_seconds) return true;
    }
  }
  return false;
}

std::string Page::TrainTable(const TrainConfigView& view) {
  const bool accuracy = AnyAccuracy(view);
  std::vector<std::string> headers = {
      "workers",         "framework",      "batch / worker",
      "images/s",        "± 95%",          "images/s per worker",
      "step (ms)",       "comm (ms/step)", "peak RSS (MiB)",
      "speedup vs np 1", "efficiency (%)", "kolo ÷ this"};
  if (accuracy) {
    headers.insert(headers.end(),
                   {"test accuracy (%)", "epochs", "wall time (s)"});
  }
  // Rows by worker count, frameworks in their usual order within each.
  std::vector<std::pair<int32_t, const TrainRow*>> ordered;
  for (const auto& [name, rows] : view.frameworks) {
    for (const auto& [np, row] : rows) ordered.push_back({np, &row});
  }
  std::stable_sort(
      ordered.begin(), ordered.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<Cell>> rows;
  for (const auto& [np, row] : ordered) {
    const std::optional<double> rate = row->images_per_second;
    std::optional<double> speedup;
    const std::optional<double> base = RateAt(view, row->framework, 1);
    if (rate && base && *base > 0) speedup = *rate / *base;
    std::optional<double> efficiency;
    if (speedup) efficiency = 100.0 * *speedup / np;
    std::optional<double> ratio;
    const std::optional<double> kolo = RateAt(view, kKolo, np);
    if (row->framework != kKolo && kolo && rate && *rate > 0) {
      ratio = *kolo / *rate;
    }
    std::vector<Cell> cells = {
        {std::to_string(np)},
        Label(row->framework),
        {row->batch_per_worker ? std::to_string(*row->batch_per_worker) : ""},
        {rate ? FormatRate(*rate) : ""},
        {row->images_per_second_ci95 ? FormatRate(*row->images_per_second_ci95)
                                     : ""},
        {rate ? FormatRate(*rate / np) : ""},
        {Fixed(row->step_ms, 1)},
        {Fixed(row->communication_ms_per_step, 2)},
        {Fixed(row->peak_rss_mib, 0)},
        {Fixed(speedup, 2)},
        {Fixed(efficiency, 0)},
        {Fixed(ratio, 2)}};
    if (accuracy) {
      cells.push_back({Fixed(row->test_accuracy, 2)});
      cells.push_back({row->epochs ? FormatTick(*row->epochs, 0.01) : ""});
      cells.push_back({Fixed(row->wall_seconds, 1)});
    }
    rows.push_back(std::move(cells));
  }
  for (const auto& [framework, why] : view.missing) {
    rows.push_back({{"–"},
                    Label(framework),
                    {why.empty() ? "not measured" : why, false,
                     static_cast<int>(headers.size()) - 2}});
  }
  return HtmlTable(headers, rows);
}

std::string Page::ThroughputSection(const std::vector<TrainConfigView>& views) {
  std::string html =
      "<section id=\"throughput\">\n<h2>Training throughput</h2>\n";
  if (views.empty()) {
    return html +
           Paragraph(
               "No training records in these files (kolo-bench train "
               "--json writes them).") +
           "</section>\n";
  }
  html += Paragraph(
      "Images per second over all workers (mean over the repeats), one line "
      "per framework. The tables give the 95% interval, the speedup and "
      "efficiency against the same framework at one worker, and kolo's "
      "throughput divided by each peer's at the same worker count.");
  for (const TrainConfigView& view : views) {
    const std::vector<ChartSeries> series = ThroughputSeries(view);
    if (series.empty()) {
      html += Paragraph(view.config.Label() + ": no throughput figures.");
    } else {
      LineChart chart;
      chart.title = "Throughput: " + view.config.Label();
      chart.x = {"workers", ChartAxis::Ticks::kAtData, false, false};
      chart.y = {"images/s", ChartAxis::Ticks::kLinear, false, true};
      chart.series = Colored(series);
      html += Figure(view.config.Label(), RenderLineChart(chart));
    }
    // kolo-bench study ps-vs-allreduce names its variants of kolo.
    const bool parameter_servers = std::any_of(
        view.frameworks.begin(), view.frameworks.end(),
        [](const auto& f) { return f.first.rfind("kolo-ps-", 0) == 0; });
    if (parameter_servers) {
      html += Paragraph(
          "kolo is kolo's allreduce; kolo-ps-MODE-K is the same kolo-train "
          "with K parameter servers (kolorun --servers K, processes beside "
          "the workers on the same cores) in sync or async mode, so kolo ÷ "
          "this is allreduce's throughput over the parameter server's.");
    }
    html += TrainTable(view);
  }
  return html + "</section>\n";
}

std::string Page::EfficiencySection(const std::vector<TrainConfigView>& views) {
  std::string html =
      "<section id=\"efficiency\">\n<h2>Scaling efficiency</h2>\n";
  std::vector<std::string> unmeasured;
  std::string charts;
  for (const TrainConfigView& view : views) {
    std::vector<ChartSeries> series = EfficiencySeries(view);
    if (series.empty()) {
      unmeasured.push_back(view.config.Label());
      continue;
    }
    double lo = 0;
    double hi = 0;
    bool first = true;
    for (const ChartSeries& s : series) {
      for (const auto& [np, value] : s.points) {
        lo = first ? np : std::min(lo, np);
        hi = first ? np : std::max(hi, np);
        first = false;
      }
    }
    series = Colored(std::move(series));
    series.push_back(
        {"ideal (100%)", kIdealColor, true, {{lo, 100}, {hi, 100}}});
    LineChart chart;
    chart.title = "Scaling efficiency: " + view.config.Label();
    chart.x = {"workers", ChartAxis::Ticks::kAtData, false, false};
    chart.y = {"efficiency (%)", ChartAxis::Ticks::kLinear, false, true};
    chart.series = std::move(series);
    charts += Figure(view.config.Label(), RenderLineChart(chart));
  }
  if (charts.empty()) {
    html += Paragraph(
        views.empty()
            ? "No training records in these files."
            : "No configuration was measured at one worker and at more: "
              "efficiency needs both.");
    return html + "</section>\n";
  }
  html += Paragraph(
      "Throughput at N workers divided by N times the same framework's "
      "throughput at one worker; the dashed line is perfect scaling. "
      "The figures are in the throughput tables.");
  html += charts;
  if (!unmeasured.empty()) {
    std::string list;
    for (const std::string& label : unmeasured) {
      list += (list.empty() ? "" : "; ") + label;
    }
    html += Paragraph("Not measured at one worker and at more: " + list + ".");
  }
  return html + "</section>\n";
}

std::string Page::AccuracySection(const std::vector<TrainConfigView>& views) {
  std::string html = "<section id=\"accuracy\">\n<h2>Test accuracy</h2>\n";
  // Bars: one group per configuration, one bar per framework and worker
  // count that reported an accuracy.
  std::vector<std::pair<std::string, int32_t>> keys;  // framework, np
  std::vector<const TrainConfigView*> with_accuracy;
  for (const TrainConfigView& view : views) {
    bool any = false;
    for (const auto& [name, rows] : view.frameworks) {
      for (const auto& [np, row] : rows) {
        if (!row.test_accuracy) continue;
        any = true;
        if (std::find(keys.begin(), keys.end(), std::make_pair(name, np)) ==
            keys.end()) {
          keys.push_back({name, np});
        }
      }
    }
    if (any) with_accuracy.push_back(&view);
  }
  if (with_accuracy.empty()) {
    return html +
           Paragraph(
               "No training row has a test accuracy (runs on a real "
               "dataset record one).") +
           "</section>\n";
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return FrameworkLess(a.first, b.first);
    return a.second < b.second;
  });
  BarChart chart;
  chart.title = "Test accuracy per configuration";
  chart.value_label = "test accuracy (%)";
  chart.value_suffix = "%";
  chart.max_value = 100;
  for (const TrainConfigView* view : with_accuracy) {
    chart.categories.push_back(view->config.Label());
  }
  std::vector<std::vector<Cell>> rows;
  for (const auto& [framework, np] : keys) {
    BarSeries series;
    series.name = fmt::format("{} np {}", framework, np);
    // Coloured by its own name, so two worker counts of one framework are
    // told apart.
    series.color = ColorFor(series.name);
    for (const TrainConfigView* view : with_accuracy) {
      const TrainRow* row = RowAt(*view, framework, np);
      series.values.push_back(row ? row->test_accuracy : std::nullopt);
    }
    chart.series.push_back(std::move(series));
  }
  for (const TrainConfigView* view : with_accuracy) {
    for (const auto& [framework, np] : keys) {
      const TrainRow* row = RowAt(*view, framework, np);
      if (row == nullptr || !row->test_accuracy) continue;
      rows.push_back(
          {Label(view->config.Label()),
           Label(framework),
           {std::to_string(np)},
           {Fixed(row->test_accuracy, 2)},
           {row->epochs ? FormatTick(*row->epochs, 0.01) : ""},
           {Fixed(row->wall_seconds, 1)},
           {row->images_per_second ? FormatRate(*row->images_per_second)
                                   : ""}});
    }
  }
  html += Figure("Test accuracy after training", RenderBarChart(chart));
  html +=
      HtmlTable({"configuration", "framework", "workers", "test accuracy (%)",
                 "epochs", "wall time (s)", "images/s"},
                rows);
  return html + "</section>\n";
}

std::string Page::BandwidthTable(const BandwidthView& view) {
  std::vector<std::string> headers = {"size (bytes)", "size"};
  for (const auto& [name, points] : view.series) {
    headers.push_back(name + " busbw (GB/s)");
  }
  if (!view.memcpy_gbps.empty()) headers.push_back("memcpy, 2 threads (GB/s)");
  std::vector<std::pair<size_t, size_t>> ratios;  // kolo series, raw series
  for (size_t k = 0; k < view.series.size(); ++k) {
    for (size_t r = 0; r < view.series.size(); ++r) {
      if (view.kolo[k] && !view.kolo[r]) {
        ratios.push_back({k, r});
        headers.push_back(view.series[k].first + " ÷ " + view.series[r].first);
      }
    }
  }
  std::set<int64_t> sizes;
  for (const auto& [name, points] : view.series) {
    for (const auto& [bytes, gbps] : points) sizes.insert(bytes);
  }
  std::vector<std::vector<Cell>> rows;
  for (int64_t bytes : sizes) {
    std::vector<Cell> cells = {{std::to_string(bytes)},
                               {FormatBytes(static_cast<double>(bytes))}};
    auto at = [&](size_t s) -> std::optional<double> {
      const auto it = view.series[s].second.find(bytes);
      if (it == view.series[s].second.end()) return std::nullopt;
      return it->second;
    };
    for (size_t s = 0; s < view.series.size(); ++s) {
      const std::optional<double> v = at(s);
      cells.push_back({v ? FormatGbps(*v) : ""});
    }
    if (!view.memcpy_gbps.empty()) {
      const auto it = view.memcpy_gbps.find(bytes);
      cells.push_back(
          {it == view.memcpy_gbps.end() ? "" : FormatGbps(it->second)});
    }
    for (const auto& [k, r] : ratios) {
      const std::optional<double> kolo = at(k);
      const std::optional<double> raw = at(r);
      cells.push_back(
          {kolo && raw && *raw > 0 ? fmt::format("{:.2f}", *kolo / *raw) : ""});
    }
    rows.push_back(std::move(cells));
  }
  return HtmlTable(headers, rows);
}

std::string Page::BandwidthSection() {
  std::string html =
      "<section id=\"bandwidth\">\n<h2>Collective bus bandwidth</h2>\n";
  const std::vector<BandwidthView> views = GroupCollectives(results_);
  if (views.empty()) {
    return html +
           Paragraph(
               "No collectives records in these files (kolo-bench "
               "collectives --json writes them).") +
           "</section>\n";
  }
  html += Paragraph(
      "Out-of-place bus bandwidth against message size (nccl-tests' busbw: "
      "algorithm bandwidth times 2(n\u22121)/n for allreduce, (n\u22121)/n "
      "for allgather, reducescatter and alltoall, 1 for broadcast). kolo "
      "runs through its public API on the named backend; a raw series calls "
      "that engine directly, without kolo.");
  for (const BandwidthView& view : views) {
    const std::string label =
        fmt::format("{} {}, {}", view.collective, view.type,
                    Plural(view.np, "rank", "ranks"));
    std::vector<ChartSeries> series;
    for (const auto& [name, points] : view.series) {
      ChartSeries s;
      s.name = name;
      for (const auto& [bytes, gbps] : points) {
        s.points.push_back({static_cast<double>(bytes), gbps});
      }
      series.push_back(std::move(s));
    }
    series = Colored(std::move(series));
    if (!view.memcpy_gbps.empty()) {
      ChartSeries memcpy{"memcpy, 2 threads", kMemcpyColor, true, {}};
      for (const auto& [bytes, gbps] : view.memcpy_gbps) {
        memcpy.points.push_back({static_cast<double>(bytes), gbps});
      }
      series.push_back(std::move(memcpy));
    }
    LineChart chart;
    chart.title = "Bus bandwidth: " + label;
    chart.x = {"message size (bytes; K = 1024)", ChartAxis::Ticks::kLog2, true,
               false};
    chart.y = {"bus bandwidth (GB/s)", ChartAxis::Ticks::kLinear, false, true};
    chart.series = std::move(series);
    html += Figure(label, RenderLineChart(chart));
    if (view.wrong > 0) {
      html += Paragraph(fmt::format(
          "Warning: {} wrong in these runs; their bandwidths are not "
          "results.",
          Plural(view.wrong, "value was", "values were")));
    }
    html += BandwidthTable(view);
  }
  return html + "</section>\n";
}

std::string Mib(const std::optional<double>& bytes) {
  if (!bytes) return "";
  return fmt::format("{:.1f}", *bytes / (1 << 20));
}

std::optional<double> StatePlusGradients(const ZeroReportRow& row) {
  if (!row.optimizer_state_bytes || !row.gradient_bytes) return std::nullopt;
  return *row.optimizer_state_bytes + *row.gradient_bytes;
}

std::string Page::ZeroTable(const ZeroView& view) {
  const std::vector<std::string> headers = {"model",
                                            "workers",
                                            "variant",
                                            "images/s",
                                            "step (ms)",
                                            "optimizer state (MiB/rank)",
                                            "gradients (MiB/rank)",
                                            "state + gradients ÷ kolo-ddp",
                                            "peak RSS (MiB)",
                                            "images/s ÷ kolo-ddp"};
  std::vector<std::vector<Cell>> rows;
  for (const ZeroReportRow& row : view.rows) {
    rows.push_back(
        {Label(row.model),
         {std::to_string(row.np)},
         Label(row.variant),
         {row.images_per_second ? FormatRate(*row.images_per_second) : ""},
         {Fixed(row.step_ms, 1)},
         {Mib(row.optimizer_state_bytes)},
         {Mib(row.gradient_bytes)},
         {Fixed(ZeroMemoryFraction(view, row), 3)},
         {Fixed(row.peak_rss_mib, 0)},
         {Fixed(ZeroThroughputRatio(view, row), 2)}});
  }
  for (const auto& [variant, why] : view.missing) {
    rows.push_back({{"–", false},
                    {"–"},
                    Label(variant),
                    {why.empty() ? "not measured" : why, false,
                     static_cast<int>(headers.size()) - 3}});
  }
  return HtmlTable(headers, rows);
}

std::string Page::ZeroSection() {
  std::string html =
      "<section id=\"zero\">\n<h2>ZeRO: memory per rank and "
      "throughput</h2>\n";
  const std::vector<ZeroView> views = GroupZero(results_);
  if (views.empty()) {
    return html +
           Paragraph(
               "No ZeRO records in these files (kolo-bench zero --json "
               "writes them).") +
           "</section>\n";
  }
  html += Paragraph(
      "Bytes of optimizer state plus gradients held by the rank holding the "
      "most, as each job measured them: kolo's DistributedOptimizer "
      "(kolo-ddp), ZeRO stages 1 and 2 (kolo-zero1, kolo-zero2), PyTorch DDP "
      "(torch-ddp) and DDP with ZeroRedundancyOptimizer (torch-zero). kolo's "
      "gradients include its communication buckets; torch's are the .grad "
      "tensors only, DDP's bucket copies being invisible from Python. The "
      "ratios are against kolo-ddp at the same worker count.");
  for (const ZeroView& view : views) {
    // One group of bars per model and worker count, one bar per variant.
    BarChart chart;
    chart.title =
        "Optimizer state + gradients per rank: " + view.config.Label();
    chart.value_label = "MiB per rank (largest rank)";
    chart.value_suffix = " MiB";
    std::vector<std::pair<std::string, int32_t>> groups;
    std::vector<std::string> variants;
    for (const ZeroReportRow& row : view.rows) {
      if (std::find(groups.begin(), groups.end(),
                    std::make_pair(row.model, row.np)) == groups.end()) {
        groups.push_back({row.model, row.np});
      }
      if (std::find(variants.begin(), variants.end(), row.variant) ==
          variants.end()) {
        variants.push_back(row.variant);
      }
    }
    for (const auto& [model, np] : groups) {
      chart.categories.push_back(
          fmt::format("{}, {}", model, Plural(np, "worker", "workers")));
    }
    for (const std::string& variant : variants) {
      BarSeries series;
      series.name = variant;
      series.color = ColorFor(variant);
      for (const auto& [model, np] : groups) {
        std::optional<double> value;
        for (const ZeroReportRow& row : view.rows) {
          if (row.model == model && row.np == np && row.variant == variant) {
            if (auto bytes = StatePlusGradients(row)) {
              value = *bytes / (1 << 20);
            }
          }
        }
        series.values.push_back(value);
      }
      chart.series.push_back(std::move(series));
    }
    html += Figure(view.config.Label(), RenderBarChart(chart));
    html += ZeroTable(view);
  }
  return html + "</section>\n";
}

std::string EnvironmentValue(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::string Page::PipelineSection() {
  std::string html =
      "<section id=\"pipeline\">\n<h2>Pipeline parallelism</h2>\n";
  if (results_.pipeline.empty()) {
    return html +
           Paragraph(
               "No pipeline records in these files (kolo-bench pipeline "
               "--json writes them).") +
           "</section>\n";
  }
  html += Paragraph(
      "The bubble is the fraction of its time a stage waited rather than "
      "computed (kolo-train reports stage 0's), one solid line per stage "
      "count and schedule, against the ideal (p-1)/(m+p-1) dashed. The "
      "memory table gives each rank's peak RSS (the kernel's high-water "
      "mark of its resident memory) and the bytes kolo-train reports.");
  for (const PipelineRecord& record : results_.pipeline) {
    const std::string model = Text(record.config, "model");
    LineChart chart;
    chart.title = "Bubble against micro-batches: " + model;
    chart.x = {"micro-batches m", ChartAxis::Ticks::kAtData, false, false};
    chart.y = {"bubble (fraction of step time)", ChartAxis::Ticks::kLinear,
               false, true};
    std::map<std::string, ChartSeries> series;  // by name
    std::vector<std::vector<Cell>> rows;
    for (const json& row : record.throughput_rows) {
      if (row.contains("missing")) continue;
      const double p = Number(row, "stages").value_or(0);
      const double m = Number(row, "micro_batches").value_or(0);
      // kolo's rows by their schedule; a peer's (torch-pipelining, in
      // records since it ran beside kolo) by its name too.
      const std::string framework = Text(row, "framework");
      const bool kolo = framework.empty() || framework == "kolo";
      const std::string schedule =
          kolo ? Text(row, "schedule")
               : framework + " " + Text(row, "schedule");
      const std::string name = fmt::format("p {} {}", p, schedule);
      series[name].name = name;
      if (auto b = Number(row, "bubble"))
        series[name].points.push_back({m, *b});
      // One ideal line per stage count, from kolo's rows.
      const std::string ideal = fmt::format("p {} ideal", p);
      series[ideal].name = ideal;
      series[ideal].dashed = true;
      if (auto b = Number(row, "ideal_bubble"); b && kolo) {
        series[ideal].points.push_back({m, *b});
      }
      const std::optional<double> rss = Number(row, "peak_rss_bytes");
      rows.push_back(
          {{fmt::format("{}", p)},
           {fmt::format("{}", m)},
           Label(schedule),
           {Fixed(Number(row, "images_per_second_median"), 1)},
           {Fixed(Number(row, "step_ms_median"), 1)},
           {Fixed(Number(row, "bubble"), 3)},
           {Fixed(Number(row, "ideal_bubble"), 3)},
           {Fixed(Number(row, "peak_activations"), 0)},
           {Fixed(rss ? std::optional<double>(*rss / (1 << 20)) : std::nullopt,
                  0)}});
    }
    std::vector<ChartSeries> lines;
    for (auto& [name, s] : series) lines.push_back(std::move(s));
    chart.series = Colored(std::move(lines));
    html +=
        Figure(model + ", " + Text(record.config, "dataset") + " 3x" +
                   Fixed(Number(record.config, "image_size"), 0) + ", batch " +
                   Fixed(Number(record.config, "batch_size"), 0) + " (" +
                   record.source + ")",
               RenderLineChart(chart));
    html += HtmlTable(
        {"p", "m", "schedule", "images/s", "step (ms)", "bubble",
         "(p-1)/(m+p-1)", "peak activations (micro-batches)", "peak RSS (MiB)"},
        rows);
    std::vector<std::vector<Cell>> memory;
    auto mib = [](const json& row, const char* key) {
      const std::optional<double> bytes = Number(row, key);
      return Fixed(
          bytes ? std::optional<double>(*bytes / (1 << 20)) : std::nullopt, 1);
    };
    for (const json& row : record.memory_rows) {
      memory.push_back({Label(Text(row, "model")),
                        {Fixed(Number(row, "stages"), 0)},
                        {Fixed(Number(row, "rank"), 0)},
                        {mib(row, "parameter_bytes")},
                        {mib(row, "optimizer_state_bytes")},
                        {Fixed(Number(row, "peak_activations"), 0)},
                        {mib(row, "peak_rss_bytes")},
                        {Fixed(Number(row, "peak_rss_ratio_to_unsplit"), 2)}});
    }
    html += HtmlTable(
        {"model", "stages", "rank", "parameters (MiB)", "optimizer state (MiB)",
         "peak activations (micro-batches)", "peak RSS (MiB)", "RSS ÷ unsplit"},
        memory);
  }
  return html + "</section>\n";
}

std::string Page::CheckpointSection() {
  std::string html = "<section id=\"checkpoint\">\n<h2>Checkpoints</h2>\n";
  if (results_.checkpoint.empty()) {
    return html +
           Paragraph(
               "No checkpoint records in these files (kolo-bench checkpoint "
               "--json writes them).") +
           "</section>\n";
  }
  html += Paragraph(
      "A sharded training state (float32 weights and Adam's two moments) "
      "saved at one number of ranks and loaded, resharded, at another: "
      "kolo's ZeroOptimizer checkpoints against PyTorch Distributed "
      "Checkpoint of an FSDP2 model, medians of the repeats; every load was "
      "checked against its save. The last columns are kolo's time over "
      "torch-dcp's.");
  for (const CheckpointRecord& record : results_.checkpoint) {
    std::vector<std::vector<Cell>> rows;
    for (const json& row : record.rows) {
      if (row.contains("missing")) {
        rows.push_back({Label("-"),
                        Label(Text(row, "variant")),
                        {Text(row, "missing"), false, 8}});
        continue;
      }
      const std::optional<double> bytes = Number(row, "bytes");
      rows.push_back({Label(Text(row, "model")),
                      Label(Text(row, "variant")),
                      {Fixed(Number(row, "save_np"), 0)},
                      {Fixed(Number(row, "load_np"), 0)},
                      {Fixed(Number(row, "save_seconds_median"), 3)},
                      {Fixed(Number(row, "load_seconds_median"), 3)},
                      {Fixed(bytes ? std::optional<double>(*bytes / (1 << 20))
                                   : std::nullopt,
                             1)},
                      Label(Text(row, "torch_version")),
                      {Fixed(Number(row, "save_seconds_ratio_to_dcp"), 2)},
                      {Fixed(Number(row, "load_seconds_ratio_to_dcp"), 2)}});
    }
    html += Paragraph(record.source);
    html += HtmlTable(
        {"model", "variant", "save np", "load np", "save (s)", "load (s)",
         "size (MiB)", "torch", "save ÷ torch-dcp", "load ÷ torch-dcp"},
        rows);
  }
  return html + "</section>\n";
}

std::string Page::EnvironmentSection() {
  std::string html = "<section id=\"environment\">\n<h2>Environment</h2>\n";
  if (results_.environments.empty()) {
    return html + Paragraph("No record says where it was measured.") +
           "</section>\n";
  }
  // The fields kolo-bench writes, by their usual names, then any others a
  // newer kolo-bench adds, in the order first seen. Records from before the
  // peers ran in the project's Python name Debian's python3-torch instead
  // of the peers' interpreter and torch.
  static const std::vector<std::pair<std::string, std::string>> kKnown = {
      {"cpu_model", "CPU"},
      {"cores", "cores"},
      {"kernel", "kernel"},
      {"kolo_commit", "kolo commit"},
      {"libtorch", "LibTorch (kolo)"},
      {"peer_torch", "torch (peers)"},
      {"peer_python", "peers' Python"},
      {"python3_torch", "python3-torch"}};
  std::vector<std::pair<std::string, std::string>> columns;
  for (const auto& known : kKnown) {
    for (const Environment& e : results_.environments) {
      if (e.fields.contains(known.first)) {
        columns.push_back(known);
        break;
      }
    }
  }
  for (const Environment& e : results_.environments) {
    for (const auto& [key, value] : e.fields.items()) {
      auto same = [&](const auto& c) { return c.first == key; };
      if (std::none_of(columns.begin(), columns.end(), same)) {
        columns.push_back({key, key});
      }
    }
  }
  std::vector<std::string> headers = {"files"};
  for (const auto& column : columns) headers.push_back(column.second);
  std::vector<std::vector<Cell>> rows;
  for (const Environment& e : results_.environments) {
    std::string files;
    for (const std::string& source : e.sources) {
      files += (files.empty() ? "" : ", ") + source;
    }
    std::vector<Cell> cells = {Label(files)};
    for (const auto& column : columns) {
      const auto it = e.fields.find(column.first);
      cells.push_back(Label(it == e.fields.end() ? "" : EnvironmentValue(*it)));
    }
    rows.push_back(std::move(cells));
  }
  return html + HtmlTable(headers, rows) + "</section>\n";
}

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; color: #222; background: #fff;
       max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
nav a { margin-right: 1em; }
figure { margin: 1.5em 0 0.5em; }
figcaption { font-weight: 600; margin-bottom: 0.4em; }
svg.chart { display: block; max-width: 100%; height: auto; }
div.table { overflow-x: auto; margin: 0.5em 0 1.5em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; }
th { background: #f4f4f4; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #555; max-width: 60em; }
)";

std::string Page::Render() {
  const std::vector<TrainConfigView> views = GroupTrain(results_);
  std::string files;
  for (const std::string& source : results_.sources) {
    files += (files.empty() ? "" : ", ") + source;
  }
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, "
      "initial-scale=1\">\n<title>kolo-bench report</title>\n<style>";
  html += kStyle;
  html += "</style>\n</head>\n<body>\n<h1>kolo-bench report</h1>\n";
  html += Paragraph(fmt::format(
      "From {}: {}, {}{}{}{}.", files,
      Plural(static_cast<int64_t>(results_.train.size()), "training record",
             "training records"),
      Plural(static_cast<int64_t>(results_.collectives.size()),
             "collectives record", "collectives records"),
      results_.zero.empty()
          ? ""
          : ", " + Plural(static_cast<int64_t>(results_.zero.size()),
                          "ZeRO record", "ZeRO records"),
      results_.pipeline.empty()
          ? ""
          : ", " + Plural(static_cast<int64_t>(results_.pipeline.size()),
                          "pipeline record", "pipeline records"),
      results_.checkpoint.empty()
          ? ""
          : ", " + Plural(static_cast<int64_t>(results_.checkpoint.size()),
                          "checkpoint record", "checkpoint records")));
  html +=
      "<nav><a href=\"#throughput\">throughput</a><a "
      "href=\"#efficiency\">efficiency</a><a href=\"#accuracy\">accuracy</a><a "
      "href=\"#bandwidth\">bus bandwidth</a><a href=\"#zero\">ZeRO</a><a "
      "href=\"#pipeline\">pipeline</a><a "
      "href=\"#checkpoint\">checkpoints</a><a "
      "href=\"#environment\">environment</a></nav>\n";
  html += ThroughputSection(views);
  html += EfficiencySection(views);
  html += AccuracySection(views);
  html += BandwidthSection();
  html += ZeroSection();
  html += PipelineSection();
  html += CheckpointSection();
  html += EnvironmentSection();
  return html + "</body>\n</html>\n";
}

}  // namespace

bool TrainConfig::operator<(const TrainConfig& o) const {
  return std::tie(study, model, dataset, batch_size, scaling, threads) <
         std::tie(o.study, o.model, o.dataset, o.batch_size, o.scaling,
                  o.threads);
}

bool TrainConfig::operator==(const TrainConfig& o) const {
  return std::tie(study, model, dataset, batch_size, scaling, threads) ==
         std::tie(o.study, o.model, o.dataset, o.batch_size, o.scaling,
                  o.threads);
}

std::string TrainConfig::Label() const {
  std::string label = fmt::format("{} on {}", model.empty() ? "?" : model,
                                  dataset.empty() ? "?" : dataset);
  if (batch_size > 0) label += fmt::format(", batch {}", batch_size);
  if (!scaling.empty()) label += fmt::format(", {} scaling", scaling);
  if (threads > 0) {
    label += ", " + Plural(threads, "thread", "threads");
  }
  return study.empty() ? label : study + ": " + label;
}

Status AddResults(const json& value, const std::string& source,
                  Results* results) {
  std::vector<const json*> records;
  if (value.is_array()) {
    for (const json& record : value) records.push_back(&record);
  } else {
    records.push_back(&value);
  }
  int recognised = 0;
  for (const json* record : records) {
    if (IsTrainRecord(*record)) {
      results->train.push_back(ParseTrainRecord(*record, source, results));
      ++recognised;
    } else if (IsCollectivesRecord(*record)) {
      results->collectives.push_back(
          ParseCollectivesRecord(*record, source, results));
      ++recognised;
    } else if (IsZeroRecord(*record)) {
      results->zero.push_back(ParseZeroRecord(*record, source, results));
      ++recognised;
    } else if (IsPipelineRecord(*record)) {
      PipelineRecord out;
      out.source = source;
      out.config = Member(*record, "config");
      out.memory_rows = Member(*record, "memory_rows");
      out.throughput_rows = Member(*record, "throughput_rows");
      if (!out.memory_rows.is_array()) out.memory_rows = json::array();
      if (!out.throughput_rows.is_array()) {
        out.throughput_rows = json::array();
      }
      out.environment = AddEnvironment(*record, source, results);
      results->pipeline.push_back(std::move(out));
      ++recognised;
    } else if (IsCheckpointRecord(*record)) {
      CheckpointRecord out;
      out.source = source;
      out.rows = Member(*record, "rows");
      if (!out.rows.is_array()) out.rows = json::array();
      out.environment = AddEnvironment(*record, source, results);
      results->checkpoint.push_back(std::move(out));
      ++recognised;
    }
  }
  if (recognised == 0) {
    return InvalidArgument(fmt::format(
        "{}: no kolo-bench train, collectives or zero records (nor "
        "pipeline or checkpoint ones) among its {} (the files `kolo-bench "
        "train --json`, `kolo-bench collectives --json` and the others "
        "write)",
        source,
        Plural(static_cast<int64_t>(records.size()), "JSON value",
               "JSON values")));
  }
  results->sources.push_back(source);
  return Status::Ok();
}

StatusOr<Results> ReadResults(const std::vector<std::string>& paths) {
  Results results;
  if (paths.empty()) return InvalidArgument("no result files given");
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (!fs::exists(status)) {
      return NotFound(fmt::format("{}: no such file", path));
    }
    if (!fs::is_regular_file(status)) {
      return InvalidArgument(fmt::format("{}: not a regular file", path));
    }
    std::ifstream file(path, std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    if (!file) {
      return InvalidArgument(
          fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    }
    json parsed;
    try {
      parsed = json::parse(text.str());
    } catch (const json::parse_error& e) {
      return InvalidArgument(fmt::format("{}: not JSON: {}", path, e.what()));
    }
    KOLO_RETURN_IF_ERROR(AddResults(parsed, path, &results));
  }
  return results;
}

bool FrameworkLess(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& name) {
    if (name == kKolo) return 0;
    if (name == "torch-ddp") return 1;
    if (name == "libtorch") return 2;
    return 3;
  };
  if (rank(a) != rank(b)) return rank(a) < rank(b);
  return a < b;
}

std::vector<TrainConfigView> GroupTrain(const Results& results) {
  std::vector<TrainConfigView> views;
  std::vector<std::map<std::string, std::map<int32_t, TrainRow>>> rows;
  for (const TrainRecord& record : results.train) {
    auto it = std::find_if(views.begin(), views.end(), [&](const auto& v) {
      return v.config == record.config;
    });
    if (it == views.end()) {
      views.push_back({record.config, {}, {}, {}});
      rows.emplace_back();
      it = views.end() - 1;
    }
    const size_t index = static_cast<size_t>(it - views.begin());
    for (const TrainRow& row : record.rows) {
      rows[index][row.framework][row.np] = row;  // later records win
    }
    for (const auto& [framework, why] : record.missing) {
      it->missing[framework] = why;
    }
    if (record.environment >= 0 &&
        std::find(it->environments.begin(), it->environments.end(),
                  record.environment) == it->environments.end()) {
      it->environments.push_back(record.environment);
    }
  }
  for (size_t i = 0; i < views.size(); ++i) {
    for (auto& [framework, by_np] : rows[i]) {
      views[i].frameworks.push_back({framework, std::move(by_np)});
      // A framework measured in some record is not missing from the view.
      views[i].missing.erase(framework);
    }
    std::sort(views[i].frameworks.begin(), views[i].frameworks.end(),
              [](const auto& a, const auto& b) {
                return FrameworkLess(a.first, b.first);
              });
  }
  return views;
}

std::vector<ChartSeries> ThroughputSeries(const TrainConfigView& view) {
  std::vector<ChartSeries> out;
  for (const auto& [framework, rows] : view.frameworks) {
    ChartSeries series;
    series.name = framework;
    for (const auto& [np, row] : rows) {
      if (row.images_per_second) {
        series.points.push_back(
            {static_cast<double>(np), *row.images_per_second});
      }
    }
    if (!series.points.empty()) out.push_back(std::move(series));
  }
  return out;
}

std::vector<ChartSeries> EfficiencySeries(const TrainConfigView& view) {
  std::vector<ChartSeries> out;
  for (const auto& [framework, rows] : view.frameworks) {
    const auto base_row = rows.find(1);
    if (base_row == rows.end() || !base_row->second.images_per_second ||
        *base_row->second.images_per_second <= 0) {
      continue;
    }
    const double base = *base_row->second.images_per_second;
    ChartSeries series;
    series.name = framework;
    for (const auto& [np, row] : rows) {
      if (row.images_per_second) {
        series.points.push_back({static_cast<double>(np),
                                 100.0 * *row.images_per_second / (np * base)});
      }
    }
    if (series.points.size() >= 2) out.push_back(std::move(series));
  }
  return out;
}

std::vector<BandwidthView> GroupCollectives(const Results& results) {
  std::vector<BandwidthView> views;
  // Wrong counts by (view, series, size): replaced like the bandwidths, so
  // a re-run that fixed a wrong result clears its warning.
  std::map<std::tuple<size_t, std::string, int64_t>, int64_t> wrong;
  for (const CollectivesRecord& record : results.collectives) {
    std::set<size_t> touched;
    for (const BandwidthRun& run : record.runs) {
      for (const BandwidthRow& row : run.rows) {
        auto view =
            std::find_if(views.begin(), views.end(), [&](const auto& v) {
              return v.collective == row.collective && v.type == row.type &&
                     v.np == record.np;
            });
        if (view == views.end()) {
          BandwidthView fresh;
          fresh.collective = row.collective;
          fresh.type = row.type;
          fresh.np = record.np;
          views.push_back(std::move(fresh));
          view = views.end() - 1;
        }
        auto series =
            std::find_if(view->series.begin(), view->series.end(),
                         [&](const auto& s) { return s.first == run.name; });
        if (series == view->series.end()) {
          view->series.push_back({run.name, {}});
          view->kolo.push_back(run.kolo);
          series = view->series.end() - 1;
        }
        series->second[row.bytes] = row.busbw_gbps;
        const size_t index = static_cast<size_t>(view - views.begin());
        wrong[{index, run.name, row.bytes}] = row.wrong;
        touched.insert(index);
      }
    }
    for (size_t index : touched) {
      for (const auto& [bytes, gbps] : record.memcpy_gbps) {
        views[index].memcpy_gbps[bytes] = gbps;
      }
    }
  }
  for (const auto& [key, count] : wrong) views[std::get<0>(key)].wrong += count;
  // kolo's series first, each group in the order first seen.
  for (BandwidthView& view : views) {
    std::vector<size_t> order(view.series.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return view.kolo[a] && !view.kolo[b];
    });
    BandwidthView sorted = view;
    for (size_t i = 0; i < order.size(); ++i) {
      sorted.series[i] = view.series[order[i]];
      sorted.kolo[i] = view.kolo[order[i]];
    }
    view = std::move(sorted);
  }
  return views;
}

bool ZeroBenchConfig::operator==(const ZeroBenchConfig& o) const {
  return std::tie(optimizer, precision, dataset, image_size, batch_size,
                  threads) == std::tie(o.optimizer, o.precision, o.dataset,
                                       o.image_size, o.batch_size, o.threads);
}

std::string ZeroBenchConfig::Label() const {
  std::string label = fmt::format("{}, {}", optimizer.empty() ? "?" : optimizer,
                                  precision.empty() ? "?" : precision);
  if (dataset == "synthetic" && image_size > 0) {
    label += fmt::format(", synthetic 3x{}x{}", image_size, image_size);
  } else if (!dataset.empty()) {
    label += ", " + dataset;
  }
  if (batch_size > 0) label += fmt::format(", batch {} per worker", batch_size);
  if (threads > 0) label += ", " + Plural(threads, "thread", "threads");
  return label;
}

namespace {

int VariantRank(const std::string& variant) {
  static const char* kOrder[] = {"kolo-ddp",  "kolo-zero1", "kolo-zero2",
                                 "torch-ddp", "torch-zero", "torch-fsdp2"};
  constexpr int kKnown = sizeof(kOrder) / sizeof(kOrder[0]);
  for (int i = 0; i < kKnown; ++i) {
    if (variant == kOrder[i]) return i;
  }
  return kKnown;
}

const ZeroReportRow* KoloDdpRow(const ZeroView& view,
                                const ZeroReportRow& row) {
  for (const ZeroReportRow& r : view.rows) {
    if (r.variant == "kolo-ddp" && r.model == row.model && r.np == row.np) {
      return &r;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<ZeroView> GroupZero(const Results& results) {
  std::vector<ZeroView> views;
  for (const ZeroRecord& record : results.zero) {
    auto view = std::find_if(views.begin(), views.end(), [&](const auto& v) {
      return v.config == record.config;
    });
    if (view == views.end()) {
      views.push_back({record.config, {}, {}, {}});
      view = views.end() - 1;
    }
    for (const ZeroReportRow& row : record.rows) {
      auto same = std::find_if(
          view->rows.begin(), view->rows.end(), [&](const ZeroReportRow& r) {
            return r.model == row.model && r.np == row.np &&
                   r.variant == row.variant;
          });
      if (same == view->rows.end()) {
        view->rows.push_back(row);
      } else {
        *same = row;  // later records win
      }
      view->missing.erase(row.variant);
    }
    for (const auto& [variant, why] : record.missing) {
      const bool measured =
          std::any_of(view->rows.begin(), view->rows.end(),
                      [&](const auto& r) { return r.variant == variant; });
      if (!measured) view->missing[variant] = why;
    }
    if (record.environment >= 0 &&
        std::find(view->environments.begin(), view->environments.end(),
                  record.environment) == view->environments.end()) {
      view->environments.push_back(record.environment);
    }
  }
  for (ZeroView& view : views) {
    std::stable_sort(
        view.rows.begin(), view.rows.end(),
        [](const ZeroReportRow& a, const ZeroReportRow& b) {
          return std::make_tuple(a.model, a.np, VariantRank(a.variant),
                                 a.variant) <
                 std::make_tuple(b.model, b.np, VariantRank(b.variant),
                                 b.variant);
        });
  }
  return views;
}

std::optional<double> ZeroMemoryFraction(const ZeroView& view,
                                         const ZeroReportRow& row) {
  const ZeroReportRow* base = KoloDdpRow(view, row);
  if (base == nullptr) return std::nullopt;
  const std::optional<double> mine = StatePlusGradients(row);
  const std::optional<double> theirs = StatePlusGradients(*base);
  if (!mine || !theirs || *theirs <= 0) return std::nullopt;
  return *mine / *theirs;
}

std::optional<double> ZeroThroughputRatio(const ZeroView& view,
                                          const ZeroReportRow& row) {
  const ZeroReportRow* base = KoloDdpRow(view, row);
  if (base == nullptr || !row.images_per_second || !base->images_per_second ||
      *base->images_per_second <= 0) {
    return std::nullopt;
  }
  return *row.images_per_second / *base->images_per_second;
}

std::string RenderReport(const Results& results) {
  return Page(results).Render();
}

CLI::App* AddReportCommand(CLI::App& app, ReportFlags* flags) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "one self-contained HTML page (inline SVG charts and tables) from the "
      "JSON of kolo-bench train, collectives, zero, pipeline and checkpoint");
  cmd->add_option("results", flags->inputs,
                  "JSON files written by kolo-bench train, collectives, zero, "
                  "pipeline or checkpoint --json")
      ->required();
  cmd->add_option("-o,--output", flags->output, "the HTML page to write")
      ->capture_default_str();
  return cmd;
}

int RunReportCommand(const ReportFlags& flags) {
  auto fail = [](const Status& status) {
    fmt::print(stderr, "kolo-bench report: {}\n", status.message());
    return 1;
  };
  // Writing the page over one of its inputs would lose the results.
  for (const std::string& input : flags.inputs) {
    std::error_code error;
    if (fs::equivalent(input, flags.output, error)) {
      return fail(InvalidArgument(fmt::format(
          "-o {}: is one of the result files; name a new .html file",
          flags.output)));
    }
  }
  StatusOr<Results> results = ReadResults(flags.inputs);
  if (!results.ok()) return fail(results.status());
  Status written =
      WriteFileAtomically(flags.output, RenderReport(*results), "-o");
  if (!written.ok()) return fail(written);
  fmt::print(
      "kolo-bench report: wrote {} ({}, {}{}{} from {})\n", flags.output,
      Plural(static_cast<int64_t>(results->train.size()), "training record",
             "training records"),
      Plural(static_cast<int64_t>(results->collectives.size()),
             "collectives record", "collectives records"),
      results->zero.empty()
          ? ""
          : ", " + Plural(static_cast<int64_t>(results->zero.size()),
                          "ZeRO record", "ZeRO records"),
      results->pipeline.empty()
          ? ""
          : ", " + Plural(static_cast<int64_t>(results->pipeline.size()),
                          "pipeline record", "pipeline records"),
      Plural(static_cast<int64_t>(results->sources.size()), "file", "files"));
  return 0;
}

}  // namespace kolo::bench
