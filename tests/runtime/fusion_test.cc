// Tests PlanFusion's batching rules on hand-built ready lists.
#include "runtime/fusion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kolo {
namespace {

constexpr int32_t kWorldSize = 3;
constexpr int64_t kNoCutoff = INT64_MAX;

struct OpOptions {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Collective collective = Collective::kAllreduce;
  std::string group;
  int32_t group_size = 0;
  std::vector<bool> joined = std::vector<bool>(kWorldSize, false);
};

ReadyOperation Op(const std::string& name, int64_t count,
                  const OpOptions& options = {}) {
  TensorSpec spec;
  spec.name = name;
  spec.collective = options.collective;
  spec.type = options.type;
  spec.op = options.op;
  spec.count = count;
  spec.group = options.group;
  spec.group_size = options.group_size;
  ReadyOperation op;
  op.name = name;
  op.specs.assign(kWorldSize, spec);
  op.joined = options.joined;
  return op;
}

ReadyOperation GroupMember(const std::string& name, int64_t count,
                           const std::string& group, int32_t size) {
  OpOptions options;
  options.group = group;
  options.group_size = size;
  return Op(name, count, options);
}

std::vector<std::vector<size_t>> Operations(const std::vector<Batch>& batches) {
  std::vector<std::vector<size_t>> operations;
  for (const Batch& batch : batches) operations.push_back(batch.operations);
  return operations;
}

using Plan = std::vector<std::vector<size_t>>;

TEST(FusionTest, NothingReadyPlansNothing) {
  EXPECT_TRUE(PlanFusion({}, 100, kNoCutoff).empty());
}

TEST(FusionTest, SameKindAllreducesFuseUpToTheThreshold) {
  // float32: 40, 40, 20, 20 bytes; the first three fill 100 exactly.
  const std::vector<ReadyOperation> ready = {Op("a", 10), Op("b", 10),
                                             Op("c", 5), Op("d", 5)};
  const std::vector<Batch> batches = PlanFusion(ready, 100, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 1, 2}, {3}}));
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].bytes, 100);
  EXPECT_EQ(batches[1].bytes, 20);
}

TEST(FusionTest, ByteCountUsesTheElementSize) {
  OpOptions float64;
  float64.type = DataType::kFloat64;
  // 8 * (6 + 6) = 96 bytes fit under 100; a third would not.
  const std::vector<ReadyOperation> ready = {
      Op("a", 6, float64), Op("b", 6, float64), Op("c", 1, float64)};
  const std::vector<Batch> batches = PlanFusion(ready, 100, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 1}, {2}}));
  EXPECT_EQ(batches[0].bytes, 96);
  EXPECT_EQ(batches[1].bytes, 8);
}

TEST(FusionTest, TensorLargerThanTheThresholdRunsAlone) {
  // 40, 120, 40 bytes.
  std::vector<ReadyOperation> ready = {Op("a", 10), Op("big", 30), Op("c", 10)};
  std::vector<Batch> batches = PlanFusion(ready, 100, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 2}, {1}}));
  EXPECT_EQ(batches[0].bytes, 80);
  EXPECT_EQ(batches[1].bytes, 120);

  ready = {Op("big", 30), Op("a", 10)};
  batches = PlanFusion(ready, 100, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0}, {1}}));
  EXPECT_EQ(batches[0].bytes, 120);
}

TEST(FusionTest, LaterSmallerTensorsFillTheBatch) {
  // 80, 40, 20 bytes: 80 + 40 overflows, 80 + 20 fits.
  const std::vector<ReadyOperation> ready = {Op("a", 20), Op("b", 10),
                                             Op("c", 5)};
  const std::vector<Batch> batches = PlanFusion(ready, 100, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 2}, {1}}));
  EXPECT_EQ(batches[0].bytes, 100);
  EXPECT_EQ(batches[1].bytes, 40);
}

TEST(FusionTest, DifferentTypeOpOrJoinedRanksSplitBatches) {
  OpOptions float64;
  float64.type = DataType::kFloat64;
  OpOptions max;
  max.op = ReduceOp::kMax;
  OpOptions joined;
  joined.joined = {false, true, false};
  const std::vector<ReadyOperation> ready = {
      Op("f32", 10),        Op("f64", 10, float64),
      Op("max", 10, max),   Op("joined", 10, joined),
      Op("f32.2", 10),      Op("f64.2", 10, float64),
      Op("max.2", 10, max), Op("joined.2", 10, joined)};
  const std::vector<Batch> batches = PlanFusion(ready, 1000, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[0].bytes, 80);
  EXPECT_EQ(batches[1].bytes, 160);
  EXPECT_EQ(batches[2].bytes, 80);
  EXPECT_EQ(batches[3].bytes, 80);
}

TEST(FusionTest, DifferentJoinedSetsDoNotFuse) {
  OpOptions joined1;
  joined1.joined = {false, true, false};
  OpOptions joined2;
  joined2.joined = {false, false, true};
  const std::vector<ReadyOperation> ready = {Op("a", 1, joined1),
                                             Op("b", 1, joined2)};
  EXPECT_EQ(Operations(PlanFusion(ready, 1000, kNoCutoff)), (Plan{{0}, {1}}));
}

TEST(FusionTest, OtherCollectivesRunAlone) {
  const std::vector<Collective> kinds = {
      Collective::kAllgather, Collective::kBroadcast, Collective::kAlltoall,
      Collective::kReducescatter, Collective::kBarrier};
  std::vector<ReadyOperation> ready;
  for (Collective kind : kinds) {
    OpOptions options;
    options.collective = kind;
    ready.push_back(Op(std::string(CollectiveName(kind)) + ".1", 3, options));
    ready.push_back(Op(std::string(CollectiveName(kind)) + ".2", 3, options));
  }
  const std::vector<Batch> batches = PlanFusion(ready, 1000, kNoCutoff);
  ASSERT_EQ(batches.size(), ready.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].operations, std::vector<size_t>{i});
  }
}

TEST(FusionTest, FailedOperationsRunAlone) {
  // A failed negotiation may leave specs empty (a rank shut down); the
  // planner must not look at them.
  ReadyOperation gone;
  gone.name = "gone";
  gone.error = Aborted("tensor 'gone': rank 2 shut down without announcing it");
  ReadyOperation mismatch = Op("mismatch", 1);
  mismatch.error = Mismatch("tensor 'mismatch': ...");
  const std::vector<ReadyOperation> ready = {Op("a", 1), gone, mismatch,
                                             Op("b", 1)};
  EXPECT_EQ(Operations(PlanFusion(ready, 1000, kNoCutoff)),
            (Plan{{0, 3}, {1}, {2}}));
}

TEST(FusionTest, GroupMembersShareOneBatchWhateverItsSize) {
  // Each member alone (400 bytes) is over the threshold.
  const std::vector<ReadyOperation> ready = {GroupMember("g.0", 100, "g", 3),
                                             GroupMember("g.1", 100, "g", 3),
                                             GroupMember("g.2", 100, "g", 3)};
  const std::vector<Batch> batches = PlanFusion(ready, 100, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 1, 2}}));
  EXPECT_EQ(batches[0].bytes, 1200);
}

TEST(FusionTest, GroupsAndUngroupedOperationsDoNotMix) {
  const std::vector<ReadyOperation> ready = {Op("u.0", 1),
                                             GroupMember("g.0", 1, "g", 2),
                                             GroupMember("h.0", 1, "h", 2),
                                             Op("u.1", 1),
                                             GroupMember("g.1", 1, "g", 2),
                                             GroupMember("h.1", 1, "h", 2)};
  const std::vector<Batch> batches = PlanFusion(ready, 1000, kNoCutoff);
  EXPECT_EQ(Operations(batches), (Plan{{0, 3}, {1, 4}, {2, 5}}));
  for (const Batch& batch : batches) EXPECT_EQ(batch.bytes, 8);
}

TEST(FusionTest, EveryOperationIsPlannedOnceInOrderOfItsFirstOperation) {
  OpOptions float64;
  float64.type = DataType::kFloat64;
  OpOptions broadcast;
  broadcast.collective = Collective::kBroadcast;
  std::vector<ReadyOperation> ready;
  for (int i = 0; i < 40; ++i) {
    const std::string name = "t" + std::to_string(i);
    // Sizes 4 * (i % 7 + 1) * 4 bytes, a mix of kinds and two groups.
    const int64_t count = 4 * (i % 7 + 1);
    switch (i % 5) {
      case 0: ready.push_back(Op(name, count)); break;
      case 1: ready.push_back(Op(name, count, float64)); break;
      case 2: ready.push_back(Op(name, count, broadcast)); break;
      case 3:
        ready.push_back(GroupMember(name, count, i < 20 ? "g" : "h", 4));
        break;
      default: ready.push_back(Op(name, count)); break;
    }
  }
  const std::vector<Batch> batches = PlanFusion(ready, 64, kNoCutoff);

  std::vector<int> times_planned(ready.size(), 0);
  size_t previous_first = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    const std::vector<size_t>& ops = batches[b].operations;
    ASSERT_FALSE(ops.empty());
    if (b > 0) {
      EXPECT_GT(ops.front(), previous_first) << "batch " << b;
    }
    previous_first = ops.front();
    int64_t bytes = 0;
    for (size_t k = 0; k < ops.size(); ++k) {
      ASSERT_LT(ops[k], ready.size());
      ++times_planned[ops[k]];
      if (k > 0) {
        EXPECT_GT(ops[k], ops[k - 1]) << "batch " << b;
      }
      bytes += ready[ops[k]].specs[0].bytes();
      const TensorSpec& first = ready[ops.front()].specs[0];
      const TensorSpec& spec = ready[ops[k]].specs[0];
      EXPECT_EQ(spec.type, first.type) << "batch " << b;
      EXPECT_EQ(spec.group, first.group) << "batch " << b;
      if (ops.size() > 1) {
        EXPECT_EQ(spec.collective, Collective::kAllreduce) << "batch " << b;
      }
    }
    if (ready[ops.front()].specs[0].collective == Collective::kAllreduce) {
      EXPECT_EQ(batches[b].bytes, bytes) << "batch " << b;
      if (ready[ops.front()].specs[0].group.empty() && ops.size() > 1) {
        EXPECT_LE(bytes, 64) << "batch " << b;
      }
    }
  }
  for (size_t i = 0; i < ready.size(); ++i) {
    EXPECT_EQ(times_planned[i], 1) << "operation " << i;
  }
  // Group g holds t3, t8, t13, t18; group h holds t23, t28, t33, t38.
  bool found_g = false;
  bool found_h = false;
  for (const Batch& batch : batches) {
    if (batch.operations == std::vector<size_t>{3, 8, 13, 18}) found_g = true;
    if (batch.operations == std::vector<size_t>{23, 28, 33, 38}) found_h = true;
  }
  EXPECT_TRUE(found_g);
  EXPECT_TRUE(found_h);
}

TEST(FusionTest, TensorsAtTheCutoffRunAloneButGroupsStillFuse) {
  // Floats: 4 bytes each; cutoff 40 bytes = 10 floats.
  const std::vector<ReadyOperation> ready = {
      Op("small", 9), Op("big", 10), Op("small2", 2),
      GroupMember("g0", 50, "g", 2), GroupMember("g1", 1, "g", 2)};
  EXPECT_EQ(Operations(PlanFusion(ready, 1000, 40)),
            (Plan{{0, 2}, {1}, {3, 4}}));
}

}  // namespace
}  // namespace kolo
