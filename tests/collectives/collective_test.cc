// CollectiveName: the names that errors, the timeline and kolo-bench print.
#include "collectives/collective.h"

#include <gtest/gtest.h>

#include <string>

namespace kolo {
namespace {

TEST(CollectiveTest, EveryCollectiveHasItsName) {
  EXPECT_STREQ(CollectiveName(Collective::kAllreduce), "allreduce");
  EXPECT_STREQ(CollectiveName(Collective::kAllgather), "allgather");
  EXPECT_STREQ(CollectiveName(Collective::kBroadcast), "broadcast");
  EXPECT_STREQ(CollectiveName(Collective::kAlltoall), "alltoall");
  EXPECT_STREQ(CollectiveName(Collective::kReducescatter), "reducescatter");
  EXPECT_STREQ(CollectiveName(Collective::kBarrier), "barrier");
}

TEST(CollectiveTest, AValueFromTheWireThatIsNoCollectiveSaysSo) {
  EXPECT_STREQ(CollectiveName(static_cast<Collective>(99)),
               "unknown collective");
}

}  // namespace
}  // namespace kolo
