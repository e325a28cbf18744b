// Status and StatusOr (src/common/status.cc, include/kolo/status.h): the
// codes' names, the text errors are printed as, context, and the macros
// that carry an error up.
#include "kolo/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kolo {
namespace {

TEST(StatusTest, OkIsTheDefaultAndPrintsAsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, EachHelperGivesItsCodeAndPrintsTheCodesName) {
  struct Case {
    Status status;
    StatusCode code;
    const char* text;
  };
  const Case cases[] = {
      {InvalidArgument("m"), StatusCode::kInvalidArgument,
       "invalid argument: m"},
      {FailedPrecondition("m"), StatusCode::kFailedPrecondition,
       "failed precondition: m"},
      {PeerFailure("m"), StatusCode::kPeerFailure, "peer failure: m"},
      {Timeout("m"), StatusCode::kTimeout, "timeout: m"},
      {Aborted("m"), StatusCode::kAborted, "aborted: m"},
      {Mismatch("m"), StatusCode::kMismatch, "mismatch: m"},
      {Unauthenticated("m"), StatusCode::kUnauthenticated,
       "unauthenticated: m"},
      {NotFound("m"), StatusCode::kNotFound, "not found: m"},
      {Internal("m"), StatusCode::kInternal, "internal: m"},
      {MembershipChanged("m"), StatusCode::kMembershipChanged,
       "membership changed: m"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.text;
    EXPECT_EQ(c.status.code(), c.code) << c.text;
    EXPECT_EQ(c.status.message(), "m") << c.text;
    EXPECT_EQ(c.status.ToString(), c.text);
  }
  EXPECT_STREQ(StatusCodeName(static_cast<StatusCode>(1000)), "unknown");
}

TEST(StatusTest, ContextGoesInFrontOfAnErrorAndNotOnOk) {
  Status s = PeerFailure("connection closed").WithContext("allreduce of 'w'");
  EXPECT_EQ(s.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(s.message(), "allreduce of 'w': connection closed");
  EXPECT_TRUE(Status::Ok().WithContext("anything").ok());
  EXPECT_EQ(Status::Ok().WithContext("anything").message(), "");
}

StatusOr<int> Half(int n) {
  if (n % 2 != 0) return InvalidArgument(std::to_string(n) + " is odd");
  return n / 2;
}

StatusOr<int> Quarter(int n) {
  KOLO_ASSIGN_OR_RETURN(int half, Half(n));
  KOLO_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckQuarter(int n) {
  KOLO_RETURN_IF_ERROR(Quarter(n).status());
  return Status::Ok();
}

TEST(StatusOrTest, HoldsAValueOrTheErrorAndTheMacrosCarryTheFirstError) {
  StatusOr<int> eight = Quarter(32);
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(*eight, 8);
  EXPECT_EQ(eight.value(), 8);

  StatusOr<int> odd = Quarter(6);  // 6 / 2 = 3, and 3 is odd
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().ToString(), "invalid argument: 3 is odd");
  EXPECT_EQ(CheckQuarter(6).message(), "3 is odd");
  EXPECT_TRUE(CheckQuarter(4).ok());
}

TEST(StatusOrTest, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(**p, 7);
  std::unique_ptr<int> taken = std::move(p).value();
  EXPECT_EQ(*taken, 7);
}

TEST(StatusOrDeathTest, ReadingTheValueOfAnErrorAbortsWithTheError) {
  StatusOr<int> bad = NotFound("no tensor 'w'");
  EXPECT_DEATH((void)bad.value(),
               "value of an error StatusOr: not found: no tensor 'w'");
}

}  // namespace
}  // namespace kolo
