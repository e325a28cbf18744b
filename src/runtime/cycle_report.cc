#include "runtime/cycle_report.h"

#include <algorithm>
#include <cstring>

#include "common/logging.h"

namespace kolo {
namespace {

constexpr uint32_t kFlagJoined = 1;
constexpr uint32_t kFlagShuttingDown = 2;
constexpr uint32_t kFlagStalled = 4;
constexpr uint32_t kFlagDirectReady = 8;
constexpr uint32_t kAllFlags =
    kFlagJoined | kFlagShuttingDown | kFlagStalled | kFlagDirectReady;

// Far more than any tick announces; a larger size is a corrupt record, and
// would otherwise be allocated.
constexpr uint32_t kMaxPayloadBytes = uint32_t{1} << 30;

// The first two words of a record.
struct ReportHeader {
  uint32_t flags = 0;
  uint32_t version = 0;
  uint32_t payload_bytes = 0;
  uint32_t cache_capacity = 0;
};
static_assert(sizeof(ReportHeader) == 16, "a report header is two words");

Status Malformed(int32_t rank, const std::string& what) {
  return Internal("the cycle report of rank " + std::to_string(rank) +
                  " is malformed: " + what);
}

}  // namespace

CycleReportCodec::CycleReportCodec(int32_t world_size, int32_t cache_capacity)
    : world_size_(world_size),
      cache_capacity_(cache_capacity),
      bit_words_((int64_t{cache_capacity} + 63) / 64) {}

void CycleReportCodec::Encode(const CycleReport& report,
                              std::vector<uint64_t>* record,
                              std::string* payload) const {
  payload->clear();
  const uint32_t count = static_cast<uint32_t>(report.specs.size());
  payload->append(reinterpret_cast<const char*>(&count), sizeof(count));
  for (const TensorSpec& spec : report.specs) SerializeSpec(spec, payload);

  ReportHeader header;
  header.flags = (report.joined ? kFlagJoined : 0) |
                 (report.shutting_down ? kFlagShuttingDown : 0) |
                 (report.stalled ? kFlagStalled : 0) |
                 (report.direct_ready ? kFlagDirectReady : 0);
  header.version = kFormatVersion;
  KOLO_CHECK(payload->size() <= kMaxPayloadBytes);
  header.payload_bytes =
      report.specs.empty() ? 0 : static_cast<uint32_t>(payload->size());
  header.cache_capacity = static_cast<uint32_t>(cache_capacity_);
  record->assign(record_words(), 0);
  std::memcpy(record->data(), &header, sizeof(header));
  for (int32_t bit : report.cached_bits) {
    KOLO_CHECK(bit >= 0 && bit < cache_capacity_);
    (*record)[2 + bit / 64] |= uint64_t{1} << (bit % 64);
  }
}

StatusOr<std::vector<int64_t>> CycleReportCodec::DecodeRecords(
    const std::vector<uint64_t>& records,
    std::vector<CycleReport>* reports) const {
  if (static_cast<int64_t>(records.size()) != record_words() * world_size_) {
    // The first rank whose record is incomplete (or, with too many words,
    // the last rank's record is followed by more).
    const int64_t rank = std::min<int64_t>(
        static_cast<int64_t>(records.size()) / record_words(), world_size_ - 1);
    return Internal("cycle reports: expected " + std::to_string(world_size_) +
                    " records of " + std::to_string(record_words()) +
                    " words, got " + std::to_string(records.size()) +
                    " words (at the record of rank " + std::to_string(rank) +
                    ")");
  }
  reports->assign(world_size_, CycleReport());
  std::vector<int64_t> sizes(world_size_, 0);
  bool any_payload = false;
  for (int32_t r = 0; r < world_size_; ++r) {
    const uint64_t* rec = records.data() + r * record_words();
    ReportHeader h;
    std::memcpy(static_cast<void*>(&h), rec, sizeof(h));
    if (h.version != kFormatVersion) {
      return FailedPrecondition(
          "the cycle report of rank " + std::to_string(r) +
          " has format version " + std::to_string(h.version) +
          ", this rank reads version " + std::to_string(kFormatVersion) +
          ": every rank needs the same kolo build");
    }
    if (h.cache_capacity != static_cast<uint32_t>(cache_capacity_)) {
      return FailedPrecondition(
          "the cycle report of rank " + std::to_string(r) +
          " indexes a response cache of " + std::to_string(h.cache_capacity) +
          " entries, this rank's holds " + std::to_string(cache_capacity_) +
          ": every rank needs the same KOLO_CACHE_CAPACITY");
    }
    if ((h.flags & ~kAllFlags) != 0) {
      return Malformed(r, "unknown flags " + std::to_string(h.flags));
    }
    if (h.payload_bytes > kMaxPayloadBytes ||
        (h.payload_bytes != 0 &&
         h.payload_bytes < uint32_t{kMinPayloadBytes})) {
      return Malformed(
          r, "a payload of " + std::to_string(h.payload_bytes) + " bytes");
    }
    CycleReport& report = (*reports)[r];
    report.joined = h.flags & kFlagJoined;
    report.shutting_down = h.flags & kFlagShuttingDown;
    report.stalled = h.flags & kFlagStalled;
    report.direct_ready = h.flags & kFlagDirectReady;
    for (int64_t w = 0; w < bit_words_; ++w) {
      for (uint64_t bits = rec[2 + w]; bits != 0; bits &= bits - 1) {
        const int64_t bit = w * 64 + __builtin_ctzll(bits);
        if (bit >= cache_capacity_) {
          return Malformed(r, "cache bit " + std::to_string(bit) +
                                  " beyond the capacity " +
                                  std::to_string(cache_capacity_));
        }
        report.cached_bits.push_back(static_cast<int32_t>(bit));
      }
    }
    sizes[r] = static_cast<int64_t>(h.payload_bytes);
    any_payload = any_payload || h.payload_bytes > 0;
  }
  if (!any_payload) return std::vector<int64_t>();
  // Every rank sends at least its count.
  for (int64_t& bytes : sizes)
    bytes = std::max<int64_t>(bytes, kMinPayloadBytes);
  return sizes;
}

Status CycleReportCodec::DecodePayloads(
    const std::string& payloads, const std::vector<int64_t>& sizes,
    std::vector<CycleReport>* reports) const {
  if (static_cast<int32_t>(sizes.size()) != world_size_ ||
      static_cast<int32_t>(reports->size()) != world_size_) {
    return Internal("cycle reports: " + std::to_string(sizes.size()) +
                    " payload sizes and " + std::to_string(reports->size()) +
                    " reports for " + std::to_string(world_size_) + " ranks");
  }
  size_t begin = 0;
  for (int32_t r = 0; r < world_size_; ++r) {
    if (sizes[r] < kMinPayloadBytes ||
        static_cast<uint64_t>(sizes[r]) > payloads.size() - begin) {
      return Malformed(r, "its payload of " + std::to_string(sizes[r]) +
                              " bytes does not fit in " +
                              std::to_string(payloads.size() - begin) +
                              " bytes left");
    }
    // This rank's bytes alone, so that a bad spec cannot read the next rank's.
    const std::string mine = payloads.substr(begin, sizes[r]);
    begin += sizes[r];
    uint32_t count = 0;
    std::memcpy(&count, mine.data(), sizeof(count));
    size_t offset = sizeof(count);
    for (uint32_t i = 0; i < count; ++i) {
      StatusOr<TensorSpec> spec = ParseSpec(mine, &offset);
      if (!spec.ok()) {
        return Malformed(r, "spec " + std::to_string(i) + " of " +
                                std::to_string(count) + " does not parse");
      }
      (*reports)[r].specs.push_back(*std::move(spec));
    }
    if (offset != mine.size()) {
      return Malformed(r, std::to_string(mine.size() - offset) +
                              " bytes after its " + std::to_string(count) +
                              " specs");
    }
  }
  if (begin != payloads.size()) {
    return Internal(
        "cycle reports: " + std::to_string(payloads.size() - begin) +
        " bytes after the last rank's payload");
  }
  return Status::Ok();
}

}  // namespace kolo
