// Fuzzes the decoding of the runtime's cycle reports
// (runtime/cycle_report.cc): every rank decodes the records and payloads
// every other rank allgathered, so a rank of another build, or a corrupted
// exchange, decides these bytes. The input's first bytes pick the world
// size and the cache capacity; then come the records (whole 64-bit words),
// and what remains is the payloads laid end to end.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cycle_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const int32_t world_size = input.ConsumeIntegralInRange<int32_t>(1, 8);
  const int32_t capacity = input.ConsumeIntegralInRange<int32_t>(0, 200);
  const kolo::CycleReportCodec codec(world_size, capacity);
  // Usually exactly the words the records take, sometimes fewer or more.
  const int64_t exact = codec.record_words() * world_size;
  const int64_t words =
      input.ConsumeBool() ? exact
                          : input.ConsumeIntegralInRange<int64_t>(0, exact + 2);
  std::vector<uint64_t> records(static_cast<size_t>(words));
  for (uint64_t& word : records) word = input.ConsumeIntegral<uint64_t>();
  std::vector<kolo::CycleReport> reports;
  auto sizes = codec.DecodeRecords(records, &reports);
  if (!sizes.ok() || sizes->empty()) return 0;
  const std::string payloads = input.ConsumeRemainingBytesAsString();
  (void)codec.DecodePayloads(payloads, *sizes, &reports);
  return 0;
}
