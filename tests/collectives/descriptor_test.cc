#include "collectives/descriptor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kolo {
namespace {

using ::testing::HasSubstr;

CallDescriptor Allreduce(int64_t count, DataType type = DataType::kFloat32,
                         ReduceOp op = ReduceOp::kSum) {
  return MakeDescriptor(4, Collective::kAllreduce, count, static_cast<int32_t>(type),
                        static_cast<int32_t>(op));
}

TEST(DescriptorTest, IdenticalCallsAgree) {
  EXPECT_TRUE(CompareDescriptors({Allreduce(10), Allreduce(10), Allreduce(10)}).ok());
}

TEST(DescriptorTest, GroupsRanksByValue) {
  Status s = CompareDescriptors({Allreduce(10), Allreduce(12), Allreduce(10), Allreduce(9)});
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  EXPECT_EQ(s.message(),
            "allreduce #4: ranks disagree on the element count: ranks 0,2 have 10; "
            "rank 1 has 12; rank 3 has 9");
}

TEST(DescriptorTest, ReportsTheMostTellingFieldFirst) {
  CallDescriptor gather = MakeDescriptor(4, Collective::kAllgather, 3, 0);
  EXPECT_THAT(CompareDescriptors({Allreduce(10), gather}).message(),
              HasSubstr("on the collective: rank 0 has allreduce; rank 1 has allgather"));
  EXPECT_THAT(CompareDescriptors({Allreduce(10, DataType::kFloat32, ReduceOp::kMax),
                                  Allreduce(10, DataType::kFloat32, ReduceOp::kMin)})
                  .message(),
              HasSubstr("reduce op: rank 0 has max; rank 1 has min"));
}

TEST(DescriptorTest, InvalidRankIsNamed) {
  CallDescriptor bad = Allreduce(-1);
  MarkInvalid(&bad, "negative element count -1");
  Status s = CompareDescriptors({Allreduce(10), bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "allreduce #4 on rank 1: negative element count -1");
}

TEST(DescriptorTest, VariableCountChecks) {
  EXPECT_TRUE(CheckAllgathervCounts({{1, 2}, {1, 2}}, {1, 2}).ok());
  EXPECT_THAT(CheckAllgathervCounts({{1, 2}, {1, 3}}, {1, 2}).message(),
              HasSubstr("rank 0 has [1,2]; rank 1 has [1,3]"));
  EXPECT_TRUE(CheckAlltoallvCounts({{1, 2}, {3, 4}}, {{1, 3}, {2, 4}}).ok());
  EXPECT_THAT(CheckAlltoallvCounts({{1, 2}, {3, 4}}, {{1, 3}, {5, 4}}).message(),
              HasSubstr("rank 0 sends 2 elements to rank 1, which expects 5"));
}

}  // namespace
}  // namespace kolo
