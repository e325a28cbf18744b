// Tests the cycle report's wire format: what ranks encode decodes to the
// same reports, and a bad record or payload is an error naming its rank.
#include "runtime/cycle_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace kolo {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int32_t kWorldSize = 3;
constexpr int32_t kCapacity = 100;  // two bit words, the second partly used

TensorSpec Spec(const std::string& name, int64_t count) {
  TensorSpec spec = MakeSpec(Collective::kAllreduce, DataType::kFloat32, count);
  spec.name = name;
  return spec;
}

// Three ranks that use every field: flags, bits in both words, specs.
std::vector<CycleReport> SampleReports() {
  std::vector<CycleReport> reports(kWorldSize);
  reports[0].joined = true;
  reports[0].cached_bits = {0, 63};
  reports[1].shutting_down = true;
  reports[1].direct_ready = true;
  reports[1].specs.push_back(Spec("fc.weight", 10));
  TensorSpec alltoall = MakeSpec(Collective::kAlltoall, DataType::kInt64, 6);
  alltoall.name = "tokens";
  alltoall.splits = {1, 2, 3};
  alltoall.expected = {3, 2, 1};
  reports[1].specs.push_back(alltoall);
  reports[2].stalled = true;
  reports[2].cached_bits = {64, 99};
  TensorSpec member = Spec("g.0", 7);
  member.group = "g";
  member.group_size = 2;
  reports[2].specs.push_back(member);
  return reports;
}

// What the two allgathers would deliver to every rank.
struct Wire {
  std::vector<uint64_t> records;
  std::vector<std::string> payloads;  // per rank, as encoded
};

Wire EncodeAll(const CycleReportCodec& codec,
               const std::vector<CycleReport>& reports) {
  Wire wire;
  for (const CycleReport& report : reports) {
    std::vector<uint64_t> record;
    std::string payload;
    codec.Encode(report, &record, &payload);
    EXPECT_EQ(static_cast<int64_t>(record.size()), codec.record_words());
    wire.records.insert(wire.records.end(), record.begin(), record.end());
    wire.payloads.push_back(payload);
  }
  return wire;
}

std::string Concatenate(const std::vector<std::string>& parts) {
  std::string all;
  for (const std::string& part : parts) all += part;
  return all;
}

TEST(CycleReportTest, RoundTrip) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  const std::vector<CycleReport> sent = SampleReports();
  const Wire wire = EncodeAll(codec, sent);
  std::vector<CycleReport> got;
  StatusOr<std::vector<int64_t>> sizes =
      codec.DecodeRecords(wire.records, &got);
  ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
  // Rank 0 has no spec and sends just its count.
  ASSERT_EQ(sizes->size(), 3u);
  EXPECT_EQ((*sizes)[0], CycleReportCodec::kMinPayloadBytes);
  for (int32_t r = 0; r < kWorldSize; ++r) {
    EXPECT_EQ((*sizes)[r], static_cast<int64_t>(wire.payloads[r].size()))
        << "rank " << r;
  }
  ASSERT_TRUE(
      codec.DecodePayloads(Concatenate(wire.payloads), *sizes, &got).ok());
  ASSERT_EQ(got.size(), sent.size());
  for (int32_t r = 0; r < kWorldSize; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(got[r].joined, sent[r].joined);
    EXPECT_EQ(got[r].shutting_down, sent[r].shutting_down);
    EXPECT_EQ(got[r].stalled, sent[r].stalled);
    EXPECT_EQ(got[r].direct_ready, sent[r].direct_ready);
    EXPECT_EQ(got[r].cached_bits, sent[r].cached_bits);
    EXPECT_EQ(got[r].specs, sent[r].specs);
  }
}

TEST(CycleReportTest, NoSecondExchangeWhenNoRankHasASpec) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  std::vector<CycleReport> sent(kWorldSize);
  sent[1].cached_bits = {5};
  std::vector<CycleReport> got;
  StatusOr<std::vector<int64_t>> sizes =
      codec.DecodeRecords(EncodeAll(codec, sent).records, &got);
  ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
  EXPECT_THAT(*sizes, IsEmpty());
  EXPECT_EQ(got[1].cached_bits, std::vector<int32_t>{5});
}

TEST(CycleReportTest, EveryTruncatedPayloadIsAnErrorNamingItsRank) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  const Wire wire = EncodeAll(codec, SampleReports());
  const std::string& full = wire.payloads[1];
  for (size_t cut = 0; cut < full.size(); ++cut) {
    SCOPED_TRACE("rank 1's payload cut to " + std::to_string(cut) + " bytes");
    std::vector<CycleReport> got;
    StatusOr<std::vector<int64_t>> sizes =
        codec.DecodeRecords(wire.records, &got);
    ASSERT_TRUE(sizes.ok());
    (*sizes)[1] = static_cast<int64_t>(cut);
    const Status s = codec.DecodePayloads(
        wire.payloads[0] + full.substr(0, cut) + wire.payloads[2], *sizes,
        &got);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_THAT(s.message(), HasSubstr("cycle report of rank 1 is malformed"));
  }
}

TEST(CycleReportTest, PayloadThatIsNotSpecsIsAnErrorNamingItsRank) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  const Wire wire = EncodeAll(codec, SampleReports());
  std::vector<CycleReport> got;
  StatusOr<std::vector<int64_t>> sizes =
      codec.DecodeRecords(wire.records, &got);
  ASSERT_TRUE(sizes.ok());

  // A count far beyond what the bytes hold.
  std::string lying = wire.payloads[2];
  const uint32_t count = 0xffffffffu;
  std::memcpy(&lying[0], &count, sizeof(count));
  Status s = codec.DecodePayloads(wire.payloads[0] + wire.payloads[1] + lying,
                                  *sizes, &got);
  EXPECT_THAT(s.message(), HasSubstr("cycle report of rank 2 is malformed"));

  // Bytes after the last spec.
  std::vector<int64_t> longer = *sizes;
  ++longer[0];
  s = codec.DecodePayloads(
      wire.payloads[0] + "x" + wire.payloads[1] + wire.payloads[2], longer,
      &got);
  EXPECT_THAT(s.message(),
              HasSubstr("cycle report of rank 0 is malformed: 1 bytes after"));

  // Fewer bytes than the sizes promise.
  s = codec.DecodePayloads(wire.payloads[0] + wire.payloads[1], *sizes, &got);
  EXPECT_THAT(s.message(), HasSubstr("cycle report of rank 2 is malformed"));
}

TEST(CycleReportTest, BadRecordIsAnErrorNamingItsRank) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  const Wire wire = EncodeAll(codec, SampleReports());
  const int64_t words = codec.record_words();
  std::vector<CycleReport> got;

  std::vector<uint64_t> records = wire.records;
  records[2 * words] |= 64;  // a flag no version defines
  EXPECT_THAT(codec.DecodeRecords(records, &got).status().message(),
              HasSubstr("cycle report of rank 2 is malformed: unknown flags"));

  records = wire.records;
  records[1 * words + 2 + 1] |= uint64_t{1}
                                << 40;  // bit 104 of a 100-entry cache
  EXPECT_THAT(
      codec.DecodeRecords(records, &got).status().message(),
      HasSubstr("cycle report of rank 1 is malformed: cache bit 104 beyond the "
                "capacity 100"));

  records = wire.records;
  records[0 * words + 1] = (records[0 * words + 1] & ~uint64_t{0xffffffff}) |
                           (uint64_t{1} << 31);  // a 2 GiB payload
  EXPECT_THAT(codec.DecodeRecords(records, &got).status().message(),
              HasSubstr("cycle report of rank 0 is malformed: a payload of"));

  records = wire.records;
  records.pop_back();  // truncated
  const Status s = codec.DecodeRecords(records, &got).status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("expected 3 records of 4 words, got 11 "
                                     "words (at the record of rank 2)"));
}

// Rank 1's record as made by `other`, cut or padded to this codec's size
// (what a receiver holds); ranks 0 and 2 are this codec's.
std::vector<uint64_t> WithRank1From(const CycleReportCodec& mine,
                                    const CycleReportCodec& other) {
  const std::vector<CycleReport> reports = SampleReports();
  std::vector<uint64_t> records;
  for (int32_t r = 0; r < kWorldSize; ++r) {
    std::vector<uint64_t> record;
    std::string payload;
    (r == 1 ? other : mine).Encode(reports[r], &record, &payload);
    record.resize(mine.record_words());
    records.insert(records.end(), record.begin(), record.end());
  }
  return records;
}

TEST(CycleReportTest, ReportForAnotherCacheCapacityIsRejectedNamingItsRank) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  for (int32_t other_capacity : {0, 64, 1024}) {
    SCOPED_TRACE("rank 1's capacity " + std::to_string(other_capacity));
    const CycleReportCodec other(kWorldSize, other_capacity);
    std::vector<CycleReport> got;
    const Status s =
        codec.DecodeRecords(WithRank1From(codec, other), &got).status();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(
        s.message(),
        HasSubstr("the cycle report of rank 1 indexes a response cache of " +
                  std::to_string(other_capacity) +
                  " entries, this rank's holds 100: every rank needs the same "
                  "KOLO_CACHE_CAPACITY"));
  }
}

TEST(CycleReportTest, ReportOfAnotherFormatVersionIsRejectedNamingItsRank) {
  const CycleReportCodec codec(kWorldSize, kCapacity);
  std::vector<uint64_t> records = EncodeAll(codec, SampleReports()).records;
  // The version is word 0's upper half.
  const uint64_t next = CycleReportCodec::kFormatVersion + 1;
  records[2 * codec.record_words()] =
      (records[2 * codec.record_words()] & uint64_t{0xffffffff}) | (next << 32);
  std::vector<CycleReport> got;
  const Status s = codec.DecodeRecords(records, &got).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("the cycle report of rank 2 has format version 2, this "
                        "rank reads version 1: every rank needs the same kolo "
                        "build"));
}

}  // namespace
}  // namespace kolo
