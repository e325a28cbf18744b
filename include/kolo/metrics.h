// Metrics a Prometheus server can scrape: counters, gauges and histograms
// that kolo keeps for its runtime and training, and that a program can add
// to with its own.
//
//   kolo::StatusOr<kolo::metrics::Counter> batches = kolo::metrics::GetCounter(
//       "myapp_batches_total", "Batches read by the input pipeline.");
//   batches->Increment();
//   kolo::metrics::RecordTrainingStep(/*samples=*/64, /*loss=*/0.42,
//                                     /*step_seconds=*/0.031);
//
// Every series carries the labels job, rank and host, which kolo sets; a
// program adds its own (never a tensor name or a step number: each value of
// a label is a series Prometheus keeps forever). Names follow Prometheus'
// practice: base units in the name (_seconds, _bytes), counters end in
// _total.
//
// Where they are served: `kolorun --metrics-port P` serves the metrics of
// every rank on its host at http://ADDRESS:P/metrics (the text format,
// version 0.0.4), and a live page of the job at http://ADDRESS:P/. A
// program started without kolorun serves its own when KOLO_METRICS_PORT is
// set, from kolo::Init() until kolo::Shutdown() (port P + its local rank,
// on KOLO_METRICS_ADDRESS, loopback by default).
//
// Cost: Get*() registers a series under a lock; keep the handle it returns.
// Updating through a handle is one or two atomic operations on memory that
// kolorun reads from another process: no lock, no allocation, no system
// call.
//
// Thread-safety: every function and handle may be used from any thread.
#ifndef KOLO_METRICS_H_
#define KOLO_METRICS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kolo/status.h"

namespace kolo {
namespace metrics {

// A series' own labels, as (name, value) pairs.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up (reset when the process starts).
class Counter {
 public:
  Counter() = default;  // a counter that counts nowhere
  // `amount` >= 0; a negative amount is ignored.
  void Increment(double amount = 1) const;
  double Value() const;

 private:
  friend struct HandleAccess;
  explicit Counter(std::atomic<uint64_t>* value) : value_(value) {}
  std::atomic<uint64_t>* value_ = nullptr;
};

// A value that goes up and down.
class Gauge {
 public:
  Gauge() = default;
  void Set(double value) const;
  void Add(double amount) const;
  double Value() const;

 private:
  friend struct HandleAccess;
  explicit Gauge(std::atomic<uint64_t>* value) : value_(value) {}
  std::atomic<uint64_t>* value_ = nullptr;
};

// Observations counted into buckets with upper bounds (and +Inf).
class Histogram {
 public:
  Histogram() = default;
  void Observe(double value) const;
  uint64_t Count() const;
  double Sum() const;

 private:
  friend struct HandleAccess;
  Histogram(std::atomic<uint64_t>* slots, const double* bounds, int buckets)
      : slots_(slots), bounds_(bounds), bucket_count_(buckets) {}
  std::atomic<uint64_t>* slots_ = nullptr;
  const double* bounds_ = nullptr;
  int bucket_count_ = 0;
};

// The series `name`{labels} of this process, registered on first use; the
// same name and labels give the same series. kInvalidArgument naming the
// metric for a name or label Prometheus would reject, a reserved label
// (job, rank, host, le), a name already used with another type, or a full
// table (256 series per process).
StatusOr<Counter> GetCounter(const std::string& name, const std::string& help,
                             const Labels& labels = {});
StatusOr<Gauge> GetGauge(const std::string& name, const std::string& help,
                         const Labels& labels = {});
// `bounds`: 1 to 24 increasing upper bounds.
StatusOr<Histogram> GetHistogram(const std::string& name,
                                 const std::string& help,
                                 const std::vector<double>& bounds,
                                 const Labels& labels = {});

// Bounds for durations from 100 us to 10 s, about 2.5x apart.
const std::vector<double>& SecondsBuckets();

// Training progress, as kolo-train reports it and the dashboard and the job
// page show it: kolo_train_steps_total, kolo_train_samples_total,
// kolo_train_loss, kolo_train_step_seconds, kolo_train_learning_rate,
// kolo_train_epoch, kolo_train_test_accuracy_ratio.
void RecordTrainingStep(int64_t samples, double loss, double step_seconds);
void SetLearningRate(double learning_rate);
void SetEpoch(int64_t epoch);
// `ratio` in [0, 1].
void SetTestAccuracy(double ratio);

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_H_
