// The arena: series registered once and found again, names checked against
// Prometheus' rules, values read back from the file by another mapping (as
// kolorun reads a rank's), concurrent updates from many threads losing
// nothing, and a file that is not an arena refused with its name.
#include "metrics/arena.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "testing/scratch_dir.h"

namespace kolo {
namespace metrics {
namespace {

using ::testing::HasSubstr;

using kolo::testing::ScratchDir;

TEST(ArenaTest, RegisteringTwiceGivesTheSameSlots) {
  auto arena = Arena::CreateInMemory("j", "h", 0);
  auto a = arena->Register(MetricType::kCounter, "kolo_x_total", "X.",
                           "op=\"a\"", {});
  auto b = arena->Register(MetricType::kCounter, "kolo_x_total", "X.",
                           "op=\"a\"", {});
  auto c = arena->Register(MetricType::kCounter, "kolo_x_total", "X.",
                           "op=\"b\"", {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(ArenaTest, OtherTypeOrBoundsIsAnErrorNamingTheMetric) {
  auto arena = Arena::CreateInMemory("j", "h", 0);
  ASSERT_TRUE(
      arena->Register(MetricType::kCounter, "kolo_x_total", "X.", "", {}).ok());
  auto gauge =
      arena->Register(MetricType::kGauge, "kolo_x_total", "X.", "", {});
  ASSERT_FALSE(gauge.ok());
  EXPECT_THAT(gauge.status().message(), HasSubstr("kolo_x_total"));
  ASSERT_TRUE(
      arena
          ->Register(MetricType::kHistogram, "kolo_h_seconds", "H.", "", {1, 2})
          .ok());
  EXPECT_FALSE(
      arena
          ->Register(MetricType::kHistogram, "kolo_h_seconds", "H.", "", {1, 3})
          .ok());
  EXPECT_FALSE(arena
                   ->Register(MetricType::kHistogram, "kolo_bad_seconds", "H.",
                              "", {2, 1})
                   .ok());
}

TEST(ArenaTest, NamesFollowPrometheusRules) {
  EXPECT_TRUE(ValidateMetricName("kolo_steps_total").ok());
  for (const char* bad : {"", "1abc", "kolo-steps", "kolo steps", "é"}) {
    Status status = ValidateMetricName(bad);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_THAT(status.message(), HasSubstr(std::string("'") + bad + "'"));
  }
  EXPECT_TRUE(ValidateLabelName("m", "op").ok());
  for (const char* bad : {"job", "rank", "host", "le", "__x", "a-b", ""}) {
    Status status = ValidateLabelName("kolo_m", bad);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_THAT(status.message(), HasSubstr("kolo_m"));
  }
}

TEST(ArenaTest, FullArenaIsAnError) {
  auto arena = Arena::CreateInMemory("j", "h", 0);
  for (uint32_t i = 0; i < kDescriptorCapacity; ++i) {
    ASSERT_TRUE(arena
                    ->Register(MetricType::kGauge, "kolo_g", "G.",
                               "i=\"" + std::to_string(i) + "\"", {})
                    .ok());
  }
  auto full =
      arena->Register(MetricType::kGauge, "kolo_g", "G.", "i=\"x\"", {});
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.status().message(), HasSubstr("full"));
}

TEST(ArenaTest, AnotherMappingReadsTheFileWhileItChanges) {
  ScratchDir dir("kolo_arena_test");
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.path() + "/rank-1.arena";
  auto arena = Arena::CreateFile(path, "job1", "host1", 3);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto counter = (*arena)->Register(MetricType::kCounter, "kolo_c_total", "C.",
                                    "op=\"x\"", {});
  auto histogram = (*arena)->Register(MetricType::kHistogram, "kolo_h_seconds",
                                      "H.", "", {0.5, 1});
  ASSERT_TRUE(counter.ok() && histogram.ok());
  (*counter)->store(DoubleToBits(5));
  (*histogram)[0].store(2);
  (*histogram)[2].store(1);
  (*histogram)[3].store(DoubleToBits(7.5));
  (*arena)->SetPhase(RankPhase::kRunning);
  (*arena)->SetRank(4);

  auto snapshot = ReadArenaFile(path);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().message();
  EXPECT_EQ(snapshot->rank, 4);
  EXPECT_EQ(snapshot->job, "job1");
  EXPECT_EQ(snapshot->host, "host1");
  EXPECT_EQ(snapshot->pid, getpid());
  EXPECT_EQ(snapshot->phase, RankPhase::kRunning);
  ASSERT_EQ(snapshot->series.size(), 2u);
  EXPECT_EQ(snapshot->series[0].name, "kolo_c_total");
  EXPECT_EQ(snapshot->series[0].labels, "op=\"x\"");
  EXPECT_EQ(snapshot->series[0].value, 5);
  EXPECT_EQ(snapshot->series[1].bounds, (std::vector<double>{0.5, 1}));
  EXPECT_EQ(snapshot->series[1].bucket_counts,
            (std::vector<uint64_t>{2, 0, 1}));
  EXPECT_EQ(snapshot->series[1].value, 7.5);

  // A value written after the first read shows in the next.
  (*counter)->store(DoubleToBits(6));
  EXPECT_EQ(ReadArenaFile(path)->series[0].value, 6);
  EXPECT_EQ(BitsToDouble((*counter)->load()), 6);
}

TEST(ArenaTest, FileThatIsNotAnArenaIsRefusedByName) {
  ScratchDir dir("kolo_arena_test");
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.path() + "/rank-2.arena";
  {
    std::ofstream out(path);
    out << std::string(ArenaBytes(), 'x');
  }
  auto snapshot = ReadArenaFile(path);
  ASSERT_FALSE(snapshot.ok());
  EXPECT_THAT(snapshot.status().message(), HasSubstr(path));
  auto missing = ReadArenaFile(dir.path() + "/none.arena");
  EXPECT_FALSE(missing.ok());
  // An existing name is never overwritten.
  auto again = Arena::CreateFile(dir.path() + "/a.arena", "j", "h", 0);
  ASSERT_TRUE(again.ok());
  std::ofstream(dir.path() + "/b.arena.tmp") << "x";
  auto clash = Arena::CreateFile(dir.path() + "/b.arena", "j", "h", 0);
  EXPECT_FALSE(clash.ok());
}

// Found by fuzz/metrics_arena_fuzzer.cc: the input
// fuzz/regressions/metrics_arena_fuzzer/first_slot_wraps XORs a valid
// arena's first descriptor's first_slot (0) into 0xFFFFFFFF. first_slot
// plus the series' one slot wraps to 0, passes the bound check, and the
// reader loads slot 0xFFFFFFFF, 32 GiB past the arena (ASan: SEGV in
// ReadArena, arena.cc:373). An arena file is whatever the process that
// owns it, or anyone who can write KOLO_METRICS_DIR, left there; the
// series must be refused by name.
TEST(ArenaTest, ASlotRangeThatWrapsIsRefused) {
  ScratchDir dir("kolo_arena_test");
  const std::string path = dir.path() + "/rank-0.arena";
  {
    auto arena = Arena::CreateFile(path, "job", "host", 0);
    ASSERT_TRUE(arena.ok()) << arena.status().ToString();
    ASSERT_TRUE(
        (*arena)
            ->Register(MetricType::kCounter, "kolo_steps", "Steps.", "", {})
            .ok());
  }
  std::ifstream file(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  // The fuzzer's input: a mode byte (even: XOR onto a valid arena), then
  // the bytes XORed onto the arena's first bytes.
  std::ifstream input(std::string(KOLO_SOURCE_DIR) +
                          "/fuzz/regressions/metrics_arena_fuzzer/"
                          "first_slot_wraps",
                      std::ios::binary);
  const std::string patch((std::istreambuf_iterator<char>(input)),
                          std::istreambuf_iterator<char>());
  ASSERT_GT(patch.size(), 1u);
  for (size_t i = 1; i < patch.size(); ++i) bytes[i - 1] ^= patch[i];
  auto snapshot = ReadArena(bytes.data(), bytes.size(), path);
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(snapshot.status().message(), HasSubstr(path));
}

// Overwrites, in the arena file at `path`, the first_slot or bucket_count
// of the series named `name` (found by its name's bytes), as a faulty or
// hostile process sharing the directory could.
void CorruptDescriptor(const std::string& path, const std::string& name,
                       size_t field_offset, uint32_t value) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)),
                    std::istreambuf_iterator<char>());
  const size_t at = bytes.find(name + '\0');
  ASSERT_NE(at, std::string::npos) << name << " not in " << path;
  const size_t descriptor = at - offsetof(Descriptor, name);
  file.seekp(static_cast<std::streamoff>(descriptor + field_offset));
  file.write(reinterpret_cast<const char*>(&value), sizeof(value));
}

TEST(ArenaTest, CorruptSlotIndicesAreRefusedBeforeAnyRead) {
  ScratchDir dir("kolo_arena_test");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/rank-0.arena";
  {
    auto arena = Arena::CreateFile(path, "j", "h", 0);
    ASSERT_TRUE(arena.ok()) << arena.status().ToString();
    ASSERT_TRUE((*arena)
                    ->Register(MetricType::kCounter, "wraps_total", "", "", {})
                    .ok());
    ASSERT_TRUE(
        (*arena)
            ->Register(MetricType::kHistogram, "past_end", "", "", {1.0, 2.0})
            .ok());
  }
  ASSERT_TRUE(ReadArenaFile(path).ok());
  // 0xffffffff + 1 slot wraps to 0 in 32 bits: it must still be refused.
  CorruptDescriptor(path, "wraps_total", offsetof(Descriptor, first_slot),
                    0xffffffffu);
  auto wrapped = ReadArenaFile(path);
  ASSERT_FALSE(wrapped.ok());
  EXPECT_THAT(wrapped.status().message(), HasSubstr(path));
  EXPECT_THAT(wrapped.status().message(),
              HasSubstr("series 0 is malformed: first_slot 4294967295"));
  CorruptDescriptor(path, "wraps_total", offsetof(Descriptor, first_slot), 0);
  ASSERT_TRUE(ReadArenaFile(path).ok());
  // A histogram whose last slots lie past the arena's end.
  CorruptDescriptor(path, "past_end", offsetof(Descriptor, first_slot),
                    kSlotCapacity - 2);
  EXPECT_THAT(ReadArenaFile(path).status().message(),
              HasSubstr("series 1 is malformed: first_slot 4094 + 4 slots"));
  CorruptDescriptor(path, "past_end", offsetof(Descriptor, first_slot), 1);
  CorruptDescriptor(path, "past_end", offsetof(Descriptor, bucket_count),
                    0xfffffffeu);
  EXPECT_THAT(ReadArenaFile(path).status().message(),
              HasSubstr("series 1 is malformed: bucket_count 4294967294"));
}

}  // namespace
}  // namespace metrics
}  // namespace kolo
