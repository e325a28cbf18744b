// Tests the TensorSpec wire format and the cross-rank agreement check.
#include "runtime/tensor_spec.h"

#include <gtest/gtest.h>

#include <functional>

#include <string>
#include <vector>

namespace kolo {
namespace {

TensorSpec Allreduce(const std::string& name, int64_t count) {
  TensorSpec spec;
  spec.name = name;
  spec.collective = Collective::kAllreduce;
  spec.type = DataType::kFloat32;
  spec.op = ReduceOp::kSum;
  spec.count = count;
  return spec;
}

std::vector<const TensorSpec*> Pointers(const std::vector<TensorSpec>& specs) {
  std::vector<const TensorSpec*> by_rank;
  for (const TensorSpec& spec : specs) by_rank.push_back(&spec);
  return by_rank;
}

// Three specs with every field set, each field different between them.
std::vector<TensorSpec> FullSpecs() {
  std::vector<TensorSpec> specs(3);
  specs[0].name = "layer1.weight";
  specs[0].collective = Collective::kAlltoall;
  specs[0].type = DataType::kBFloat16;
  specs[0].op = ReduceOp::kMax;
  specs[0].root = 2;
  specs[0].count = 15;
  specs[0].splits = {1, 2, 3, 4, 5};
  specs[0].expected = {5, 4, 3, 2, 1};
  specs[0].group = "grads";
  specs[0].group_size = 7;

  specs[1].name = "b";
  specs[1].collective = Collective::kReducescatter;
  specs[1].type = DataType::kInt64;
  specs[1].op = ReduceOp::kProduct;
  specs[1].root = -1;
  specs[1].count = int64_t{1} << 40;
  specs[1].splits = {-7};
  specs[1].expected = {};
  specs[1].group = "";
  specs[1].group_size = 0;

  specs[2].name = std::string("nul\0byte", 8);
  specs[2].collective = Collective::kBroadcast;
  specs[2].type = DataType::kUInt8;
  specs[2].op = ReduceOp::kAverage;
  specs[2].root = 1;
  specs[2].count = 3;
  specs[2].splits = {};
  specs[2].expected = {9, 8};
  specs[2].group = "g2";
  specs[2].group_size = 2;
  return specs;
}

// name and group: 4-byte length + bytes; five int32 fields; one int64;
// two vectors: 4-byte length + 8 bytes per element.
size_t WireSize(const TensorSpec& spec) {
  return 4 + spec.name.size() + 5 * 4 + 8 + 4 + 8 * spec.splits.size() + 4 +
         8 * spec.expected.size() + 4 + spec.group.size();
}

void ExpectSameFields(const TensorSpec& actual, const TensorSpec& expected) {
  EXPECT_EQ(actual.name, expected.name);
  EXPECT_EQ(actual.collective, expected.collective);
  EXPECT_EQ(actual.type, expected.type);
  EXPECT_EQ(actual.op, expected.op);
  EXPECT_EQ(actual.root, expected.root);
  EXPECT_EQ(actual.count, expected.count);
  EXPECT_EQ(actual.splits, expected.splits);
  EXPECT_EQ(actual.expected, expected.expected);
  EXPECT_EQ(actual.group, expected.group);
  EXPECT_EQ(actual.group_size, expected.group_size);
}

TEST(TensorSpecSerializeTest, RoundTripsSpecsBackToBackInOneBuffer) {
  const std::vector<TensorSpec> specs = FullSpecs();
  std::string buffer;
  size_t expected_size = 0;
  for (const TensorSpec& spec : specs) {
    SerializeSpec(spec, &buffer);
    expected_size += WireSize(spec);
    EXPECT_EQ(buffer.size(), expected_size);
  }

  size_t offset = 0;
  size_t end_of_record = 0;
  for (const TensorSpec& spec : specs) {
    StatusOr<TensorSpec> parsed = ParseSpec(buffer, &offset);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ExpectSameFields(*parsed, spec);
    EXPECT_TRUE(*parsed == spec);
    end_of_record += WireSize(spec);
    EXPECT_EQ(offset, end_of_record);
  }
  EXPECT_EQ(offset, buffer.size());
}

TEST(TensorSpecSerializeTest, AppendsWithoutTouchingEarlierBytes) {
  std::string buffer = "prefix";
  SerializeSpec(FullSpecs()[0], &buffer);
  EXPECT_EQ(buffer.substr(0, 6), "prefix");
  size_t offset = 6;
  StatusOr<TensorSpec> parsed = ParseSpec(buffer, &offset);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ExpectSameFields(*parsed, FullSpecs()[0]);
}

TEST(TensorSpecSerializeTest, EveryTruncationIsAnErrorNotACrash) {
  const std::vector<TensorSpec> specs = FullSpecs();
  for (const TensorSpec& spec : specs) {
    std::string buffer;
    SerializeSpec(spec, &buffer);
    for (size_t length = 0; length < buffer.size(); ++length) {
      size_t offset = 0;
      StatusOr<TensorSpec> parsed =
          ParseSpec(buffer.substr(0, length), &offset);
      ASSERT_FALSE(parsed.ok())
          << "truncated to " << length << " of " << buffer.size();
      EXPECT_EQ(parsed.status().code(), StatusCode::kInternal);
      EXPECT_LE(offset, length);
    }
  }
}

TEST(TensorSpecSerializeTest, TruncatedSecondRecordFailsAfterFirstParses) {
  const std::vector<TensorSpec> specs = FullSpecs();
  std::string buffer;
  SerializeSpec(specs[0], &buffer);
  const size_t first_size = buffer.size();
  SerializeSpec(specs[1], &buffer);
  for (size_t length = first_size; length < buffer.size(); ++length) {
    const std::string truncated = buffer.substr(0, length);
    size_t offset = 0;
    StatusOr<TensorSpec> first = ParseSpec(truncated, &offset);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(first->name, specs[0].name);
    EXPECT_EQ(offset, first_size);
    EXPECT_FALSE(ParseSpec(truncated, &offset).ok())
        << "truncated to " << length;
  }
}

TEST(TensorSpecSerializeTest, HugeLengthPrefixesAreErrors) {
  // A name claiming 2^32-1 bytes.
  std::string bad_name(4, '\xff');
  size_t offset = 0;
  EXPECT_EQ(ParseSpec(bad_name, &offset).status().code(),
            StatusCode::kInternal);

  // A valid record whose splits claim 2^32-1 elements followed by none.
  std::string buffer;
  TensorSpec spec = Allreduce("w", 4);
  SerializeSpec(spec, &buffer);
  const size_t splits_length_at = 4 + 1 + 4 * 4 + 8;
  buffer.replace(splits_length_at, 4, std::string(4, '\xff'));
  offset = 0;
  EXPECT_EQ(ParseSpec(buffer, &offset).status().code(), StatusCode::kInternal);
}

// Fields no rank could have sent are refused where the bytes are read, so
// that nothing downstream sizes a buffer from them: an unknown collective,
// data type or reduce op, a negative count or group size.
TEST(TensorSpecSerializeTest, ImpossibleFieldsAreErrorsNamingTheField) {
  struct Case {
    const char* field;
    std::function<void(TensorSpec*)> spoil;
  };
  const std::vector<Case> cases = {
      {"collective 99",
       [](TensorSpec* s) { s->collective = static_cast<Collective>(99); }},
      {"data type 42",
       [](TensorSpec* s) { s->type = static_cast<DataType>(42); }},
      {"reduce op -3",
       [](TensorSpec* s) { s->op = static_cast<ReduceOp>(-3); }},
      {"count -8", [](TensorSpec* s) { s->count = -8; }},
      {"group size -1", [](TensorSpec* s) { s->group_size = -1; }},
  };
  for (const Case& c : cases) {
    TensorSpec spec = Allreduce("w", 4);
    c.spoil(&spec);
    std::string buffer;
    SerializeSpec(spec, &buffer);
    size_t offset = 0;
    StatusOr<TensorSpec> parsed = ParseSpec(buffer, &offset);
    ASSERT_FALSE(parsed.ok()) << c.field;
    EXPECT_NE(parsed.status().message().find(c.field), std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find("tensor 'w'"), std::string::npos);
  }
}

TEST(TensorSpecTest, BytesIsCountTimesElementSize) {
  TensorSpec spec = Allreduce("w", 10);
  spec.type = DataType::kFloat64;
  EXPECT_EQ(spec.bytes(), 80);
  spec.type = DataType::kFloat16;
  EXPECT_EQ(spec.bytes(), 20);
}

TEST(TensorSpecTest, EqualityComparesEveryField) {
  const TensorSpec base = FullSpecs()[0];
  EXPECT_TRUE(base == FullSpecs()[0]);
  std::vector<TensorSpec> changed(10, base);
  changed[0].name = "other";
  changed[1].collective = Collective::kAllgather;
  changed[2].type = DataType::kFloat32;
  changed[3].op = ReduceOp::kSum;
  changed[4].root = 0;
  changed[5].count = 16;
  changed[6].splits.push_back(6);
  changed[7].expected.pop_back();
  changed[8].group = "other";
  changed[9].group_size = 8;
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_TRUE(changed[i] != base) << "field " << i;
    EXPECT_FALSE(changed[i] == base) << "field " << i;
  }
}

TEST(TensorSpecCheckTest, IdenticalSpecsAgree) {
  const std::vector<TensorSpec> specs(3, Allreduce("w", 10));
  EXPECT_TRUE(CheckSpecsAgree(Pointers(specs), 3).ok());
}

TEST(TensorSpecCheckTest, NoPresentRankAgrees) {
  EXPECT_TRUE(CheckSpecsAgree({nullptr, nullptr, nullptr}, 3).ok());
}

void ExpectMismatch(const std::vector<TensorSpec>& specs,
                    const std::string& message) {
  const Status status =
      CheckSpecsAgree(Pointers(specs), static_cast<int32_t>(specs.size()));
  EXPECT_EQ(status.code(), StatusCode::kMismatch) << status.ToString();
  EXPECT_EQ(status.message(), message);
}

TEST(TensorSpecCheckTest, CountMismatchGroupsRanksByValue) {
  std::vector<TensorSpec> specs(3, Allreduce("w", 10));
  specs[1].count = 12;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the element count: ranks 0,2 have 10; "
      "rank 1 has 12");
}

TEST(TensorSpecCheckTest, ValuesAreListedInOrderOfFirstRank) {
  std::vector<TensorSpec> specs(5, Allreduce("w", 1));
  specs[1].count = 3;
  specs[3].count = 2;
  specs[4].count = 3;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the element count: ranks 0,2 have 1; "
      "ranks 1,4 have 3; rank 3 has 2");
}

TEST(TensorSpecCheckTest, DataTypeMismatch) {
  std::vector<TensorSpec> specs(3, Allreduce("w", 10));
  specs[2].type = DataType::kInt64;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the data type: ranks 0,1 have float32; "
      "rank 2 has int64");
}

TEST(TensorSpecCheckTest, ReduceOpMismatch) {
  std::vector<TensorSpec> specs(3, Allreduce("w", 10));
  specs[1].op = ReduceOp::kMax;
  specs[2].op = ReduceOp::kMax;
  ExpectMismatch(specs,
                 "tensor 'w': ranks disagree on the reduce op: rank 0 has sum; "
                 "ranks 1,2 have max");
}

TEST(TensorSpecCheckTest, RootMismatch) {
  std::vector<TensorSpec> specs(3, Allreduce("b", 4));
  for (TensorSpec& spec : specs) spec.collective = Collective::kBroadcast;
  specs[0].root = 0;
  specs[1].root = 1;
  specs[2].root = 0;
  ExpectMismatch(
      specs,
      "tensor 'b': ranks disagree on the root: ranks 0,2 have 0; rank 1 has 1");
}

TEST(TensorSpecCheckTest, OperationMismatch) {
  std::vector<TensorSpec> specs(3, Allreduce("w", 10));
  specs[1].collective = Collective::kAllgather;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the operation: ranks 0,2 have allreduce; "
      "rank 1 has allgather");
}

TEST(TensorSpecCheckTest, OperationIsReportedBeforeOtherFields) {
  std::vector<TensorSpec> specs(2, Allreduce("w", 10));
  specs[1].collective = Collective::kBroadcast;
  specs[1].count = 11;
  specs[1].type = DataType::kInt8;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the operation: rank 0 has allreduce; "
      "rank 1 has broadcast");
}

TEST(TensorSpecCheckTest, GroupNameMismatch) {
  std::vector<TensorSpec> specs(3, Allreduce("w", 10));
  specs[0].group = "g";
  specs[0].group_size = 2;
  specs[1].group = "g";
  specs[1].group_size = 2;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the group: ranks 0,1 have 'g' of 2; "
      "rank 2 has none");
}

TEST(TensorSpecCheckTest, GroupSizeMismatch) {
  std::vector<TensorSpec> specs(2, Allreduce("w", 10));
  specs[0].group = "g";
  specs[0].group_size = 2;
  specs[1].group = "g";
  specs[1].group_size = 3;
  ExpectMismatch(
      specs,
      "tensor 'w': ranks disagree on the group: rank 0 has 'g' of 2; "
      "rank 1 has 'g' of 3");
}

TEST(TensorSpecCheckTest, JoinedRanksAreIgnoredAndRanksKeepTheirNumbers) {
  const TensorSpec ten = Allreduce("w", 10);
  TensorSpec twelve = Allreduce("w", 12);
  EXPECT_TRUE(CheckSpecsAgree({nullptr, &ten, &ten}, 3).ok());
  EXPECT_TRUE(CheckSpecsAgree({&ten, nullptr, &ten}, 3).ok());

  const Status status = CheckSpecsAgree({&ten, nullptr, &twelve}, 3);
  EXPECT_EQ(status.code(), StatusCode::kMismatch);
  EXPECT_EQ(status.message(),
            "tensor 'w': ranks disagree on the element count: rank 0 has 10; "
            "rank 2 has 12");
}

// Allgather where rank r contributes r + 1 elements.
std::vector<TensorSpec> Allgather(int32_t world_size) {
  std::vector<TensorSpec> specs(world_size, Allreduce("g", 0));
  for (int32_t r = 0; r < world_size; ++r) {
    specs[r].collective = Collective::kAllgather;
    specs[r].count = r + 1;
  }
  return specs;
}

TEST(TensorSpecCheckTest, AllgatherCountsMayDiffer) {
  EXPECT_TRUE(CheckSpecsAgree(Pointers(Allgather(3)), 3).ok());
}

TEST(TensorSpecCheckTest, AllgatherExpectedCountsMatchingTheSendersAgree) {
  std::vector<TensorSpec> specs = Allgather(3);
  specs[0].splits = {1, 2, 3};
  specs[2].splits = {1, 2, 3};  // rank 1 does not say
  EXPECT_TRUE(CheckSpecsAgree(Pointers(specs), 3).ok());
}

TEST(TensorSpecCheckTest,
     AllgatherExpectedCountDifferingFromTheSenderIsAMismatch) {
  std::vector<TensorSpec> specs = Allgather(3);
  specs[0].splits = {1, 2, 3};
  specs[2].splits = {1, 5, 3};
  ExpectMismatch(
      specs,
      "tensor 'g': rank 1 sends 2 elements but rank 2 expects 5 from it "
      "(counts [1,5,3])");
}

TEST(TensorSpecCheckTest, AllgatherExpectedCountsOfTheWrongLength) {
  std::vector<TensorSpec> specs = Allgather(3);
  specs[1].splits = {1, 2};
  const Status status = CheckSpecsAgree(Pointers(specs), 3);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "tensor 'g' on rank 1: expects 2 counts for 3 ranks");
}

// Alltoall where rank r sends 3r + d + 1 elements to rank d, and each rank
// expects exactly that.
std::vector<TensorSpec> Alltoall() {
  std::vector<TensorSpec> specs(3, Allreduce("a", 0));
  for (int32_t r = 0; r < 3; ++r) {
    specs[r].collective = Collective::kAlltoall;
    specs[r].count = 0;
    for (int32_t d = 0; d < 3; ++d) {
      specs[r].splits.push_back(3 * r + d + 1);
      specs[r].expected.push_back(3 * d + r + 1);
      specs[r].count += 3 * r + d + 1;
    }
  }
  return specs;
}

TEST(TensorSpecCheckTest, AlltoallWithConsistentSplitsAgrees) {
  EXPECT_TRUE(CheckSpecsAgree(Pointers(Alltoall()), 3).ok());
  std::vector<TensorSpec> specs = Alltoall();
  for (TensorSpec& spec : specs) spec.expected.clear();  // nobody says
  EXPECT_TRUE(CheckSpecsAgree(Pointers(specs), 3).ok());
}

TEST(TensorSpecCheckTest, AlltoallSplitsAndExpectedCrossCheck) {
  std::vector<TensorSpec> specs = Alltoall();
  // Rank 1 sends 3*1 + 2 + 1 = 6 to rank 2; rank 2 expects 7.
  specs[2].expected[1] = 7;
  ExpectMismatch(
      specs,
      "tensor 'a': rank 1 sends 6 elements to rank 2, which expects 7 from it");
}

TEST(TensorSpecCheckTest, AlltoallSplitsOfTheWrongLength) {
  std::vector<TensorSpec> specs = Alltoall();
  specs[1].splits.pop_back();
  const Status status = CheckSpecsAgree(Pointers(specs), 3);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "tensor 'a' on rank 1: 2 send counts for 3 ranks");
}

TEST(TensorSpecCheckTest, AlltoallExpectedCountsOfTheWrongLength) {
  std::vector<TensorSpec> specs = Alltoall();
  specs[0].expected = {1};
  const Status status = CheckSpecsAgree(Pointers(specs), 3);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "tensor 'a' on rank 0: 1 receive counts for 3 ranks");
}

TEST(TensorSpecCheckTest, ReducescatterMustSplitEvenly) {
  std::vector<TensorSpec> specs(3, Allreduce("r", 10));
  for (TensorSpec& spec : specs) spec.collective = Collective::kReducescatter;
  const Status status = CheckSpecsAgree(Pointers(specs), 3);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "tensor 'r': reducescatter of 10 elements does not split evenly "
            "over 3 ranks");

  for (TensorSpec& spec : specs) spec.count = 12;
  EXPECT_TRUE(CheckSpecsAgree(Pointers(specs), 3).ok());
}

TEST(TensorSpecCheckTest, BroadcastRootMustBeARank) {
  std::vector<TensorSpec> specs(3, Allreduce("b", 4));
  for (TensorSpec& spec : specs) spec.collective = Collective::kBroadcast;
  for (int32_t root : {-1, 3}) {
    for (TensorSpec& spec : specs) spec.root = root;
    const Status status = CheckSpecsAgree(Pointers(specs), 3);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "tensor 'b': broadcast root " +
                                    std::to_string(root) +
                                    " is not a rank of a 3-rank world");
  }
  for (int32_t root : {0, 2}) {
    for (TensorSpec& spec : specs) spec.root = root;
    EXPECT_TRUE(CheckSpecsAgree(Pointers(specs), 3).ok()) << "root " << root;
  }
}

}  // namespace
}  // namespace kolo
