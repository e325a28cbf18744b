#include "output.h"

#include <string>

#include "gtest/gtest.h"

namespace kolo {
namespace kolorun {
namespace {

TEST(LineSplitterTest, EmitsOnlyWholeLinesWithThePrefix) {
  LineSplitter splitter(LineFormat::kPrefix, "[2]<stdout>: ");
  EXPECT_EQ(splitter.Append("he", 2), "");
  EXPECT_EQ(splitter.Append("llo\nwor", 7), "[2]<stdout>: hello\n");
  EXPECT_EQ(splitter.Append("ld\n\nx", 5),
            "[2]<stdout>: world\n[2]<stdout>: \n");
  EXPECT_EQ(splitter.Finish(), "[2]<stdout>: x\n");
  EXPECT_EQ(splitter.Finish(), "");
}

TEST(LineSplitterTest, CutsOverlongLines) {
  LineSplitter splitter(LineFormat::kPrefix, "p ");
  std::string chunk(LineSplitter::kMaxLineBytes + 3, 'a');
  std::string out = splitter.Append(chunk.data(), chunk.size());
  EXPECT_EQ(out, "p " + std::string(LineSplitter::kMaxLineBytes, 'a') + "\n");
  EXPECT_EQ(splitter.Finish(), "p aaa\n");
}

TEST(RewriteMpiLineTest, RewritesTheTag) {
  EXPECT_EQ(RewriteMpiLine("[1,0]<stdout>:hi there", ""),
            "[0]<stdout>: hi there\n");
  EXPECT_EQ(RewriteMpiLine("[12,3]<stderr>:oops", ""), "[3]<stderr>: oops\n");
  EXPECT_EQ(RewriteMpiLine("[1,10]<stdout>:", ""), "[10]<stdout>: \n");
}

TEST(RewriteMpiLineTest, SplitsLinesThatMpirunGlued) {
  // mpirun prints a rank's unterminated last line and the next tag together.
  EXPECT_EQ(RewriteMpiLine("[1,0]<stdout>:partial[1,1]<stdout>:hi 1", ""),
            "[0]<stdout>: partial\n[1]<stdout>: hi 1\n");
}

TEST(RewriteMpiLineTest, LeavesUntaggedLinesAndLookalikesAlone) {
  EXPECT_EQ(RewriteMpiLine("-----", ""), "-----\n");
  EXPECT_EQ(RewriteMpiLine("mpirun noticed", "mpirun: "),
            "mpirun: mpirun noticed\n");
  EXPECT_EQ(RewriteMpiLine("[a,0]<stdout>:x", ""), "[a,0]<stdout>:x\n");
  EXPECT_EQ(RewriteMpiLine("[1,0]<stdin>:x", ""), "[1,0]<stdin>:x\n");
  EXPECT_EQ(RewriteMpiLine("", ""), "\n");
}

TEST(RewriteMpiLineTest, KeepsTextBeforeTheFirstTag) {
  EXPECT_EQ(RewriteMpiLine("note [1,2]<stdout>:x", ""),
            "note \n[2]<stdout>: x\n");
}

TEST(LineSplitterTest, MpiTaggedFormatRewritesEachLine) {
  LineSplitter splitter(LineFormat::kMpiTagged, "");
  std::string text = "[1,0]<stdout>:a\n[1,1]<stdout>:b";
  EXPECT_EQ(splitter.Append(text.data(), text.size()), "[0]<stdout>: a\n");
  EXPECT_EQ(splitter.Finish(), "[1]<stdout>: b\n");
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
