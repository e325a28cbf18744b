// Prometheus' text exposition format, version 0.0.4, for the metrics of
// several ranks at once.
//
// A family (one metric name) is written once, with its # HELP and # TYPE
// lines, followed by the series of every rank: the ranks' families are
// merged by name, so the rank of a scrape is a label, never a separate
// family, as Prometheus requires. Every series starts with the labels job,
// rank and host (host only, for a host's own series), then its own. A
// histogram writes one _bucket line per bound, cumulative, with `le` last
// and +Inf at the end, then _sum and _count (the +Inf bucket's value).
// Families appear sorted by name, and series in rank order, so two scrapes
// of the same values are the same bytes.
#ifndef KOLO_METRICS_TEXT_FORMAT_H_
#define KOLO_METRICS_TEXT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/arena.h"

namespace kolo {
namespace metrics {

inline constexpr const char* kTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

struct Series {
  std::string labels;  // rendered: `job="a",rank="0",host="h",op="x"`
  double value = 0;    // counter, gauge, or histogram sum
  std::vector<uint64_t> bucket_counts;  // histograms: per bucket, +Inf last
};

struct Family {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<double> bounds;  // histograms
  std::vector<Series> series;
};

// The families of several ranks' arenas, merged by name, each series
// labelled with its rank's job, rank and host. A name whose type or help
// differs between ranks keeps the first rank's; the others' series of it
// are dropped rather than making the scrape invalid.
std::vector<Family> FamiliesOf(const std::vector<ArenaSnapshot>& ranks);

// Adds `extra` to `families` (merging by name) and sorts them.
void MergeFamilies(std::vector<Family> extra, std::vector<Family>* families);

std::string RenderText(const std::vector<Family>& families);

// A number as the text format writes it: the shortest text that reads back
// as the same double; +Inf, -Inf and NaN.
std::string FormatNumber(double value);
// The labels every series of a rank starts with.
std::string RankLabels(const std::string& job, int32_t rank,
                       const std::string& host);

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_TEXT_FORMAT_H_
