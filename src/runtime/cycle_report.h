// CycleReport: what one rank says in one tick of the negotiation, and the
// wire format that carries it to every rank.
//
// The format. Every tick each rank contributes one fixed-size record,
//   word 0: flags (joined 1, shutting down 2, stalled 4, direct ready 8),
//           32 bits, then the format's version, 32 bits;
//   word 1: the size in bytes of this rank's payload, 0 when it announces
//           no spec in full, 32 bits, then the capacity of the response
//           cache the bits index, 32 bits;
//   words 2...: the cache bit vector, one bit per response-cache entry
//           (64 per word, ceil(capacity / 64) words),
// and the records are allgathered. Only when some record announces a
// payload do the ranks allgather a second time, the payloads:
//   uint32 count, then `count` specs as runtime/tensor_spec.h serialises
//   them.
// A rank with no spec of its own then sends a payload of just count 0, so
// every rank sends at least kMinPayloadBytes. A steady training step, whose
// operations are all in the cache, thus costs one small allgather a tick.
//
// Decoding checks everything it reads (the version, the capacity, flags,
// bits beyond the capacity, sizes, each spec, trailing bytes) and fails with
// an error naming the rank whose report is bad, rather than read past the
// end. A rank of another kolo build (version) or with another
// KOLO_CACHE_CAPACITY would mean other bits, so its report is rejected
// before anything else in it is read; Runtime::Start already refuses to
// start with unequal capacities, so this is the wire format's own guard.
//
// Thread-safety: CycleReportCodec is immutable after construction.
#ifndef KOLO_RUNTIME_CYCLE_REPORT_H_
#define KOLO_RUNTIME_CYCLE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "runtime/tensor_spec.h"

namespace kolo {

// What one rank says in one cycle.
struct CycleReport {
  bool joined = false;
  bool shutting_down = false;
  bool stalled = false;  // this rank's stall inspector called for shutdown
  bool direct_ready =
      false;  // this rank can lease its idle time to a DirectPath
  std::vector<int32_t>
      cached_bits;                // announced by response-cache bit, ascending
  std::vector<TensorSpec> specs;  // announced in full
};

class CycleReportCodec {
 public:
  // The smallest payload a rank sends in the second allgather: its count.
  static constexpr int64_t kMinPayloadBytes = 4;
  // Changes whenever the meaning of a record or a payload does.
  static constexpr uint32_t kFormatVersion = 1;

  CycleReportCodec(int32_t world_size, int32_t cache_capacity);

  // Words in one rank's fixed record.
  int64_t record_words() const { return 2 + bit_words_; }

  // Encodes this rank's report: `record` gets record_words() words,
  // `payload` the count and the specs (at least kMinPayloadBytes). Cached
  // bits must lie in [0, cache capacity) and the payload within 1 GiB
  // (checked).
  void Encode(const CycleReport& report, std::vector<uint64_t>* record,
              std::string* payload) const;

  // Reads every rank's record (world size records, rank order) into
  // `reports` (resized to the world size): flags and cached bits. Returns
  // the payload size each rank sends in the second allgather, or an empty
  // vector when no rank has a payload and there is none.
  StatusOr<std::vector<int64_t>> DecodeRecords(
      const std::vector<uint64_t>& records,
      std::vector<CycleReport>* reports) const;

  // Reads the payloads, laid end to end in rank order with the sizes
  // DecodeRecords returned, appending each rank's specs to its report.
  Status DecodePayloads(const std::string& payloads,
                        const std::vector<int64_t>& sizes,
                        std::vector<CycleReport>* reports) const;

 private:
  const int32_t world_size_;
  const int32_t cache_capacity_;
  const int64_t bit_words_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_CYCLE_REPORT_H_
