// CheckPayloadSize (src/transport/peer_link.cc): the one check every
// engine's Write makes on a frame's header.
#include "transport/peer_link.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(CheckPayloadSizeTest, TakesEmptyAndSizedPayloads) {
  FrameHeader header;
  EXPECT_TRUE(CheckPayloadSize("tcp", 0, 1, header).ok());
  header.payload_bytes = int64_t{1} << 40;
  EXPECT_TRUE(CheckPayloadSize("tcp", 0, 1, header).ok());
}

TEST(CheckPayloadSizeTest, RefusesANegativeSizeNamingLinkRanksAndSize) {
  FrameHeader header;
  header.payload_bytes = -8;
  const Status status = CheckPayloadSize("mpi link", 2, 5, header);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "mpi link: rank 2 cannot write a frame of -8 payload bytes to "
            "rank 5");
}

}  // namespace
}  // namespace kolo
