// kolo/metrics.h: handles registered once, updated from many threads at once
// without losing an update, histograms counting each observation in the
// bucket whose bound first holds it, and bad names refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kolo/metrics.h"
#include "metrics/process_arena.h"

namespace kolo {
namespace metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, ConcurrentUpdatesLoseNothing) {
  auto counter = GetCounter("test_concurrent_total", "Increments.");
  auto gauge = GetGauge("test_concurrent_gauge", "Adds.");
  auto histogram =
      GetHistogram("test_concurrent_seconds", "Observations.", {1, 2, 3});
  ASSERT_TRUE(counter.ok() && gauge.ok() && histogram.ok());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        counter->Increment();
        gauge->Add(t % 2 == 0 ? 2 : -1);
        histogram->Observe(i % 4);  // 0 and 1 in le=1, 2, 3 in le=3
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter->Value(), kThreads * kPerThread);
  EXPECT_EQ(gauge->Value(), (kThreads / 2) * kPerThread);
  EXPECT_EQ(histogram->Count(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(histogram->Sum(), kThreads * (kPerThread / 4) * (0 + 1 + 2 + 3));
}

TEST(MetricsTest, SameNameAndLabelsIsTheSameSeries) {
  auto a = GetCounter("test_same_total", "Same.", {{"op", "x"}});
  auto b = GetCounter("test_same_total", "Same.", {{"op", "x"}});
  auto c = GetCounter("test_same_total", "Same.", {{"op", "y"}});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  a->Increment(2);
  b->Increment(3);
  EXPECT_EQ(a->Value(), 5);
  EXPECT_EQ(c->Value(), 0);
  c->Increment(-4);  // ignored: counters only go up
  EXPECT_EQ(c->Value(), 0);
}

TEST(MetricsTest, HistogramBucketsAreUpperBoundsInclusive) {
  auto h = GetHistogram("test_bounds_seconds", "Bounds.", {0.1, 1});
  ASSERT_TRUE(h.ok());
  for (double v : {0.05, 0.1, 0.5, 1.0, 7.0}) h->Observe(v);
  ArenaSnapshot snapshot = ProcessArena().Snapshot();
  for (const SeriesSnapshot& s : snapshot.series) {
    if (s.name != "test_bounds_seconds") continue;
    EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{2, 2, 1}));
    EXPECT_DOUBLE_EQ(s.value, 8.65);
    return;
  }
  FAIL() << "test_bounds_seconds not in the arena";
}

TEST(MetricsTest, BadNamesAndReservedLabelsAreRefused) {
  auto bad = GetCounter("test-dash_total", "Bad.");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("test-dash_total"));
  auto reserved = GetGauge("test_reserved", "Reserved.", {{"rank", "0"}});
  ASSERT_FALSE(reserved.ok());
  EXPECT_THAT(reserved.status().message(), HasSubstr("reserved"));
  ASSERT_TRUE(GetCounter("test_typed_total", "A counter.").ok());
  auto type = GetGauge("test_typed_total", "Now a gauge.");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("test_typed_total"));
  auto no_bounds = GetHistogram("test_empty_seconds", "No bounds.", {});
  EXPECT_FALSE(no_bounds.ok());
}

TEST(MetricsTest, TrainingSeriesAppearWhenFirstSet) {
  auto has = [](const std::string& name) {
    for (const SeriesSnapshot& s : ProcessArena().Snapshot().series) {
      if (s.name == name) return true;
    }
    return false;
  };
  EXPECT_FALSE(has("kolo_train_test_accuracy_ratio"));
  RecordTrainingStep(32, 0.5, 0.02);
  RecordTrainingStep(32, 0.25, 0.04);
  SetTestAccuracy(0.875);
  std::map<std::string, double> values;
  for (const SeriesSnapshot& s : ProcessArena().Snapshot().series) {
    values[s.name] = s.value;
  }
  EXPECT_EQ(values["kolo_train_steps_total"], 2);
  EXPECT_EQ(values["kolo_train_samples_total"], 64);
  EXPECT_EQ(values["kolo_train_loss"], 0.25);
  EXPECT_DOUBLE_EQ(values["kolo_train_step_seconds"], 0.06);
  EXPECT_EQ(values["kolo_train_test_accuracy_ratio"], 0.875);
  EXPECT_TRUE(has("kolo_train_test_accuracy_ratio"));
}

}  // namespace
}  // namespace metrics
}  // namespace kolo
