// Fuzzes the point-to-point protocol's reading of frames from a peer
// (collectives/point_to_point.cc): every header field, payload_bytes
// included, comes from the other rank over the network. The input is a
// script (fuzz/point_to_point_script.h): the transfers rank 0 posts, then
// the frames rank 1 sends it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/point_to_point_script.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kolo::fuzz::RunPointToPointScript(
      std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
