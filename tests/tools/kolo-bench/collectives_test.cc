// Tests of kolo-bench's pure pieces: bus-bandwidth factors, the size sweep,
// iteration caps, input values and their expectations (checked against a
// reference written here from kolo.h's contract), and table formatting.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "collectives.h"
#include "table.h"

namespace kolo::bench {
namespace {

const CollectiveDescriptor& Get(const std::string& name) {
  StatusOr<const CollectiveDescriptor*> collective = FindCollective(name);
  EXPECT_TRUE(collective.ok()) << collective.status().ToString();
  return **collective;
}

TEST(CollectivesTest, ListsEveryCollectiveOfTheApi) {
  std::vector<std::string> names;
  for (const CollectiveDescriptor& c : AllCollectives())
    names.push_back(c.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"allreduce", "allgather", "broadcast",
                                      "alltoall", "reducescatter"}));
  StatusOr<const CollectiveDescriptor*> missing = FindCollective("reduce");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("reduce"), std::string::npos);
}

TEST(CollectivesTest, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(Get("allreduce").bus_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(Get("allreduce").bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(Get("allreduce").bus_factor(1), 0.0);
  EXPECT_DOUBLE_EQ(Get("allgather").bus_factor(4), 0.75);
  EXPECT_DOUBLE_EQ(Get("reducescatter").bus_factor(8), 0.875);
  EXPECT_DOUBLE_EQ(Get("alltoall").bus_factor(2), 0.5);
  EXPECT_DOUBLE_EQ(Get("broadcast").bus_factor(8), 1.0);
}

TEST(CollectivesTest, MeasurementDerivesBandwidths) {
  // 2 GB in 1 s: algbw 2 GB/s; an allreduce on 4 ranks carries 1.5x that.
  Measurement m = MakeMeasurement(2'000'000'000, 1.0, 1.5, int64_t{3});
  EXPECT_DOUBLE_EQ(m.time_us, 1e6);
  EXPECT_DOUBLE_EQ(m.algbw_gbps, 2.0);
  EXPECT_DOUBLE_EQ(m.busbw_gbps, 3.0);
  EXPECT_EQ(m.wrong, 3);
  EXPECT_EQ(Bandwidth(100, 0.0), 0.0);
}

TEST(CollectivesTest, ContextSwitchesCountEveryThreadOfTheProcess) {
  // A thread that sleeps gives up its core at each sleep: 20 voluntary
  // switches at least, counted for the process as a whole.
  const int64_t before = ProcessContextSwitches();
  std::thread sleeper([] {
    for (int i = 0; i < 20; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  sleeper.join();
  EXPECT_GE(ProcessContextSwitches() - before, 20);
}

TEST(CollectivesTest, SizeSweepIsGeometricAndInclusive) {
  EXPECT_EQ(SizeSweep(8, 64, 2), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(SizeSweep(3, 100, 4), (std::vector<int64_t>{3, 12, 48}));
  EXPECT_EQ(SizeSweep(0, 4, 2), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(SizeSweep(16, 16, 2), (std::vector<int64_t>{16}));
  EXPECT_TRUE(SizeSweep(32, 16, 2).empty());
  // Near the top of int64 the sweep stops instead of overflowing.
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(SizeSweep(big, INT64_MAX, 4), (std::vector<int64_t>{big}));
}

TEST(CollectivesTest, SizesRoundToWholeBlocksPerRank) {
  EXPECT_EQ(RoundedElements(100, DataType::kFloat32, 4), 24);
  EXPECT_EQ(RoundedElements(100, DataType::kInt8, 3), 99);
  EXPECT_EQ(RoundedElements(7, DataType::kFloat32, 2), 0);
  EXPECT_EQ(RoundedElements(8, DataType::kFloat64, 1), 1);
}

TEST(CollectivesTest, IterationsAreCappedAtOneGiBPerSize) {
  EXPECT_EQ(CappedIterations(20, 8), 20);
  EXPECT_EQ(CappedIterations(20, 256 << 20), 4);
  EXPECT_EQ(CappedIterations(20, int64_t{1} << 30), 1);
  EXPECT_EQ(CappedIterations(20, int64_t{4} << 30), 1);
  EXPECT_EQ(CappedIterations(0, int64_t{4} << 30), 0);
  EXPECT_EQ(CappedIterations(5, 0), 5);
}

TEST(CollectivesTest, InPlaceLayoutsFollowTheApiConvention) {
  // allgather: send = recv + rank * count.
  BufferLayout gather = Get("allgather").layout(12, 2, 4);
  EXPECT_EQ(gather.call_count, 3);
  EXPECT_EQ(gather.send_elements, 3);
  EXPECT_EQ(gather.recv_elements, 12);
  EXPECT_EQ(gather.in_place_elements, 12);
  EXPECT_EQ(gather.in_place_send_offset, 6);
  EXPECT_EQ(gather.in_place_recv_offset, 0);
  // reducescatter: recv = send + rank * recv_count.
  BufferLayout scatter = Get("reducescatter").layout(12, 3, 4);
  EXPECT_EQ(scatter.call_count, 3);
  EXPECT_EQ(scatter.send_elements, 12);
  EXPECT_EQ(scatter.recv_elements, 3);
  EXPECT_EQ(scatter.in_place_send_offset, 0);
  EXPECT_EQ(scatter.in_place_recv_offset, 9);
  // alltoall: count is the per-peer block, same pointer in place.
  BufferLayout a2a = Get("alltoall").layout(12, 1, 4);
  EXPECT_EQ(a2a.call_count, 3);
  EXPECT_EQ(a2a.send_elements, 12);
  EXPECT_EQ(a2a.recv_elements, 12);
  EXPECT_EQ(a2a.in_place_send_offset, a2a.in_place_recv_offset);
  for (const char* name : {"allreduce", "broadcast"}) {
    BufferLayout whole = Get(name).layout(12, 1, 4);
    EXPECT_EQ(whole.call_count, 12) << name;
    EXPECT_EQ(whole.send_elements, 12) << name;
    EXPECT_EQ(whole.recv_elements, 12) << name;
  }
}

TEST(CollectivesTest, ValuesAreExactInEveryTypeAndNeverZero) {
  for (const CollectiveDescriptor& c : AllCollectives()) {
    for (ReduceOp op : AllReduceOps()) {
      for (DataType type : AllDataTypes()) {
        for (int32_t n : {1, 2, 3, 8, 21}) {
          for (int32_t rank = 0; rank < n; ++rank) {
            SCOPED_TRACE(::testing::Message()
                         << c.name << " " << ReduceOpName(op) << " "
                         << DataTypeName(type) << " n=" << n
                         << " rank=" << rank);
            const BufferLayout layout = c.layout(5 * n, rank, n);
            std::vector<double> values;
            for (int64_t i = 0; i < layout.send_elements; ++i) {
              values.push_back(InputValue(c, op, rank, n, i));
            }
            for (int64_t k = 0; k < layout.recv_elements; ++k) {
              values.push_back(ExpectedValue(c, op, type, rank, n, n - 1,
                                             layout.call_count, k));
            }
            for (double v : values) {
              EXPECT_NE(v, 0.0);
              EXPECT_EQ(v, std::floor(v));
              unsigned char storage[8];
              StoreElement(type, storage, 0, v);
              EXPECT_EQ(LoadElement(type, storage, 0), v);
            }
          }
        }
      }
    }
  }
}

TEST(CollectivesTest, ReductionsOfTheInputsAreDistinguishable) {
  const CollectiveDescriptor& allreduce = Get("allreduce");
  const DataType f32 = DataType::kFloat32;
  // With two ranks, a backend that sums instead of multiplying, or that
  // returns one rank's input, gets some element wrong.
  bool sum_differs_from_prod = false;
  for (int64_t k = 0; k < 6; ++k) {
    const double prod =
        ExpectedValue(allreduce, ReduceOp::kProduct, f32, 0, 2, 0, 6, k);
    const double sum_of_prod_inputs =
        InputValue(allreduce, ReduceOp::kProduct, 0, 2, k) +
        InputValue(allreduce, ReduceOp::kProduct, 1, 2, k);
    sum_differs_from_prod |= prod != sum_of_prod_inputs;
    EXPECT_LE(prod, 16);
    const double avg =
        ExpectedValue(allreduce, ReduceOp::kAverage, f32, 0, 2, 0, 6, k);
    EXPECT_NE(avg, InputValue(allreduce, ReduceOp::kAverage, 0, 2, k));
    EXPECT_NE(avg, InputValue(allreduce, ReduceOp::kAverage, 1, 2, k));
    EXPECT_LT(ExpectedValue(allreduce, ReduceOp::kMin, f32, 0, 2, 0, 6, k),
              ExpectedValue(allreduce, ReduceOp::kMax, f32, 0, 2, 0, 6, k));
  }
  EXPECT_TRUE(sum_differs_from_prod);
}

TEST(CollectivesTest, ProductsStaySmallForLargeWorlds) {
  const CollectiveDescriptor& allreduce = Get("allreduce");
  for (int64_t k = 0; k < 12; ++k) {
    EXPECT_LE(ExpectedValue(allreduce, ReduceOp::kProduct, DataType::kInt8, 0,
                            64, 0, 12, k),
              16);
  }
}

TEST(CollectivesTest, IntegerAverageIsExactBecauseOffsetsCancel) {
  const CollectiveDescriptor& allreduce = Get("allreduce");
  for (int32_t n : {1, 2, 3, 5, 8}) {
    for (int64_t k = 0; k < 10; ++k) {
      double sum = 0;
      for (int32_t r = 0; r < n; ++r) {
        sum += InputValue(allreduce, ReduceOp::kAverage, r, n, k);
      }
      EXPECT_EQ(ExpectedValue(allreduce, ReduceOp::kAverage, DataType::kInt32,
                              0, n, 0, 10, k),
                sum / n);
    }
  }
}

// A reference written from kolo.h alone: what each rank receives, given what
// every rank sent. The bench's descriptors must agree with it.
std::vector<std::vector<double>> Reference(
    const std::string& name, const std::vector<std::vector<double>>& send,
    int64_t count, ReduceOp op, int32_t root) {
  const int32_t n = static_cast<int32_t>(send.size());
  auto reduce = [&](int64_t index) {
    double acc = send[0][index];
    for (int32_t r = 1; r < n; ++r) {
      const double v = send[r][index];
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage: acc += v; break;
        case ReduceOp::kProduct: acc *= v; break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
      }
    }
    // Every sum of the bench's inputs divides evenly, so truncation and
    // exact division agree.
    return op == ReduceOp::kAverage ? acc / n : acc;
  };
  std::vector<std::vector<double>> recv(n);
  for (int32_t rank = 0; rank < n; ++rank) {
    std::vector<double>& out = recv[rank];
    if (name == "allreduce") {
      for (int64_t i = 0; i < count; ++i) out.push_back(reduce(i));
    } else if (name == "broadcast") {
      out = send[root];
    } else if (name == "allgather") {
      for (int32_t j = 0; j < n; ++j) {
        out.insert(out.end(), send[j].begin(), send[j].end());
      }
    } else if (name == "alltoall") {
      for (int32_t j = 0; j < n; ++j) {
        out.insert(out.end(), send[j].begin() + rank * count,
                   send[j].begin() + (rank + 1) * count);
      }
    } else if (name == "reducescatter") {
      for (int64_t i = 0; i < count; ++i)
        out.push_back(reduce(rank * count + i));
    }
  }
  return recv;
}

TEST(CollectivesTest, CheckAcceptsTheReferenceResultAndCountsEachError) {
  const int64_t elements_per_rank = 6;
  for (const CollectiveDescriptor& c : AllCollectives()) {
    for (ReduceOp op : AllReduceOps()) {
      if (!c.reduces && op != ReduceOp::kSum) continue;
      for (DataType type :
           {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
            DataType::kInt8, DataType::kUInt8, DataType::kInt64}) {
        for (int32_t n : {1, 2, 3, 4}) {
          SCOPED_TRACE(::testing::Message()
                       << c.name << " " << ReduceOpName(op) << " "
                       << DataTypeName(type) << " n=" << n);
          const int64_t elements = elements_per_rank * n;
          const int32_t root = n - 1;
          const int64_t size = DataTypeSize(type);
          std::vector<std::vector<double>> send(n);
          int64_t call_count = 0;
          for (int32_t r = 0; r < n; ++r) {
            const BufferLayout layout = c.layout(elements, r, n);
            call_count = layout.call_count;
            std::vector<unsigned char> bytes(layout.send_elements * size);
            FillInputs(c, op, type, r, n, bytes.data(), layout.send_elements);
            for (int64_t i = 0; i < layout.send_elements; ++i) {
              send[r].push_back(LoadElement(type, bytes.data(), i));
            }
          }
          const auto recv = Reference(c.name, send, call_count, op, root);
          for (int32_t r = 0; r < n; ++r) {
            const BufferLayout layout = c.layout(elements, r, n);
            ASSERT_EQ(static_cast<int64_t>(recv[r].size()),
                      layout.recv_elements);
            std::vector<unsigned char> bytes(layout.recv_elements * size);
            for (int64_t i = 0; i < layout.recv_elements; ++i) {
              StoreElement(type, bytes.data(), i, recv[r][i]);
            }
            EXPECT_EQ(CountWrong(c, op, type, r, n, root, call_count,
                                 bytes.data(), layout.recv_elements),
                      0);
            // One corrupted element is one wrong value; a zeroed buffer
            // (a call that wrote nothing) is wrong everywhere.
            StoreElement(type, bytes.data(), layout.recv_elements - 1, 0);
            EXPECT_EQ(CountWrong(c, op, type, r, n, root, call_count,
                                 bytes.data(), layout.recv_elements),
                      1);
            std::fill(bytes.begin(), bytes.end(), 0);
            EXPECT_EQ(CountWrong(c, op, type, r, n, root, call_count,
                                 bytes.data(), layout.recv_elements),
                      layout.recv_elements);
          }
        }
      }
    }
  }
}

TEST(CollectivesTest, BlocksFromTheWrongRankAreCaught) {
  // Swapping the two halves of an allgather's output must not pass.
  const CollectiveDescriptor& allgather = Get("allgather");
  const int32_t n = 2;
  const int64_t count = 4;
  std::vector<float> recv;
  for (int32_t j : {1, 0}) {
    for (int64_t i = 0; i < count; ++i) {
      recv.push_back(
          static_cast<float>(InputValue(allgather, ReduceOp::kSum, j, n, i)));
    }
  }
  EXPECT_EQ(CountWrong(allgather, ReduceOp::kSum, DataType::kFloat32, 0, n, 0,
                       count, recv.data(), n * count),
            n * count);
}

TEST(CollectivesTest, ParsesDefaultFlags) {
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags({});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->min_bytes, 8);
  EXPECT_EQ(config->max_bytes, 256 << 20);
  EXPECT_EQ(config->step_factor, 2);
  EXPECT_EQ(config->collectives.size(), AllCollectives().size());
  EXPECT_EQ(config->types, std::vector<DataType>{DataType::kFloat32});
  EXPECT_EQ(config->op, ReduceOp::kSum);
  EXPECT_EQ(config->root, 0);
  EXPECT_EQ(config->iters, 20);
  EXPECT_EQ(config->warmup, 5);
  EXPECT_TRUE(config->check);
  EXPECT_TRUE(config->json_path.empty());
}

TEST(CollectivesTest, ParsesListsAndSuffixes) {
  CollectivesFlags flags;
  flags.min_bytes = 1024;
  flags.max_bytes = 2 << 20;
  flags.ops = "broadcast, allreduce,broadcast";
  flags.dtypes = "all";
  flags.op = "prod";
  flags.check = 0;
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags(flags);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->min_bytes, 1024);
  EXPECT_EQ(config->max_bytes, 2 << 20);
  ASSERT_EQ(config->collectives.size(), 2u);
  EXPECT_STREQ(config->collectives[0]->name, "broadcast");
  EXPECT_STREQ(config->collectives[1]->name, "allreduce");
  EXPECT_EQ(config->types, AllDataTypes());
  EXPECT_EQ(config->op, ReduceOp::kProduct);
  EXPECT_FALSE(config->check);
}

TEST(CollectivesTest, RejectsBadFlagsNamingThem) {
  struct Case {
    void (*edit)(CollectivesFlags*);
    const char* flag;
  };
  const Case cases[] = {
      {[](CollectivesFlags* f) { f->ops = "allreduce,gossip"; }, "--ops"},
      {[](CollectivesFlags* f) { f->ops = ","; }, "--ops"},
      {[](CollectivesFlags* f) { f->dtypes = "float8"; }, "--dtype"},
      {[](CollectivesFlags* f) { f->op = "xor"; }, "--op"},
      {[](CollectivesFlags* f) { f->min_bytes = 4 << 20; }, "--minbytes"},
      {[](CollectivesFlags* f) { f->max_bytes = 4; }, "--maxbytes"},
      {[](CollectivesFlags* f) { f->step_factor = 1; }, "--stepfactor"},
      {[](CollectivesFlags* f) { f->root = -1; }, "--root"},
      {[](CollectivesFlags* f) { f->iters = 0; }, "--iters"},
      {[](CollectivesFlags* f) { f->warmup = -1; }, "--warmup"},
      {[](CollectivesFlags* f) { f->check = 2; }, "--check"},
  };
  for (const Case& c : cases) {
    CollectivesFlags flags;
    flags.max_bytes = 1 << 20;
    c.edit(&flags);
    StatusOr<CollectivesConfig> config = ParseCollectivesFlags(flags);
    ASSERT_FALSE(config.ok()) << c.flag;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(config.status().ToString().find(c.flag), std::string::npos)
        << config.status().ToString();
  }
}

TEST(TableTest, AlignsHeaderAndRows) {
  Table table({{"a", "", 3, "", true},
               {"b", "(u)", 5, "g", false},
               {"c", "", 4, "g", false}});
  EXPECT_EQ(table.HeaderLines(),
            (std::vector<std::string>{"#         g", "# a       b    c",
                                      "#       (u)"}));
  EXPECT_EQ(table.Row({"x", "1", "22"}), "  x       1   22");
  // Missing cells print empty; extra cells are dropped.
  EXPECT_EQ(table.Row({"x"}), "  x");
  EXPECT_EQ(table.Row({"x", "1", "22", "extra"}), "  x       1   22");
  // An over-wide cell pushes the rest right rather than being cut.
  EXPECT_EQ(table.Row({"wide", "1", "2"}), "  wide     1    2");
}

TEST(TableTest, OmitsGroupAndUnitLinesWhenUnused) {
  Table table({{"x", "", 2, "", false}});
  EXPECT_EQ(table.HeaderLines(), std::vector<std::string>{"#  x"});
}

TEST(TableTest, FormatsFixedDecimals) {
  EXPECT_EQ(FormatFixed(12.5, 2), "12.50");
  EXPECT_EQ(FormatFixed(0.004, 2), "0.00");
  EXPECT_EQ(FormatFixed(3.14159, 0), "3");
}

ResultRow SampleRow(const char* collective, std::optional<ReduceOp> op,
                    int32_t root, double busbw, std::optional<int64_t> wrong) {
  ResultRow row;
  row.collective = collective;
  row.bytes = 1024;
  row.elements = 256;
  row.type = DataType::kFloat32;
  row.op = op;
  row.root = root;
  row.out_of_place = {12.345, 1.0, busbw, wrong};
  row.in_place = {10.0, 1.0, busbw + 1, wrong};
  return row;
}

TEST(CollectivesTest, RowCellsMatchTheColumns) {
  const ResultRow row = SampleRow("broadcast", std::nullopt, 1, 2.0, 0);
  const std::vector<std::string> cells = RowCells(row);
  ASSERT_EQ(cells.size(), CollectivesTable().columns().size());
  EXPECT_EQ(cells,
            (std::vector<std::string>{"broadcast", "1024", "256", "float32",
                                      "none", "1", "12.35", "1.00", "2.00", "0",
                                      "10.00", "1.00", "3.00", "0"}));
  const std::vector<std::string> unchecked =
      RowCells(SampleRow("allreduce", ReduceOp::kMax, -1, 2.0, std::nullopt));
  EXPECT_EQ(unchecked[4], "max");
  EXPECT_EQ(unchecked[5], "-1");
  EXPECT_EQ(unchecked[9], "n/a");
  EXPECT_EQ(unchecked[13], "n/a");
}

TEST(CollectivesTest, SummarizesRows) {
  const std::vector<ResultRow> rows = {
      SampleRow("allreduce", ReduceOp::kSum, -1, 2.0, 1),
      SampleRow("allgather", std::nullopt, -1, 4.0, 0),
  };
  EXPECT_EQ(TotalWrong(rows), 2);
  // (2 + 3 + 4 + 5) / 4
  EXPECT_DOUBLE_EQ(AverageBusBandwidth(rows), 3.5);
  EXPECT_EQ(AverageBusBandwidth({}), 0.0);
  EXPECT_EQ(
      TotalWrong({SampleRow("alltoall", std::nullopt, -1, 1.0, std::nullopt)}),
      0);
}

TEST(CollectivesTest, JsonHoldsConfigurationAndRows) {
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags({});
  ASSERT_TRUE(config.ok());
  const nlohmann::json json = ResultsToJson(
      *config, BackendKind::kGloo, 2,
      {SampleRow("broadcast", std::nullopt, 0, 2.0, 0),
       SampleRow("allreduce", ReduceOp::kAverage, -1, 2.0, std::nullopt)});
  EXPECT_EQ(json["backend"], "gloo");
  EXPECT_EQ(json["np"], 2);
  EXPECT_EQ(json["config"]["maxbytes"], 256 << 20);
  EXPECT_EQ(json["config"]["dtypes"], nlohmann::json::array({"float32"}));
  EXPECT_EQ(json["config"]["check"], true);
  ASSERT_EQ(json["rows"].size(), 2u);
  EXPECT_EQ(json["rows"][0]["collective"], "broadcast");
  EXPECT_EQ(json["rows"][0]["redop"], "none");
  EXPECT_EQ(json["rows"][0]["root"], 0);
  EXPECT_EQ(json["rows"][0]["out_of_place"]["wrong"], 0);
  EXPECT_DOUBLE_EQ(json["rows"][0]["in_place"]["busbw_gbps"], 3.0);
  EXPECT_EQ(json["rows"][1]["redop"], "avg");
  EXPECT_TRUE(json["rows"][1]["in_place"]["wrong"].is_null());
  EXPECT_EQ(json["out_of_bounds"], 0);
}

}  // namespace
}  // namespace kolo::bench
