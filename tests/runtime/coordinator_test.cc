// Tests the replicated coordinator's decisions, one Decide call at a time,
// with a three-rank world and explicit clock values.
#include "runtime/coordinator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace kolo {
namespace {

using std::chrono::seconds;

constexpr int32_t kWorldSize = 3;

SteadyTime At(int s) { return SteadyTime() + seconds(s); }

TensorSpec Spec(const std::string& name, int64_t count = 10,
                Collective collective = Collective::kAllreduce,
                ReduceOp op = ReduceOp::kSum) {
  TensorSpec spec;
  spec.name = name;
  spec.collective = collective;
  spec.op = op;
  spec.count = count;
  if (collective == Collective::kBroadcast) spec.root = 0;
  return spec;
}

TensorSpec GroupSpec(const std::string& name, const std::string& group,
                     int32_t size) {
  TensorSpec spec = Spec(name);
  spec.group = group;
  spec.group_size = size;
  return spec;
}

// An allgather where rank r contributes r + 1 elements: every rank's spec
// differs, so per-rank bookkeeping shows.
TensorSpec AllgatherSpec(const std::string& name, int32_t rank) {
  return Spec(name, rank + 1, Collective::kAllgather);
}

std::vector<CycleReport> NoReports() {
  return std::vector<CycleReport>(kWorldSize);
}

// Every rank announces `spec` in full.
std::vector<CycleReport> EveryRank(const TensorSpec& spec) {
  std::vector<CycleReport> reports(kWorldSize);
  for (CycleReport& report : reports) report.specs.push_back(spec);
  return reports;
}

std::vector<std::string> Names(const CycleDecision& decision) {
  std::vector<std::string> names;
  for (const ReadyOperation& op : decision.ready) names.push_back(op.name);
  return names;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  ResponseCache cache_{16};
  Coordinator coordinator_{kWorldSize, &cache_};
};

TEST_F(CoordinatorTest, GroupsKeepThePlaceOfTheirFirstMember) {
  std::vector<CycleReport> reports(kWorldSize);
  for (CycleReport& report : reports) {
    report.specs = {GroupSpec("z.0", "z", 1), Spec("u"),
                    GroupSpec("a.0", "a", 1)};
  }
  EXPECT_EQ(Names(coordinator_.Decide(reports, At(0))),
            (std::vector<std::string>{"z.0", "u", "a.0"}));
}

TEST_F(CoordinatorTest, ReadyOnlyOnceEveryRankAnnounced) {
  std::vector<CycleReport> reports = NoReports();
  reports[0].specs.push_back(Spec("w"));
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  EXPECT_TRUE(decision.ready.empty());
  EXPECT_EQ(coordinator_.pending(), 1);

  reports = NoReports();
  reports[2].specs.push_back(Spec("w"));
  decision = coordinator_.Decide(reports, At(1));
  EXPECT_TRUE(decision.ready.empty());

  decision = coordinator_.Decide(NoReports(), At(2));
  EXPECT_TRUE(decision.ready.empty());

  reports = NoReports();
  reports[1].specs.push_back(Spec("w"));
  decision = coordinator_.Decide(reports, At(3));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  const ReadyOperation& op = decision.ready[0];
  EXPECT_TRUE(op.error.ok()) << op.error.ToString();
  ASSERT_EQ(op.specs.size(), static_cast<size_t>(kWorldSize));
  for (const TensorSpec& spec : op.specs) EXPECT_EQ(spec.count, 10);
  EXPECT_EQ(op.joined, std::vector<bool>(kWorldSize, false));
  EXPECT_EQ(coordinator_.pending(), 0);

  // Done: it is not decided again.
  EXPECT_TRUE(coordinator_.Decide(NoReports(), At(4)).ready.empty());
}

TEST_F(CoordinatorTest, ReadyOperationKeepsEachRanksSpec) {
  std::vector<CycleReport> reports = NoReports();
  for (int32_t r = 0; r < kWorldSize; ++r)
    reports[r].specs.push_back(AllgatherSpec("g", r));
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  ASSERT_EQ(decision.ready.size(), 1u);
  for (int32_t r = 0; r < kWorldSize; ++r) {
    EXPECT_EQ(decision.ready[0].specs[r].count, r + 1) << "rank " << r;
  }
}

TEST_F(CoordinatorTest, ReadyOrderIsFirstAnnouncementOrderWithinOneCycle) {
  // Reports are read in rank order, so rank 0's order wins.
  std::vector<CycleReport> reports = NoReports();
  for (const char* name : {"a", "b", "c"})
    reports[0].specs.push_back(Spec(name));
  for (const char* name : {"c", "b", "a"})
    reports[1].specs.push_back(Spec(name));
  for (const char* name : {"b", "c", "a"})
    reports[2].specs.push_back(Spec(name));
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  EXPECT_EQ(Names(decision), (std::vector<std::string>{"a", "b", "c"}));
}

// Three cycles in which the ranks announce a, b, c in different orders;
// all become ready in the third.
std::vector<std::vector<CycleReport>> StaggeredCycles() {
  std::vector<std::vector<CycleReport>> cycles(3, NoReports());
  cycles[0][1].specs = {Spec("c")};
  cycles[0][2].specs = {Spec("b")};
  cycles[1][2].specs = {Spec("a"), Spec("c")};
  cycles[1][0].specs = {Spec("a")};
  cycles[2][0].specs = {Spec("c"), Spec("b")};
  cycles[2][1].specs = {Spec("b"), Spec("a")};
  return cycles;
}

TEST_F(CoordinatorTest, ReadyOrderIsFirstAnnouncementOrderAcrossCycles) {
  const std::vector<std::vector<CycleReport>> cycles = StaggeredCycles();
  EXPECT_TRUE(coordinator_.Decide(cycles[0], At(0)).ready.empty());
  EXPECT_TRUE(coordinator_.Decide(cycles[1], At(1)).ready.empty());
  EXPECT_EQ(coordinator_.pending(), 3);
  // c (cycle 0, rank 1), b (cycle 0, rank 2), a (cycle 1, rank 0).
  EXPECT_EQ(Names(coordinator_.Decide(cycles[2], At(2))),
            (std::vector<std::string>{"c", "b", "a"}));
}

TEST_F(CoordinatorTest, SameInputsGiveTheSameDecisionOnEveryReplica) {
  ResponseCache other_cache(16);
  Coordinator other(kWorldSize, &other_cache);
  const std::vector<std::vector<CycleReport>> cycles = StaggeredCycles();
  for (size_t i = 0; i < cycles.size(); ++i) {
    const CycleDecision mine =
        coordinator_.Decide(cycles[i], At(static_cast<int>(i)));
    const CycleDecision theirs =
        other.Decide(cycles[i], At(static_cast<int>(i)));
    EXPECT_EQ(Names(mine), Names(theirs)) << "cycle " << i;
  }
}

TEST_F(CoordinatorTest, FullSpecsCountAsMissesAndCachedBitsAsHits) {
  CycleDecision decision = coordinator_.Decide(EveryRank(Spec("w")), At(0));
  EXPECT_EQ(decision.cache_misses, kWorldSize);
  EXPECT_EQ(decision.cache_hits, 0);
  ASSERT_EQ(decision.ready.size(), 1u);
  coordinator_.Completed(decision.ready[0]);
  const int32_t bit = cache_.Lookup(Spec("w"), 0);
  ASSERT_GE(bit, 0);

  std::vector<CycleReport> reports = NoReports();
  for (CycleReport& report : reports) report.cached_bits.push_back(bit);
  decision = coordinator_.Decide(reports, At(1));
  EXPECT_EQ(decision.cache_hits, kWorldSize);
  EXPECT_EQ(decision.cache_misses, 0);
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  EXPECT_TRUE(decision.ready[0].error.ok());
  for (const TensorSpec& spec : decision.ready[0].specs)
    EXPECT_TRUE(spec == Spec("w"));
}

TEST_F(CoordinatorTest, CachedBitsBecomeEachRanksCachedSpec) {
  std::vector<TensorSpec> specs;
  for (int32_t r = 0; r < kWorldSize; ++r)
    specs.push_back(AllgatherSpec("g", r));
  cache_.Put(specs);
  const int32_t bit = cache_.Lookup(specs[0], 0);
  ASSERT_GE(bit, 0);

  std::vector<CycleReport> reports = NoReports();
  reports[0].cached_bits = {bit};
  reports[2].cached_bits = {bit};
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  EXPECT_EQ(decision.cache_hits, 2);
  EXPECT_TRUE(decision.ready.empty());

  reports = NoReports();
  reports[1].cached_bits = {bit};
  decision = coordinator_.Decide(reports, At(1));
  EXPECT_EQ(decision.cache_hits, 1);
  ASSERT_EQ(Names(decision), std::vector<std::string>{"g"});
  for (int32_t r = 0; r < kWorldSize; ++r) {
    EXPECT_EQ(decision.ready[0].specs[r].count, r + 1) << "rank " << r;
  }
  // Announcing by bit leaves the entry in the cache.
  EXPECT_EQ(cache_.Lookup(specs[1], 1), bit);
}

TEST_F(CoordinatorTest, FullSpecEvictsTheNameFromTheCache) {
  cache_.Put(std::vector<TensorSpec>(kWorldSize, Spec("w")));
  cache_.Put(std::vector<TensorSpec>(kWorldSize, Spec("other")));
  ASSERT_EQ(cache_.size(), 2);

  // Rank 1 announces w with a new shape; the other ranks have not yet.
  std::vector<CycleReport> reports = NoReports();
  reports[1].specs.push_back(Spec("w", 20));
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  EXPECT_EQ(decision.cache_misses, 1);
  EXPECT_EQ(cache_.size(), 1);
  EXPECT_EQ(cache_.Lookup(Spec("w"), 0), -1);
  EXPECT_GE(cache_.Lookup(Spec("other"), 0), 0);
}

TEST_F(CoordinatorTest, BitsAndFullSpecsOfOneOperationInOneCycle) {
  cache_.Put(std::vector<TensorSpec>(kWorldSize, Spec("w")));
  const int32_t bit = cache_.Lookup(Spec("w"), 0);
  std::vector<CycleReport> reports = NoReports();
  reports[0].cached_bits = {bit};
  reports[1].cached_bits = {bit};
  reports[2].specs = {Spec("w")};
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  EXPECT_EQ(decision.cache_hits, 2);
  EXPECT_EQ(decision.cache_misses, 1);
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  EXPECT_TRUE(decision.ready[0].error.ok())
      << decision.ready[0].error.ToString();
  EXPECT_EQ(cache_.size(), 0);
}

TEST_F(CoordinatorTest, DisagreeingSpecsBecomeAnErrorNamingTheTensor) {
  std::vector<CycleReport> reports = EveryRank(Spec("w", 10));
  reports[1].specs[0].count = 12;
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  const Status& error = decision.ready[0].error;
  EXPECT_EQ(error.code(), StatusCode::kMismatch);
  EXPECT_EQ(
      error.message(),
      "tensor 'w': ranks disagree on the element count: ranks 0,2 have 10; "
      "rank 1 has 12");
  EXPECT_EQ(coordinator_.pending(), 0);
  coordinator_.Completed(decision.ready[0]);
  EXPECT_EQ(cache_.size(), 0);
}

TEST_F(CoordinatorTest, JoinedRankCountsAsAnnouncedForSumAndAverageAllreduce) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    const std::string name = std::string("w.") + ReduceOpName(op);
    std::vector<CycleReport> reports = NoReports();
    reports[1].joined = true;
    reports[0].specs.push_back(Spec(name, 7, Collective::kAllreduce, op));
    reports[2].specs.push_back(Spec(name, 7, Collective::kAllreduce, op));
    CycleDecision decision = coordinator_.Decide(reports, At(0));
    ASSERT_EQ(Names(decision), std::vector<std::string>{name});
    const ReadyOperation& ready = decision.ready[0];
    EXPECT_TRUE(ready.error.ok()) << ready.error.ToString();
    EXPECT_EQ(ready.joined, (std::vector<bool>{false, true, false}));
    ASSERT_EQ(ready.specs.size(), static_cast<size_t>(kWorldSize));
    EXPECT_TRUE(ready.specs[1] == Spec(name, 7, Collective::kAllreduce, op));
    EXPECT_FALSE(decision.all_joined);

    coordinator_.Completed(ready);
    EXPECT_EQ(cache_.size(), 0)
        << "operations with joined ranks are not cached";
  }
}

TEST_F(CoordinatorTest, RankJoiningWhileOthersWaitReleasesTheOperation) {
  std::vector<CycleReport> reports = NoReports();
  reports[0].specs.push_back(Spec("w"));
  reports[1].specs.push_back(Spec("w"));
  EXPECT_TRUE(coordinator_.Decide(reports, At(0)).ready.empty());

  reports = NoReports();
  reports[2].joined = true;
  CycleDecision decision = coordinator_.Decide(reports, At(1));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  EXPECT_TRUE(decision.ready[0].error.ok());
  EXPECT_EQ(decision.ready[0].joined, (std::vector<bool>{false, false, true}));
}

TEST_F(CoordinatorTest, BroadcastOrMinAllreduceWaitingOnAJoinedRankFails) {
  std::vector<CycleReport> reports = NoReports();
  reports[2].joined = true;
  for (int32_t r : {0, 1}) {
    reports[r].specs.push_back(Spec("b", 4, Collective::kBroadcast));
    reports[r].specs.push_back(
        Spec("m", 4, Collective::kAllreduce, ReduceOp::kMin));
  }
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  ASSERT_EQ(Names(decision), (std::vector<std::string>{"b", "m"}));
  EXPECT_EQ(decision.ready[0].error.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decision.ready[0].error.message(),
            "tensor 'b': rank 2 joined; only sum and average allreduces "
            "proceed without "
            "them, not broadcast");
  EXPECT_EQ(decision.ready[1].error.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decision.ready[1].error.message(),
            "tensor 'm': rank 2 joined; only sum and average allreduces "
            "proceed without "
            "them, not allreduce");
  EXPECT_EQ(coordinator_.pending(), 0);
}

TEST_F(CoordinatorTest,
       JoinedRankDoesNotFailAnOperationStillWaitingForAnother) {
  std::vector<CycleReport> reports = NoReports();
  reports[2].joined = true;
  reports[0].specs.push_back(Spec("b", 4, Collective::kBroadcast));
  EXPECT_TRUE(coordinator_.Decide(reports, At(0)).ready.empty());
  EXPECT_EQ(coordinator_.pending(), 1);

  reports = NoReports();
  reports[2].joined = true;
  reports[1].specs.push_back(Spec("b", 4, Collective::kBroadcast));
  CycleDecision decision = coordinator_.Decide(reports, At(1));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"b"});
  EXPECT_EQ(decision.ready[0].error.code(), StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, AllJoinedNamesTheLastRankToJoin) {
  std::vector<CycleReport> reports = NoReports();
  reports[2].joined = true;
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  EXPECT_FALSE(decision.all_joined);
  EXPECT_EQ(decision.last_joined_rank, -1);

  reports[0].joined = true;
  decision = coordinator_.Decide(reports, At(1));
  EXPECT_FALSE(decision.all_joined);
  EXPECT_EQ(decision.last_joined_rank, -1);

  reports[1].joined = true;
  decision = coordinator_.Decide(reports, At(2));
  EXPECT_TRUE(decision.all_joined);
  EXPECT_EQ(decision.last_joined_rank, 1);
}

TEST_F(CoordinatorTest, RanksJoiningInOneCycleCountInRankOrder) {
  std::vector<CycleReport> reports = NoReports();
  reports[1].joined = true;
  EXPECT_FALSE(coordinator_.Decide(reports, At(0)).all_joined);
  reports[0].joined = true;
  reports[2].joined = true;
  const CycleDecision decision = coordinator_.Decide(reports, At(1));
  EXPECT_TRUE(decision.all_joined);
  EXPECT_EQ(decision.last_joined_rank, 2);
}

TEST_F(CoordinatorTest, RankShuttingDownFailsOperationsWaitingForIt) {
  std::vector<CycleReport> reports = NoReports();
  reports[0].specs.push_back(Spec("w"));
  reports[1].specs.push_back(Spec("w"));
  reports[2].shutting_down = true;
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  EXPECT_EQ(decision.ready[0].error.code(), StatusCode::kAborted);
  EXPECT_EQ(decision.ready[0].error.message(),
            "tensor 'w': rank 2 shut down without announcing it");
  EXPECT_FALSE(decision.all_shutting_down);
  EXPECT_EQ(coordinator_.pending(), 0);
}

TEST_F(CoordinatorTest, ShutdownFailsAnOperationEvenWhileOtherRanksAreMissing) {
  std::vector<CycleReport> reports = NoReports();
  reports[0].specs.push_back(Spec("w"));
  reports[1].shutting_down = true;
  reports[2].shutting_down = true;
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  EXPECT_EQ(decision.ready[0].error.message(),
            "tensor 'w': ranks 1,2 shut down without announcing it");
}

TEST_F(CoordinatorTest,
       RankShuttingDownAfterAnnouncingDoesNotFailTheOperation) {
  std::vector<CycleReport> reports = NoReports();
  reports[2].specs.push_back(Spec("w"));
  reports[2].shutting_down = true;
  EXPECT_TRUE(coordinator_.Decide(reports, At(0)).ready.empty());

  reports = NoReports();
  reports[0].specs.push_back(Spec("w"));
  reports[1].specs.push_back(Spec("w"));
  reports[2].shutting_down = true;
  CycleDecision decision = coordinator_.Decide(reports, At(1));
  ASSERT_EQ(Names(decision), std::vector<std::string>{"w"});
  EXPECT_TRUE(decision.ready[0].error.ok())
      << decision.ready[0].error.ToString();
}

TEST_F(CoordinatorTest, AllShuttingDown) {
  std::vector<CycleReport> reports = NoReports();
  for (CycleReport& report : reports) report.shutting_down = true;
  EXPECT_TRUE(coordinator_.Decide(reports, At(0)).all_shutting_down);
  reports[1].shutting_down = false;
  EXPECT_FALSE(coordinator_.Decide(reports, At(1)).all_shutting_down);
}

TEST_F(CoordinatorTest, GroupIsReadyOnlyWhenEveryMemberIs) {
  std::vector<CycleReport> reports = EveryRank(Spec("u"));
  for (CycleReport& report : reports)
    report.specs.push_back(GroupSpec("g.0", "g", 2));
  reports[0].specs.push_back(GroupSpec("g.1", "g", 2));
  CycleDecision decision = coordinator_.Decide(reports, At(0));
  // g.0 is ready on all ranks but waits for g.1.
  EXPECT_EQ(Names(decision), std::vector<std::string>{"u"});
  EXPECT_EQ(coordinator_.pending(), 2);

  reports = NoReports();
  reports[1].specs.push_back(GroupSpec("g.1", "g", 2));
  EXPECT_TRUE(coordinator_.Decide(reports, At(1)).ready.empty());

  reports = NoReports();
  reports[2].specs.push_back(GroupSpec("g.1", "g", 2));
  decision = coordinator_.Decide(reports, At(2));
  EXPECT_EQ(Names(decision), (std::vector<std::string>{"g.0", "g.1"}));
  for (const ReadyOperation& op : decision.ready) EXPECT_TRUE(op.error.ok());
  EXPECT_EQ(coordinator_.pending(), 0);
}

TEST_F(CoordinatorTest, FailedMemberFailsTheWholeGroupButNotItsNextUse) {
  std::vector<CycleReport> reports = NoReports();
  for (CycleReport& report : reports) {
    report.specs.push_back(GroupSpec("g.0", "g", 2));
    report.specs.push_back(GroupSpec("g.1", "g", 2));
  }
  reports[2].specs[1].count = 11;
  const std::string message =
      "tensor 'g.1': ranks disagree on the element count: ranks 0,1 have 10; "
      "rank 2 has 11";

  std::vector<ReadyOperation> failed;
  for (int cycle = 0; cycle < 3 && failed.size() < 2; ++cycle) {
    CycleDecision decision =
        coordinator_.Decide(cycle == 0 ? reports : NoReports(), At(cycle));
    for (ReadyOperation& op : decision.ready) failed.push_back(std::move(op));
  }
  ASSERT_EQ(failed.size(), 2u);
  for (const ReadyOperation& op : failed) {
    EXPECT_EQ(op.error.code(), StatusCode::kMismatch) << op.name;
    EXPECT_EQ(op.error.message(), message) << op.name;
  }
  EXPECT_EQ(coordinator_.pending(), 0);

  // The next step's group, announced consistently, succeeds.
  reports[2].specs[1].count = 10;
  CycleDecision decision = coordinator_.Decide(reports, At(10));
  EXPECT_EQ(Names(decision), (std::vector<std::string>{"g.0", "g.1"}));
  for (const ReadyOperation& op : decision.ready) {
    EXPECT_TRUE(op.error.ok()) << op.name << ": " << op.error.ToString();
  }
}

TEST_F(CoordinatorTest, WaitingListsMissingRanksOfOldEnoughOperations) {
  std::vector<CycleReport> reports = NoReports();
  reports[0].specs.push_back(Spec("a"));
  coordinator_.Decide(reports, At(0));
  reports = NoReports();
  reports[1].specs.push_back(Spec("b"));
  coordinator_.Decide(reports, At(5));
  reports = NoReports();
  reports[2].specs.push_back(Spec("a"));  // does not reset a's clock
  coordinator_.Decide(reports, At(8));

  std::vector<WaitingOperation> waiting =
      coordinator_.Waiting(At(10), seconds(6));
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].name, "a");
  EXPECT_EQ(waiting[0].missing_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(waiting[0].waited, seconds(10));

  // Exactly as old as the limit counts.
  waiting = coordinator_.Waiting(At(10), seconds(5));
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_EQ(waiting[0].name, "a");
  EXPECT_EQ(waiting[1].name, "b");
  EXPECT_EQ(waiting[1].missing_ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(waiting[1].waited, seconds(5));

  EXPECT_TRUE(coordinator_.Waiting(At(10), seconds(11)).empty());
}

TEST_F(CoordinatorTest, WaitingLeavesOutJoinedRanks) {
  std::vector<CycleReport> reports = NoReports();
  reports[0].specs.push_back(Spec("b", 4, Collective::kBroadcast));
  reports[2].joined = true;
  coordinator_.Decide(reports, At(0));
  const std::vector<WaitingOperation> waiting =
      coordinator_.Waiting(At(3), seconds(0));
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].missing_ranks, std::vector<int32_t>{1});
}

TEST_F(CoordinatorTest,
       CompletedCachesOnlySuccessfulOperationsWithoutJoinedRanks) {
  std::vector<TensorSpec> specs;
  for (int32_t r = 0; r < kWorldSize; ++r)
    specs.push_back(AllgatherSpec("g", r));

  ReadyOperation ok{"g", specs, std::vector<bool>(kWorldSize, false),
                    Status::Ok()};
  ReadyOperation failed = ok;
  failed.error = Mismatch("tensor 'g': ...");
  ReadyOperation with_joined = ok;
  with_joined.joined[0] = true;

  coordinator_.Completed(failed);
  coordinator_.Completed(with_joined);
  EXPECT_EQ(cache_.size(), 0);

  coordinator_.Completed(ok);
  EXPECT_EQ(cache_.size(), 1);
  const int32_t bit = cache_.Lookup(specs[0], 0);
  ASSERT_GE(bit, 0);
  for (int32_t r = 0; r < kWorldSize; ++r)
    EXPECT_EQ(cache_.Lookup(specs[r], r), bit);
}

}  // namespace
}  // namespace kolo
