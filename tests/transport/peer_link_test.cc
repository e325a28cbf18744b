// The checks of src/transport/peer_link.cc: CheckPayloadSize, which every
// engine's Write makes on a frame's header; CheckReadSize, which every
// ReadPayload makes; CheckArrivingPayload, which a reader makes of a frame
// from the network before it reads a byte of its payload.
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
            "rank 5 (at most 1099511627776)");
  header.payload_bytes = kMaxFramePayloadBytes + 1;
  EXPECT_EQ(CheckPayloadSize("tcp", 0, 1, header).code(),
            StatusCode::kInvalidArgument);
}

TEST(CheckReadSizeTest, AReadMustTakeExactlyTheFramesPayload) {
  EXPECT_TRUE(CheckReadSize("tcp", 0, 1, 16, 16).ok());
  EXPECT_TRUE(CheckReadSize("tcp", 0, 1, 0, 0).ok());
  const Status longer = CheckReadSize("tcp", 0, 1, 17, 16);
  EXPECT_EQ(longer.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(longer.message(),
            "tcp: rank 0 reads 17 payload bytes of a frame from rank 1 that "
            "has 16");
  EXPECT_THAT(CheckReadSize("shm", 3, 2, 4, -1).message(),
              ::testing::HasSubstr("was not handed out by Poll"));
}

TEST(CheckArrivingPayloadTest, TheLengthMustBeWhatTheHeaderCallsFor) {
  FrameHeader header;
  header.tag = 9;
  header.count = 3;
  header.payload_bytes = 12;
  EXPECT_TRUE(CheckArrivingPayload("p2p", 0, 1, header, 12).ok());
  for (int64_t got : {int64_t{13}, int64_t{-1}, kMaxFramePayloadBytes + 12}) {
    header.payload_bytes = got;
    const Status status = CheckArrivingPayload("p2p", 0, 1, header, 12);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(),
                ::testing::HasSubstr("from rank 1 (tag 9, type 0, count 3) "
                                     "that claims " +
                                     std::to_string(got) +
                                     " payload bytes where its header calls "
                                     "for 12 payload bytes"));
  }
  header.payload_bytes = 0;
  EXPECT_THAT(CheckArrivingPayload("p2p", 0, 1, header, -1).message(),
              ::testing::HasSubstr("calls for a valid type and count"));
}

}  // namespace
}  // namespace kolo
