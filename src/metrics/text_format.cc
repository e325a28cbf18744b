#include "metrics/text_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

namespace kolo {
namespace metrics {

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  // Whole numbers (counts, bytes) in full while a double holds them
  // exactly; anything else in the fewest digits that read back the same.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    std::snprintf(text, sizeof(text), "%.0f", value);
    return text;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

std::string RankLabels(const std::string& job, int32_t rank,
                       const std::string& host) {
  return "job=\"" + EscapeLabelValue(job) + "\",rank=\"" +
         (rank >= 0 ? std::to_string(rank) : std::string()) + "\",host=\"" +
         EscapeLabelValue(host) + "\"";
}

std::vector<Family> FamiliesOf(const std::vector<ArenaSnapshot>& ranks) {
  std::vector<const ArenaSnapshot*> ordered;
  for (const ArenaSnapshot& rank : ranks) ordered.push_back(&rank);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const ArenaSnapshot* a, const ArenaSnapshot* b) {
                     return a->rank < b->rank;
                   });
  std::vector<Family> families;
  std::map<std::string, size_t> index;
  for (const ArenaSnapshot* rank : ordered) {
    std::string prefix = RankLabels(rank->job, rank->rank, rank->host);
    for (const SeriesSnapshot& s : rank->series) {
      auto [it, inserted] = index.emplace(s.name, families.size());
      if (inserted) {
        Family family;
        family.name = s.name;
        family.help = s.help;
        family.type = s.type;
        family.bounds = s.bounds;
        families.push_back(std::move(family));
      }
      Family& family = families[it->second];
      if (family.type != s.type || family.bounds != s.bounds) continue;
      Series series;
      series.labels = s.labels.empty() ? prefix : prefix + "," + s.labels;
      series.value = s.value;
      series.bucket_counts = s.bucket_counts;
      family.series.push_back(std::move(series));
    }
  }
  std::sort(families.begin(), families.end(),
            [](const Family& a, const Family& b) { return a.name < b.name; });
  return families;
}

void MergeFamilies(std::vector<Family> extra, std::vector<Family>* families) {
  for (Family& family : extra) {
    auto same = std::find_if(
        families->begin(), families->end(),
        [&](const Family& existing) { return existing.name == family.name; });
    if (same == families->end()) {
      families->push_back(std::move(family));
    } else if (same->type == family.type && same->bounds == family.bounds) {
      for (Series& series : family.series) {
        same->series.push_back(std::move(series));
      }
    }
  }
  std::sort(families->begin(), families->end(),
            [](const Family& a, const Family& b) { return a.name < b.name; });
}

std::string RenderText(const std::vector<Family>& families) {
  std::string out;
  for (const Family& family : families) {
    if (family.series.empty()) continue;
    out += "# HELP " + family.name + " " + EscapeHelp(family.help) + "\n";
    out += "# TYPE " + family.name + " " + MetricTypeName(family.type) + "\n";
    for (const Series& series : family.series) {
      if (family.type != MetricType::kHistogram) {
        out += family.name + "{" + series.labels + "} " +
               FormatNumber(series.value) + "\n";
        continue;
      }
      std::string open = family.name + "_bucket{" + series.labels +
                         (series.labels.empty() ? "" : ",") + "le=\"";
      uint64_t cumulative = 0;
      for (size_t b = 0; b < series.bucket_counts.size(); ++b) {
        cumulative += series.bucket_counts[b];
        std::string bound = b < family.bounds.size()
                                ? FormatNumber(family.bounds[b])
                                : std::string("+Inf");
        out += open + bound + "\"} " + std::to_string(cumulative) + "\n";
      }
      out += family.name + "_sum{" + series.labels + "} " +
             FormatNumber(series.value) + "\n";
      out += family.name + "_count{" + series.labels + "} " +
             std::to_string(cumulative) + "\n";
    }
  }
  return out;
}

}  // namespace metrics
}  // namespace kolo
