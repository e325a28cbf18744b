#include "transport/peer_link.h"

namespace kolo {
namespace {

bool WithinBounds(int64_t payload_bytes) {
  return payload_bytes >= 0 && payload_bytes <= kMaxFramePayloadBytes;
}

}  // namespace

Status CheckPayloadSize(const char* link, int32_t rank, int32_t peer,
                        const FrameHeader& header) {
  if (WithinBounds(header.payload_bytes)) return Status::Ok();
  return InvalidArgument(
      std::string(link) + ": rank " + std::to_string(rank) +
      " cannot write a frame of " + std::to_string(header.payload_bytes) +
      " payload bytes to rank " + std::to_string(peer) + " (at most " +
      std::to_string(kMaxFramePayloadBytes) + ")");
}

Status CheckReadSize(const char* link, int32_t rank, int32_t peer,
                     int64_t bytes, int64_t frame_bytes) {
  if (bytes == frame_bytes && bytes >= 0) return Status::Ok();
  return InvalidArgument(
      std::string(link) + ": rank " + std::to_string(rank) + " reads " +
      std::to_string(bytes) + " payload bytes of a frame from rank " +
      std::to_string(peer) + " that " +
      (frame_bytes < 0 ? std::string("was not handed out by Poll")
                       : "has " + std::to_string(frame_bytes)));
}

Status CheckArrivingPayload(const std::string& what, int32_t rank, int32_t peer,
                            const FrameHeader& header, int64_t expected) {
  if (expected >= 0 && WithinBounds(header.payload_bytes) &&
      header.payload_bytes == expected) {
    return Status::Ok();
  }
  const std::string wanted = expected < 0
                                 ? std::string("a valid type and count")
                                 : std::to_string(expected) + " payload bytes";
  return InvalidArgument(
      what + ": rank " + std::to_string(rank) + " refused a frame from rank " +
      std::to_string(peer) + " (tag " + std::to_string(header.tag) + ", type " +
      std::to_string(header.type) + ", count " + std::to_string(header.count) +
      ") that claims " + std::to_string(header.payload_bytes) +
      " payload bytes where its " + "header calls for " + wanted);
}

}  // namespace kolo
