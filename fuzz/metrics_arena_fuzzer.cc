// Fuzzes the reading of another process's metrics arena
// (metrics/arena.cc's ReadArena) and the rendering of what it read
// (metrics/text_format.cc): kolorun maps every rank's arena file and
// serves it, and a rank that crashed mid-write, or any process that can
// write to KOLO_METRICS_DIR, decides those bytes.
//
// An arena is ArenaBytes() long (far beyond an input's length), so the
// input patches a real one: its first byte picks whether the rest is
// XORed onto the start of a valid arena (header and first descriptors,
// whole size; a zero byte leaves the arena's byte as it is, so a mutation
// anywhere in it keeps the rest valid) or is read alone (a truncated
// file).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/loopback.h"
#include "metrics/arena.h"
#include "metrics/text_format.h"

namespace {

// The bytes of an arena with one series of each type.
const std::string& ValidArena() {
  static const std::string bytes = [] {
    const std::string path =
        "/tmp/kolo-fuzz-arena-" + std::to_string(::getpid());
    {
      auto arena = kolo::metrics::Arena::CreateFile(path, "job", "host", 3);
      if (!arena.ok()) kolo::fuzz::HarnessFailure("fuzz: create an arena");
      using kolo::metrics::MetricType;
      (void)(*arena)->Register(MetricType::kCounter, "kolo_steps", "Steps.",
                               "op=\"allreduce\"", {});
      (void)(*arena)->Register(MetricType::kGauge, "kolo_phase", "Phase.", "",
                               {});
      (void)(*arena)->Register(MetricType::kHistogram, "kolo_seconds",
                               "Seconds.", "", {0.1, 1, 10});
    }
    std::ifstream file(path, std::ios::binary);
    std::string contents((std::istreambuf_iterator<char>(file)),
                         std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    return contents;
  }();
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool patch = data[0] % 2 == 0;
  const char* rest = reinterpret_cast<const char*>(data + 1);
  const size_t rest_size = size - 1;
  std::vector<char> bytes;
  if (patch) {
    bytes.assign(ValidArena().begin(), ValidArena().end());
    for (size_t i = 0; i < std::min(rest_size, bytes.size()); ++i)
      bytes[i] ^= rest[i];
  } else {
    bytes.assign(rest, rest + rest_size);
  }
  // A heap block of exactly the file's size, so ASan sees any read past it.
  auto snapshot =
      kolo::metrics::ReadArena(bytes.data(), bytes.size(), "fuzzed arena");
  if (snapshot.ok()) {
    const std::string text =
        kolo::metrics::RenderText(kolo::metrics::FamiliesOf({*snapshot}));
    if (text.empty() && !snapshot->series.empty()) std::abort();
  }
  return 0;
}
