// kolo/metrics.h: handles over the process's arena.
#include <unistd.h>

#include <cstring>
#include <memory>

#include "common/config.h"
#include "common/logging.h"
#include "kolo/metrics.h"
#include "metrics/arena.h"
#include "metrics/process_arena.h"

namespace kolo {
namespace metrics {

struct HandleAccess {
  static Counter MakeCounter(std::atomic<uint64_t>* slot) {
    return Counter(slot);
  }
  static Gauge MakeGauge(std::atomic<uint64_t>* slot) { return Gauge(slot); }
  static Histogram MakeHistogram(std::atomic<uint64_t>* slots,
                                 const double* bounds, int buckets) {
    return Histogram(slots, bounds, buckets);
  }
};

namespace {

// Adds to a double kept as bits. Most series have one writer (the runtime's
// thread, the training loop), so the first exchange succeeds.
void AddToDouble(std::atomic<uint64_t>* slot, double amount) {
  uint64_t old_bits = slot->load(std::memory_order_relaxed);
  while (!slot->compare_exchange_weak(
      old_bits, DoubleToBits(BitsToDouble(old_bits) + amount),
      std::memory_order_relaxed, std::memory_order_relaxed)) {
  }
}

std::unique_ptr<Arena> MakeProcessArena() {
  StatusOr<MetricsEnvironment> env =
      ReadMetricsEnvironment(ProcessEnvironment());
  MetricsEnvironment settings = env.ok() ? *env : MetricsEnvironment{};
  if (!settings.directory.empty()) {
    std::string path =
        settings.directory + "/rank-" + std::to_string(getpid()) + ".arena";
    StatusOr<std::unique_ptr<Arena>> arena =
        Arena::CreateFile(path, settings.job, settings.host, settings.rank);
    if (arena.ok()) return *std::move(arena);
    KOLO_LOG(WARNING) << arena.status().message()
                      << "; this process's metrics will not be served";
  }
  return Arena::CreateInMemory(settings.job, settings.host, settings.rank);
}

std::string RenderLabels(const std::string& metric, const Labels& labels,
                         Status* status) {
  std::string text;
  for (const auto& [name, value] : labels) {
    Status valid = ValidateLabelName(metric, name);
    if (!valid.ok()) {
      *status = valid;
      return "";
    }
    if (!text.empty()) text += ',';
    text += name + "=\"" + EscapeLabelValue(value) + "\"";
  }
  return text;
}

StatusOr<std::atomic<uint64_t>*> RegisterSeries(
    MetricType type, const std::string& name, const std::string& help,
    const std::vector<double>& bounds, const Labels& labels) {
  Status status;
  std::string rendered = RenderLabels(name, labels, &status);
  KOLO_RETURN_IF_ERROR(status);
  return ProcessArena().Register(type, name, help, rendered, bounds);
}

}  // namespace

void Counter::Increment(double amount) const {
  if (value_ == nullptr || !(amount > 0)) return;
  AddToDouble(value_, amount);
}

double Counter::Value() const {
  return value_ ? BitsToDouble(value_->load(std::memory_order_relaxed)) : 0;
}

void Gauge::Set(double value) const {
  if (value_) value_->store(DoubleToBits(value), std::memory_order_relaxed);
}

void Gauge::Add(double amount) const {
  if (value_) AddToDouble(value_, amount);
}

double Gauge::Value() const {
  return value_ ? BitsToDouble(value_->load(std::memory_order_relaxed)) : 0;
}

void Histogram::Observe(double value) const {
  if (slots_ == nullptr) return;
  int bucket = 0;
  while (bucket < bucket_count_ && value > bounds_[bucket]) ++bucket;
  slots_[bucket].fetch_add(1, std::memory_order_relaxed);
  AddToDouble(&slots_[bucket_count_ + 1], value);
}

uint64_t Histogram::Count() const {
  uint64_t count = 0;
  for (int b = 0; slots_ && b <= bucket_count_; ++b) {
    count += slots_[b].load(std::memory_order_relaxed);
  }
  return count;
}

double Histogram::Sum() const {
  return slots_ ? BitsToDouble(
                      slots_[bucket_count_ + 1].load(std::memory_order_relaxed))
                : 0;
}

namespace {

// A counter's or gauge's handle (`make` builds it) on the one slot of the
// series, registered as `type`.
template <typename Handle>
StatusOr<Handle> GetScalar(MetricType type, const std::string& name,
                           const std::string& help, const Labels& labels,
                           Handle (*make)(std::atomic<uint64_t>*)) {
  KOLO_ASSIGN_OR_RETURN(std::atomic<uint64_t> * slot,
                        RegisterSeries(type, name, help, {}, labels));
  return make(slot);
}

}  // namespace

StatusOr<Counter> GetCounter(const std::string& name, const std::string& help,
                             const Labels& labels) {
  return GetScalar(MetricType::kCounter, name, help, labels,
                   &HandleAccess::MakeCounter);
}

StatusOr<Gauge> GetGauge(const std::string& name, const std::string& help,
                         const Labels& labels) {
  return GetScalar(MetricType::kGauge, name, help, labels,
                   &HandleAccess::MakeGauge);
}

StatusOr<Histogram> GetHistogram(const std::string& name,
                                 const std::string& help,
                                 const std::vector<double>& bounds,
                                 const Labels& labels) {
  KOLO_ASSIGN_OR_RETURN(
      std::atomic<uint64_t> * slots,
      RegisterSeries(MetricType::kHistogram, name, help, bounds, labels));
  return HandleAccess::MakeHistogram(slots, ProcessArena().BoundsOf(slots),
                                     static_cast<int>(bounds.size()));
}

const std::vector<double>& SecondsBuckets() {
  static const std::vector<double> bounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return bounds;
}

Arena& ProcessArena() {
  // Never destroyed: handles may be used by threads that outlive main's
  // static destructors.
  static Arena* const arena = MakeProcessArena().release();
  return *arena;
}

void SetProcessRank(int32_t rank) { ProcessArena().SetRank(rank); }
void SetProcessPhase(RankPhase phase) { ProcessArena().SetPhase(phase); }

Counter KoloCounter(const std::string& name, const std::string& help,
                    const Labels& labels) {
  StatusOr<Counter> counter = GetCounter(name, help, labels);
  KOLO_CHECK(counter.ok());
  return *counter;
}

Gauge KoloGauge(const std::string& name, const std::string& help,
                const Labels& labels) {
  StatusOr<Gauge> gauge = GetGauge(name, help, labels);
  KOLO_CHECK(gauge.ok());
  return *gauge;
}

Histogram KoloHistogram(const std::string& name, const std::string& help,
                        const Labels& labels) {
  StatusOr<Histogram> histogram =
      GetHistogram(name, help, SecondsBuckets(), labels);
  KOLO_CHECK(histogram.ok());
  return *histogram;
}

namespace {

// Each training series is registered at its first use, so that one never
// set (no evaluation yet) is absent rather than a misleading zero.
struct StepSeries {
  Counter steps = KoloCounter("kolo_train_steps_total",
                              "Optimizer steps taken by this rank.");
  Counter samples = KoloCounter("kolo_train_samples_total",
                                "Training samples this rank has processed.");
  Gauge loss = KoloGauge("kolo_train_loss", "Loss of the latest step.");
  Histogram step_seconds = KoloHistogram(
      "kolo_train_step_seconds",
      "Wall time of one training step: forward, backward and optimizer.");
};

}  // namespace

void RecordTrainingStep(int64_t samples, double loss, double step_seconds) {
  static const StepSeries* const series = new StepSeries();
  series->steps.Increment();
  series->samples.Increment(static_cast<double>(samples));
  series->loss.Set(loss);
  series->step_seconds.Observe(step_seconds);
}

void SetLearningRate(double learning_rate) {
  static const Gauge gauge = KoloGauge("kolo_train_learning_rate",
                                       "Learning rate of the latest step.");
  gauge.Set(learning_rate);
}

void SetEpoch(int64_t epoch) {
  static const Gauge gauge =
      KoloGauge("kolo_train_epoch", "The epoch being trained, from 1.");
  gauge.Set(static_cast<double>(epoch));
}

void SetTestAccuracy(double ratio) {
  static const Gauge gauge = KoloGauge(
      "kolo_train_test_accuracy_ratio",
      "Accuracy on the test set, 0 to 1, after the latest evaluation.");
  gauge.Set(ratio);
}

}  // namespace metrics
}  // namespace kolo
