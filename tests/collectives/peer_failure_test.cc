// ExplainPeerFailure against a MemoryStore: which rank the error names,
// and that only a lost peer makes it ask the store.
#include "collectives/peer_failure.h"

#include <gtest/gtest.h>

#include <chrono>

#include "store/memory_store.h"
#include "store/tcp_store.h"

namespace kolo {
namespace {

TEST(PeerFailureTest, NamesTheFirstRankToLeaveAndThenTheOthers) {
  MemoryStore store;
  ASSERT_TRUE(store.Set(kFailedRanksKey, "2,0,3").ok());
  Status s = ExplainPeerFailure(PeerFailure("read from 127.0.0.1:4000: reset"),
                                &store, "allreduce of 'w'");
  EXPECT_EQ(s.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(s.message(),
            "allreduce of 'w': rank 2 is gone (process exited or lost its "
            "connection), "
            "then ranks 0,3; read from 127.0.0.1:4000: reset");
}

TEST(PeerFailureTest, ATimeoutIsALostPeerToo) {
  MemoryStore store;
  ASSERT_TRUE(store.Set(kFailedRanksKey, "1").ok());
  Status s =
      ExplainPeerFailure(Timeout("no answer in 30 s"), &store, "barrier");
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.message(),
            "barrier: rank 1 is gone (process exited or lost its connection); "
            "no answer in 30 s");
}

TEST(PeerFailureTest, OtherErrorsDoNotAskTheStore) {
  MemoryStore store;
  ASSERT_TRUE(store.Set(kFailedRanksKey, "1").ok());
  Status s = ExplainPeerFailure(Internal("bad dtype"), &store, "broadcast");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "broadcast: bad dtype");
}

TEST(PeerFailureTest, WithoutAStoreOnlyTheContextIsAdded) {
  Status s = ExplainPeerFailure(PeerFailure("reset"), nullptr, "alltoall");
  EXPECT_EQ(s.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(s.message(), "alltoall: reset");
}

TEST(PeerFailureTest, AStoreThatIsGoneTooIsSaid) {
  MemoryStore store;
  store.Abort("the store is shutting down");
  Status s = ExplainPeerFailure(PeerFailure("reset"), &store, "allgather");
  EXPECT_EQ(s.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(s.message(),
            "allgather: the rendezvous store is unreachable as well (the store "
            "is shutting "
            "down); reset");
}

// No rank has left yet: the explanation waits briefly for the news (the
// store hears of a death a moment after the engine), then gives the
// engine's error alone.
TEST(PeerFailureTest, WhenNoRankIsRecordedTheErrorIsLeftAsItWas) {
  MemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  Status s =
      ExplainPeerFailure(PeerFailure("reset"), &store, "allreduce of 'w'");
  EXPECT_EQ(s.message(), "allreduce of 'w': reset");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace kolo
