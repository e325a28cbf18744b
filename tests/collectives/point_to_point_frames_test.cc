// The point-to-point protocol against frames a peer should never send
// (collectives/point_to_point.cc): the inputs the fuzzer found
// (fuzz/point_to_point_frame_fuzzer.cc), each kept in
// fuzz/regressions/point_to_point_frame_fuzzer/ and replayed here through
// the fuzzer's own script (fuzz/point_to_point_script.h). Each must end
// every posted transfer with an error that names the peer, not crash.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "fuzz/point_to_point_script.h"

namespace kolo {
namespace {

std::string Regression(const std::string& name) {
  const std::string path = std::string(KOLO_SOURCE_DIR) +
                           "/fuzz/regressions/point_to_point_frame_fuzzer/" +
                           name;
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  return std::string((std::istreambuf_iterator<char>(file)),
                     std::istreambuf_iterator<char>());
}

// Replays the regression `name`: its one receive must end with an error
// that names the peer, rank 1, and the process must live on.
void ExpectTheReceiveFailsNamingRank1(const std::string& name) {
  const std::vector<Status> statuses =
      fuzz::RunPointToPointScript(Regression(name));
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_FALSE(statuses[0].ok()) << name;
  EXPECT_NE(statuses[0].message().find("rank 1"), std::string::npos)
      << name << ": " << statuses[0].message();
}

// Rank 1 sends a message nobody has asked for yet (tag 2; the one receive
// waits for tag 1) whose header claims 2^34 float32: 64 GiB, which the
// receiver allocated to hold it (point_to_point.cc's HandleData, `held`)
// before reading a byte. ASan: allocator out of memory in
// PointToPoint::Core::HandleData; without ASan, std::bad_alloc on the
// reader thread ends the process.
TEST(PointToPointFramesTest, AnUnexpectedFrameClaimingGibibytes) {
  ExpectTheReceiveFailsNamingRank1("unexpected_64_gib");
}

// Rank 1 sends the receive's tag, type and count, but a header whose
// payload_bytes is 64 for its 16-byte buffer; the protocol has the link
// read all 64 into it (HandleData, `receive->recv_data`). ASan:
// heap-buffer-overflow, WRITE of size 64, under
// PointToPoint::Core::HandleData (point_to_point.cc:496). Found with
// count 0, whose buffer is null.
TEST(PointToPointFramesTest, APayloadLongerThanTheReceive) {
  ExpectTheReceiveFailsNamingRank1("payload_past_the_receive");
}

// An unexpected frame whose payload_bytes is -1: resizing the buffer that
// holds it throws std::length_error on the reader thread, which ends the
// process (point_to_point.cc:499).
TEST(PointToPointFramesTest, ANegativePayloadLength) {
  ExpectTheReceiveFailsNamingRank1("negative_payload");
}

}  // namespace
}  // namespace kolo
