#include "transport/peer_link.h"

namespace kolo {

Status CheckPayloadSize(const char* link, int32_t rank, int32_t peer,
                        const FrameHeader& header) {
  if (header.payload_bytes >= 0) return Status::Ok();
  return InvalidArgument(std::string(link) + ": rank " + std::to_string(rank) +
                         " cannot write a frame of " +
                         std::to_string(header.payload_bytes) +
                         " payload bytes to rank " + std::to_string(peer));
}

}  // namespace kolo
