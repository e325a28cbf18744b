#include "metrics/exporter.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/enum_names.h"
#include "metrics/job_page.h"
#include "metrics/system.h"
#include "metrics/text_format.h"

namespace kolo {
namespace metrics {
namespace {

using Json = nlohmann::json;

double UnixSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the page needs of one rank's series: sums over their label sets.
struct RankFigures {
  bool has_steps = false;
  double steps = 0;
  double samples = 0;
  double step_count = 0;
  double step_sum = 0;
  std::optional<double> loss;
  std::optional<double> learning_rate;
  std::optional<double> epoch;
  std::optional<double> test_accuracy;
  double collective_seconds = 0;
  double wait_seconds = 0;
  double negotiation_seconds = 0;
  double bytes = 0;
  double stall_warnings = 0;
  double peer_failures = 0;
};

RankFigures FiguresOf(const ArenaSnapshot& rank) {
  RankFigures figures;
  for (const SeriesSnapshot& s : rank.series) {
    double count = 0;
    for (uint64_t c : s.bucket_counts) count += static_cast<double>(c);
    if (s.name == "kolo_train_steps_total") {
      figures.has_steps = true;
      figures.steps = s.value;
    } else if (s.name == "kolo_train_samples_total") {
      figures.samples = s.value;
    } else if (s.name == "kolo_train_step_seconds") {
      figures.step_count = count;
      figures.step_sum = s.value;
    } else if (s.name == "kolo_train_loss") {
      figures.loss = s.value;
    } else if (s.name == "kolo_train_learning_rate") {
      figures.learning_rate = s.value;
    } else if (s.name == "kolo_train_epoch") {
      figures.epoch = s.value;
    } else if (s.name == "kolo_train_test_accuracy_ratio") {
      figures.test_accuracy = s.value;
    } else if (s.name == "kolo_engine_call_seconds") {
      figures.collective_seconds += s.value;
    } else if (s.name == "kolo_wait_for_others_seconds") {
      figures.wait_seconds += s.value;
    } else if (s.name == "kolo_negotiation_seconds") {
      figures.negotiation_seconds += s.value;
    } else if (s.name == "kolo_engine_bytes_total") {
      figures.bytes += s.value;
    } else if (s.name == "kolo_stall_warnings_total") {
      figures.stall_warnings += s.value;
    } else if (s.name == "kolo_peer_failures_total") {
      figures.peer_failures += s.value;
    }
  }
  return figures;
}

Json OrNull(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? Json(*value) : Json(nullptr);
}

Json OrNull(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

const char* PhaseName(RankPhase phase) {
  static constexpr EnumName<RankPhase> kNames[] = {
      {"starting", RankPhase::kStarting},
      {"running", RankPhase::kRunning},
      {"finished", RankPhase::kFinished}};
  return NameOf(kNames, phase);
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

MetricsExporter::MetricsExporter(ExporterOptions options)
    : options_(std::move(options)) {}

MetricsExporter::~MetricsExporter() { Stop(); }

StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    ExporterOptions options) {
  std::unique_ptr<MetricsExporter> exporter(
      new MetricsExporter(std::move(options)));
  MetricsExporter* raw = exporter.get();
  KOLO_ASSIGN_OR_RETURN(
      exporter->server_,
      HttpServer::Start(
          raw->options_.address, raw->options_.port,
          [raw](const std::string& path) { return raw->Handle(path); },
          [raw] { raw->SampleIfDue(); },
          std::min(raw->options_.sample_period,
                   std::chrono::milliseconds(250))));
  return exporter;
}

std::string MetricsExporter::Url() const {
  std::string host = options_.address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port());
}

void MetricsExporter::Stop() {
  if (server_) server_->Stop();
}

void MetricsExporter::RecordExit(pid_t pid, const std::string& how,
                                 bool failed) {
  MutexLock lock(&mutex_);
  exits_[pid] = Exit{how, failed};
}

std::vector<ArenaSnapshot> MetricsExporter::Collect() const {
  std::vector<ArenaSnapshot> ranks;
  if (options_.own_arena != nullptr) {
    ranks.push_back(options_.own_arena->Snapshot());
  }
  if (!options_.arena_directory.empty()) {
    DIR* dir = opendir(options_.arena_directory.c_str());
    if (dir != nullptr) {
      while (dirent* entry = readdir(dir)) {
        std::string name = entry->d_name;
        // Arenas still being built end in .tmp and are skipped.
        if (!EndsWith(name, ".arena")) continue;
        StatusOr<ArenaSnapshot> snapshot =
            ReadArenaFile(options_.arena_directory + "/" + name);
        if (snapshot.ok()) ranks.push_back(*std::move(snapshot));
      }
      closedir(dir);
    }
  }
  // An elastic job's replaced worker may leave an arena with the rank a
  // live one has now: the live (latest) one wins.
  std::sort(ranks.begin(), ranks.end(),
            [](const ArenaSnapshot& a, const ArenaSnapshot& b) {
              return a.rank != b.rank ? a.rank < b.rank
                                      : a.start_unix_ms > b.start_unix_ms;
            });
  ranks.erase(std::unique(ranks.begin(), ranks.end(),
                          [](const ArenaSnapshot& a, const ArenaSnapshot& b) {
                            return a.rank == b.rank && a.rank >= 0;
                          }),
              ranks.end());
  return ranks;
}

void MetricsExporter::SampleIfDue() {
  auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(&mutex_);
    if (now < next_sample_) return;
    next_sample_ = now + options_.sample_period;
  }
  std::vector<ArenaSnapshot> ranks = Collect();
  double time = UnixSeconds();
  MutexLock lock(&mutex_);
  double elapsed = history_times_.empty() ? 0 : time - history_times_.back();
  history_times_.push_back(time);
  for (const ArenaSnapshot& rank : ranks) {
    RankFigures figures = FiguresOf(rank);
    auto [it, inserted] = history_.emplace(rank.rank, RankHistory{});
    RankHistory& history = it->second;
    if (inserted) {
      // A rank that appears late has no points before it.
      size_t earlier = history_times_.size() - 1;
      history.samples_per_second.assign(earlier, std::nan(""));
      history.loss.assign(earlier, std::nan(""));
    }
    double rate = std::nan("");
    if (history.last_samples >= 0 && elapsed > 0) {
      rate = (figures.samples - history.last_samples) / elapsed;
    }
    history.last_samples = figures.samples;
    if (figures.step_count > history.last_step_count) {
      history.recent_step_seconds =
          (figures.step_sum - history.last_step_sum) /
          (figures.step_count - history.last_step_count);
    }
    history.last_step_count = figures.step_count;
    history.last_step_sum = figures.step_sum;
    history.samples_per_second.push_back(rate);
    history.loss.push_back(figures.loss.value_or(std::nan("")));
  }
  // Ranks that vanished keep their place with gaps.
  for (auto& [rank, history] : history_) {
    while (history.loss.size() < history_times_.size()) {
      history.loss.push_back(std::nan(""));
      history.samples_per_second.push_back(std::nan(""));
    }
  }
  while (history_times_.size() > options_.history_points) {
    history_times_.pop_front();
    for (auto& [rank, history] : history_) {
      history.loss.pop_front();
      history.samples_per_second.pop_front();
    }
  }
}

std::string MetricsExporter::MetricsText() {
  return MetricsTextLocked(Collect());
}

std::string MetricsExporter::MetricsTextLocked(
    const std::vector<ArenaSnapshot>& ranks) {
  std::vector<Family> families = FamiliesOf(ranks);
  MergeFamilies(ProcessFamilies(ranks), &families);
  MergeFamilies(HostFamilies(options_.job, options_.host), &families);
  return RenderText(families);
}

std::string MetricsExporter::JobJson() {
  std::vector<ArenaSnapshot> ranks = Collect();
  MutexLock lock(&mutex_);
  return JobJsonLocked(ranks);
}

std::string MetricsExporter::JobJsonLocked(
    const std::vector<ArenaSnapshot>& ranks) {
  Json job;
  job["job"] = options_.job;
  job["host"] = options_.host;
  job["time"] = UnixSeconds();
  int64_t started_ms = std::numeric_limits<int64_t>::max();
  for (const ArenaSnapshot& rank : ranks) {
    started_ms = std::min(started_ms, rank.start_unix_ms);
  }
  job["started"] = ranks.empty() ? Json(nullptr)
                                 : Json(static_cast<double>(started_ms) / 1e3);
  job["sample_period_s"] =
      std::chrono::duration<double>(options_.sample_period).count();
  Json rank_list = Json::array();
  double stalls = 0;
  double failures = 0;
  std::optional<int32_t> slowest;
  double slowest_seconds = -1;
  int reporting = 0;
  for (const ArenaSnapshot& rank : ranks) {
    RankFigures figures = FiguresOf(rank);
    Json entry;
    entry["rank"] = rank.rank;
    entry["host"] = rank.host;
    entry["pid"] = rank.pid;
    std::optional<ProcessFigures> process = ReadProcessFigures(rank.pid);
    auto exit = exits_.find(rank.pid);
    if (exit != exits_.end()) {
      entry["state"] = exit->second.how;
      entry["failed"] = exit->second.failed;
    } else if (!process && rank.phase != RankPhase::kFinished) {
      // Ended without kolo::Shutdown() and without a launcher to say how
      // (an elastic worker, a program serving its own metrics).
      entry["state"] = "gone";
      entry["failed"] = true;
    } else {
      entry["state"] = PhaseName(rank.phase);
      entry["failed"] = false;
    }
    entry["epoch"] = OrNull(figures.epoch);
    entry["steps"] = figures.steps;
    entry["samples"] = figures.samples;
    entry["loss"] = OrNull(figures.loss);
    entry["learning_rate"] = OrNull(figures.learning_rate);
    entry["test_accuracy"] = OrNull(figures.test_accuracy);
    Json rate = nullptr;
    Json step_seconds = nullptr;
    auto history = history_.find(rank.rank);
    if (history != history_.end()) {
      if (!history->second.samples_per_second.empty()) {
        rate = OrNull(history->second.samples_per_second.back());
      }
      if (history->second.recent_step_seconds >= 0) {
        step_seconds = history->second.recent_step_seconds;
        ++reporting;
        if (history->second.recent_step_seconds > slowest_seconds) {
          slowest_seconds = history->second.recent_step_seconds;
          slowest = rank.rank;
        }
      }
    }
    entry["samples_per_second"] = rate;
    entry["step_seconds"] = step_seconds;
    entry["collective_seconds"] = figures.collective_seconds;
    entry["wait_seconds"] = figures.wait_seconds;
    entry["negotiation_seconds"] = figures.negotiation_seconds;
    entry["bytes"] = figures.bytes;
    entry["stall_warnings"] = figures.stall_warnings;
    entry["peer_failures"] = figures.peer_failures;
    stalls += figures.stall_warnings;
    failures += figures.peer_failures;
    entry["cpu_seconds"] = process ? Json(process->cpu_seconds) : Json(nullptr);
    entry["resident_bytes"] =
        process ? Json(process->resident_bytes) : Json(nullptr);
    entry["threads"] = process ? Json(process->threads) : Json(nullptr);
    rank_list.push_back(std::move(entry));
  }
  job["ranks"] = std::move(rank_list);
  job["slowest_rank"] =
      reporting >= 2 && slowest ? Json(*slowest) : Json(nullptr);
  job["stall_warnings"] = stalls;
  job["peer_failures"] = failures;
  Json history;
  history["time"] =
      Json(std::vector<double>(history_times_.begin(), history_times_.end()));
  Json per_rank = Json::object();
  for (const auto& [rank, series] : history_) {
    Json rates = Json::array();
    Json losses = Json::array();
    for (double v : series.samples_per_second) rates.push_back(OrNull(v));
    for (double v : series.loss) losses.push_back(OrNull(v));
    per_rank[std::to_string(rank)] = {{"samples_per_second", rates},
                                      {"loss", losses}};
  }
  history["ranks"] = std::move(per_rank);
  job["history"] = std::move(history);
  return job.dump();
}

HttpResponse MetricsExporter::Handle(const std::string& path) {
  if (path == "/metrics") {
    return {200, kTextContentType, MetricsText()};
  }
  if (path == "/api/job") {
    return {200, "application/json", JobJson()};
  }
  if (path == "/" || path == "/index.html") {
    return {200, "text/html; charset=utf-8", JobPageHtml()};
  }
  return {404, "text/plain; charset=utf-8",
          "not found: " + path + " (try /metrics or /)\n"};
}

}  // namespace metrics
}  // namespace kolo
