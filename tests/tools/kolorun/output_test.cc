#include "output.h"

#include <string>

#include "gtest/gtest.h"
#include "launcher.h"

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

TEST(LineSplitterTest, InPlaceTheTextAfterTheLastReturnIsTheStatus) {
  LineSplitter splitter(LineFormat::kPrefix, "[0]<stdout>: ",
                        /*in_place=*/true);
  EXPECT_EQ(splitter.Append("loading\n", 8), "[0]<stdout>: loading\n");
  EXPECT_EQ(splitter.Status(), "");
  // Without a '\r' an unfinished line is held back, as on a pipe.
  EXPECT_EQ(splitter.Append("half", 4), "");
  EXPECT_EQ(splitter.Status(), "");
  EXPECT_EQ(splitter.Append("\rstep 1\x1b[K", 10), "");
  EXPECT_EQ(splitter.Status(), "[0]<stdout>: step 1\x1b[K");
  // A redraw in pieces: the status follows each piece.
  EXPECT_EQ(splitter.Append("\rst", 3), "");
  EXPECT_EQ(splitter.Status(), "[0]<stdout>: st");
  EXPECT_EQ(splitter.Append("ep 2", 4), "");
  EXPECT_EQ(splitter.Status(), "[0]<stdout>: step 2");
  // A '\r' alone keeps the line until text follows it.
  EXPECT_EQ(splitter.Append("\r", 1), "");
  EXPECT_EQ(splitter.Status(), "[0]<stdout>: step 2");
  EXPECT_EQ(splitter.Append("epoch 1 done\nnext\n", 18),
            "[0]<stdout>: epoch 1 done\n[0]<stdout>: next\n");
  EXPECT_EQ(splitter.Status(), "");
}

TEST(LineSplitterTest, InPlaceReturnNewlineKeepsTheLine) {
  LineSplitter splitter(LineFormat::kPrefix, "p ", /*in_place=*/true);
  EXPECT_EQ(splitter.Append("a\r\n", 3), "p a\n");
  EXPECT_EQ(splitter.Append("x\ry", 3), "");
  EXPECT_EQ(splitter.Status(), "p y");
  EXPECT_EQ(splitter.Finish(), "p y\n");
  EXPECT_EQ(splitter.Status(), "");
}

TEST(LineSplitterTest, OnAPipeAReturnIsAnOrdinaryByte) {
  LineSplitter splitter(LineFormat::kPrefix, "p ");
  EXPECT_EQ(splitter.Append("a\rb\n", 4), "p a\rb\n");
  EXPECT_EQ(splitter.Append("\rc", 2), "");
  EXPECT_EQ(splitter.Status(), "");
}

std::string Rewrite(const std::string& line,
                    const std::string& untagged_prefix = "") {
  MpiLineJoiner joiner(untagged_prefix);
  return joiner.Rewrite(line) + joiner.Finish();
}

TEST(MpiLineJoinerTest, RewritesTheTag) {
  EXPECT_EQ(Rewrite("[1,0]<stdout>:hi there"), "[0]<stdout>: hi there\n");
  EXPECT_EQ(Rewrite("[12,3]<stderr>:oops"), "[3]<stderr>: oops\n");
  EXPECT_EQ(Rewrite("[1,10]<stdout>:"), "[10]<stdout>: \n");
}

TEST(MpiLineJoinerTest, JoinsTheLineMpirunPrintedInPieces) {
  // What mpirun printed for two ranks that each wrote "abc", flushed, then
  // wrote "def\n": rank 0's line is whole on the first printed line, rank
  // 1's once its rest arrives on the second.
  MpiLineJoiner joiner("");
  EXPECT_EQ(
      joiner.Rewrite("[1,0]<stdout>:abc[1,1]<stdout>:abc[1,0]<stdout>:def"),
      "[0]<stdout>: abcdef\n");
  EXPECT_EQ(joiner.Rewrite("[1,1]<stdout>:def"), "[1]<stdout>: abcdef\n");
  EXPECT_EQ(joiner.Finish(), "");
  // A rank's stdout and stderr are separate lines.
  EXPECT_EQ(joiner.Rewrite("[1,0]<stderr>:e[1,0]<stdout>:o"),
            "[0]<stdout>: o\n");
  EXPECT_EQ(joiner.Finish(), "[0]<stderr>: e\n");
}

TEST(MpiLineJoinerTest, CutsAPieceThatGrowsPastTheLineLimit) {
  // A rank that never ends its line: its pieces are held only up to the
  // limit, like a line kolorun reads itself.
  MpiLineJoiner joiner("");
  const std::string piece(kMaxLineBytes / 2 + 1, 'a');
  EXPECT_EQ(joiner.Rewrite("[1,0]<stdout>:" + piece + "[1,1]<stdout>:x"),
            "[1]<stdout>: x\n");
  EXPECT_EQ(
      joiner.Rewrite("[1,0]<stdout>:" + piece + "[1,1]<stdout>:y"),
      "[0]<stdout>: " + std::string(kMaxLineBytes, 'a') + "\n[1]<stdout>: y\n");
  EXPECT_EQ(joiner.Finish(), "[0]<stdout>: aa\n");
}

TEST(MpiLineJoinerTest, LeavesUntaggedLinesAndLookalikesAlone) {
  EXPECT_EQ(Rewrite("-----"), "-----\n");
  EXPECT_EQ(Rewrite("mpirun noticed", "mpirun: "), "mpirun: mpirun noticed\n");
  EXPECT_EQ(Rewrite("[a,0]<stdout>:x"), "[a,0]<stdout>:x\n");
  EXPECT_EQ(Rewrite("[1,0]<stdin>:x"), "[1,0]<stdin>:x\n");
  EXPECT_EQ(Rewrite(""), "\n");
}

TEST(MpiLineJoinerTest, KeepsTextBeforeTheFirstTag) {
  EXPECT_EQ(Rewrite("note [1,2]<stdout>:x"), "note \n[2]<stdout>: x\n");
}

TEST(LineSplitterTest, MpiTaggedFormatRewritesEachLine) {
  LineSplitter splitter(LineFormat::kMpiTagged, "");
  std::string text = "[1,0]<stdout>:a\n[1,1]<stdout>:b";
  EXPECT_EQ(splitter.Append(text.data(), text.size()), "[0]<stdout>: a\n");
  EXPECT_EQ(splitter.Finish(), "[1]<stdout>: b\n");
  // A piece held back for its rank comes out at the end of the stream.
  text = "[1,0]<stdout>:partial[1,1]<stdout>:hi 1\n";
  EXPECT_EQ(splitter.Append(text.data(), text.size()), "[1]<stdout>: hi 1\n");
  EXPECT_EQ(splitter.Finish(), "[0]<stdout>: partial\n");
}

TEST(TranslateMpirunNoticeTest, NamesTheRankTheHostAndTheSignal) {
  EXPECT_EQ(TranslateMpirunNotice("mpirun noticed that process rank 1 with "
                                  "PID 4242 on node vm exited on signal 9 "
                                  "(Killed)."),
            "rank 1 on vm was killed by signal 9 (Killed)");
  EXPECT_EQ(TranslateMpirunNotice("mpirun noticed that process rank 12 with "
                                  "PID 0 on node h2.example exited on signal "
                                  "15."),
            "rank 12 on h2.example was killed by signal 15");
  EXPECT_EQ(TranslateMpirunNotice("[0]<stdout>: mpirun noticed that"),
            std::nullopt);
  EXPECT_EQ(TranslateMpirunNotice(""), std::nullopt);
}

TEST(LineSplitterTest, MpiTaggedFormatAddsKolorunsWordsAfterTheNotice) {
  LineSplitter splitter(LineFormat::kMpiTagged, "");
  std::string out = splitter.Append(
      "mpirun noticed that process rank 1 with PID 7 on node vm exited on "
      "signal 9 (Killed).\n",
      86);
  EXPECT_NE(out.find("kolorun: rank 1 on vm was killed by signal 9 (Killed)\n"),
            std::string::npos)
      << out;
}

TEST(AgentReportedFailureTest, ReadsTheAgentsOwnLinesOnly) {
  EXPECT_EQ(AgentReportedFailure(
                "kolorun: rank 5 on h2 was killed by signal 9 (Killed)"),
            137);
  EXPECT_EQ(AgentReportedFailure("kolorun: rank 2 on h1 exited with code 3"),
            3);
  EXPECT_EQ(AgentReportedFailure("kolorun: rank 2 on h1 exited with code 0"),
            std::nullopt);
  // A rank's own line carries its tag; kolorun's other messages are not
  // failures.
  EXPECT_EQ(AgentReportedFailure(
                "[3]<stderr>: kolorun: rank 5 on h2 was killed by signal 9"),
            std::nullopt);
  EXPECT_EQ(AgentReportedFailure("kolorun: stopping the ranks on h2 (signal "
                                 "15, Terminated)"),
            std::nullopt);
}

}  // namespace
}  // namespace kolorun
}  // namespace kolo
