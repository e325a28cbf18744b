// Tests of kolo-bench collectives' --peer pieces: the peer list, the memcpy
// line, the comparison and its ratios, the JSON with peers, and the shared
// JSON appender; and the list splitting every list flag uses.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives.h"
#include "json_file.h"
#include "list_flag.h"
#include "peers.h"

namespace kolo::bench {
namespace {

TEST(ListFlagTest, SplitsAtCommasTrimsAndDropsEmptyItems) {
  EXPECT_EQ(SplitList("1, 2,,\t4 ,"),
            (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_EQ(SplitList("torch-ddp"), (std::vector<std::string>{"torch-ddp"}));
  EXPECT_TRUE(SplitList("").empty());
  EXPECT_TRUE(SplitList(" , ").empty());
}

TEST(PeerListTest, ParsesInOrderWithoutDuplicates) {
  StatusOr<std::vector<BackendKind>> peers = ParsePeerList("mpi, gloo,shm,mpi");
  ASSERT_TRUE(peers.ok()) << peers.status().ToString();
  EXPECT_EQ(*peers,
            (std::vector<BackendKind>{BackendKind::kMpi, BackendKind::kGloo,
                                      BackendKind::kShm}));
  StatusOr<std::vector<BackendKind>> none = ParsePeerList("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(PeerListTest, ErrorNamesTheFlagAndTheBadValue) {
  StatusOr<std::vector<BackendKind>> peers = ParsePeerList("gloo,nccl");
  ASSERT_FALSE(peers.ok());
  EXPECT_EQ(peers.status().code(), StatusCode::kInvalidArgument);
  const std::string message = peers.status().message();
  EXPECT_NE(message.find("--peer"), std::string::npos) << message;
  EXPECT_NE(message.find("'nccl'"), std::string::npos) << message;

  CollectivesFlags flags;
  flags.peers = "shm,mpl";
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags(flags);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("'mpl'"), std::string::npos);
  flags.peers = "shm,mpi";
  config = ParseCollectivesFlags(flags);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->peers,
            (std::vector<BackendKind>{BackendKind::kShm, BackendKind::kMpi}));
}

TEST(MemcpyTest, MeasuresPositiveRates) {
  for (int64_t bytes : {int64_t{1}, int64_t{4096}, int64_t{1} << 20}) {
    const double gbps = Memcpy2ThreadGbps(bytes, int64_t{4} << 20);
    EXPECT_GT(gbps, 0.0) << bytes;
    // No machine copies a petabyte a second.
    EXPECT_LT(gbps, 1e6) << bytes;
  }
  EXPECT_EQ(Memcpy2ThreadGbps(0), 0.0);
}

Measurement TimedAt(double time_us, double busbw_gbps) {
  Measurement m;
  m.time_us = time_us;
  m.busbw_gbps = busbw_gbps;
  m.wrong = 0;
  return m;
}

ResultRow Row(const std::string& collective, int64_t bytes, double time_us,
              double busbw_gbps) {
  ResultRow row;
  row.collective = collective;
  row.bytes = bytes;
  row.elements = bytes / 4;
  row.op = ReduceOp::kSum;
  row.out_of_place = TimedAt(2 * time_us, busbw_gbps / 2);
  row.in_place = TimedAt(time_us, busbw_gbps);
  return row;
}

TEST(ComparisonTest, RatiosAreKoloOverPeerInPlace) {
  // 4 KiB: kolo 10 us; mpi 5 us (twice as fast), gloo 40 us.
  // 1 MiB: kolo 100 us at 10 GB/s; mpi 200 us; gloo lacks the row.
  const std::vector<ResultRow> kolo = {Row("allreduce", 4096, 10, 0.4),
                                       Row("allreduce", 1 << 20, 100, 10)};
  const std::vector<PeerResults> peers = {
      {BackendKind::kMpi,
       {Row("allreduce", 4096, 5, 0.8), Row("allreduce", 1 << 20, 200, 5)}},
      {BackendKind::kGloo, {Row("allreduce", 4096, 40, 0.1)}},
  };
  const std::vector<MemcpyPoint> memcpy = {{4096, 40.0}, {1 << 20, 20.0}};
  const std::vector<ComparisonRow> rows = Compare(kolo, peers, memcpy);
  ASSERT_EQ(rows.size(), 2u);

  EXPECT_DOUBLE_EQ(*KoloRatio(rows[0].kolo, *rows[0].peers[0]), 0.5);
  EXPECT_DOUBLE_EQ(*KoloRatio(rows[0].kolo, *rows[0].peers[1]), 4.0);
  EXPECT_EQ(rows[0].best_peer, 0u);
  EXPECT_DOUBLE_EQ(*rows[0].memcpy_gbps, 40.0);

  EXPECT_DOUBLE_EQ(*KoloRatio(rows[1].kolo, *rows[1].peers[0]), 2.0);
  EXPECT_FALSE(rows[1].peers[1].has_value());
  EXPECT_EQ(rows[1].best_peer, 0u);
  EXPECT_FALSE(KoloRatio(TimedAt(0, 0), TimedAt(1, 1)).has_value());

  const std::vector<BackendKind> names = {BackendKind::kMpi,
                                          BackendKind::kGloo};
  const Table table = ComparisonTable(names);
  const std::vector<std::string> cells = ComparisonCells(rows[1], names);
  ASSERT_EQ(cells.size(), table.columns().size());
  EXPECT_EQ(cells,
            (std::vector<std::string>{
                "allreduce", "1048576", "float32", "100.00", "10.00", "200.00",
                "5.00", "2.00", "-", "-", "-", "20.00", "0.5", "mpi", "2.00"}));
  // Below 1 a ratio keeps three significant digits.
  EXPECT_EQ(ComparisonCells(rows[0], names)[12], "0.01");
}

TEST(ComparisonTest, SwitchesPerCallStandBesideEachEngine) {
  ResultRow kolo = Row("allreduce", 4096, 10, 0.4);
  kolo.in_place.switches_per_call = 22.04;
  kolo.out_of_place.switches_per_call = 99;  // the table is in place
  ResultRow mpi = Row("allreduce", 4096, 5, 0.8);
  mpi.in_place.switches_per_call = 11.25;
  const std::vector<BackendKind> names = {BackendKind::kMpi,
                                          BackendKind::kGloo};
  const std::vector<ComparisonRow> rows = Compare(
      {kolo}, {{BackendKind::kMpi, {mpi}}, {BackendKind::kGloo, {}}}, {});
  ASSERT_EQ(rows.size(), 1u);
  const Table table = SwitchesTable(names);
  const std::vector<std::string> cells = SwitchesCells(rows[0], names);
  ASSERT_EQ(cells.size(), table.columns().size());
  EXPECT_EQ(cells, (std::vector<std::string>{"allreduce", "4096", "float32",
                                             "22.0", "11.2", "-"}));
}

TEST(ComparisonTest, WithoutPeersOrMemcpyCellsAreDashes) {
  const std::vector<ComparisonRow> rows =
      Compare({Row("broadcast", 64, 3, 0.02)}, {}, {});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].best_peer.has_value());
  EXPECT_EQ(ComparisonCells(rows[0], {}),
            (std::vector<std::string>{"broadcast", "64", "float32", "3.00",
                                      "0.02", "-", "-", "-", "-"}));
}

TEST(PeersJsonTest, PeersAndMemcpyFollowKolosRowSchema) {
  CollectivesFlags flags;
  flags.peers = "mpi,shm";
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags(flags);
  ASSERT_TRUE(config.ok());
  const std::vector<ResultRow> kolo = {Row("allreduce", 4096, 10, 0.4)};
  const std::vector<PeerResults> peers = {
      {BackendKind::kMpi, {Row("allreduce", 4096, 5, 0.8)}},
      {BackendKind::kShm, {Row("allreduce", 4096, 8, 0.5)}},
  };
  const nlohmann::json json =
      ResultsToJson(*config, BackendKind::kShm, 2, kolo, peers, {{4096, 40.0}});
  EXPECT_EQ(json["config"]["peers"], nlohmann::json::array({"mpi", "shm"}));
  ASSERT_EQ(json["peers"].size(), 2u);
  EXPECT_EQ(json["peers"][0]["engine"], "mpi");
  EXPECT_EQ(json["peers"][1]["engine"], "shm");
  // A peer row has exactly the keys of a kolo row.
  const nlohmann::json& mine = json["rows"][0];
  const nlohmann::json& theirs = json["peers"][0]["rows"][0];
  for (auto it = mine.begin(); it != mine.end(); ++it) {
    EXPECT_TRUE(theirs.contains(it.key())) << it.key();
  }
  EXPECT_EQ(theirs.size(), mine.size());
  EXPECT_DOUBLE_EQ(theirs["in_place"]["time_us"], 5.0);
  EXPECT_EQ(theirs["in_place"]["wrong"], 0);
  EXPECT_DOUBLE_EQ(theirs["in_place"]["switches_per_call"], 0.0);
  ASSERT_EQ(json["memcpy_2thread"].size(), 1u);
  EXPECT_EQ(json["memcpy_2thread"][0]["size"], 4096);
  EXPECT_DOUBLE_EQ(json["memcpy_2thread"][0]["gbps"], 40.0);

  // Without --peer neither key appears.
  StatusOr<CollectivesConfig> plain = ParseCollectivesFlags({});
  ASSERT_TRUE(plain.ok());
  const nlohmann::json alone =
      ResultsToJson(*plain, BackendKind::kShm, 2, kolo);
  EXPECT_FALSE(alone.contains("peers"));
  EXPECT_FALSE(alone.contains("memcpy_2thread"));
}

TEST(PeersJsonTest, WrongPeerValuesCountOutOfBounds) {
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags({});
  ASSERT_TRUE(config.ok());
  config->peers = {BackendKind::kGloo};
  ResultRow bad = Row("allreduce", 4096, 5, 0.8);
  bad.in_place.wrong = 7;
  const nlohmann::json json = ResultsToJson(*config, BackendKind::kShm, 2,
                                            {Row("allreduce", 4096, 10, 0.4)},
                                            {{BackendKind::kGloo, {bad}}}, {});
  EXPECT_EQ(json["out_of_bounds"], 7);
}

TEST(AppendJsonRecordTest, AppendsToAnArrayAndAdoptsAnOldObject) {
  const std::string path = ::testing::TempDir() + "kolo_bench_append.json";
  std::remove(path.c_str());
  ASSERT_TRUE(AppendJsonRecord(path, {{"run", 1}}).ok());
  ASSERT_TRUE(AppendJsonRecord(path, {{"run", 2}}).ok());
  {
    std::ifstream in(path);
    const nlohmann::json json = nlohmann::json::parse(in);
    EXPECT_EQ(json, nlohmann::json::parse(R"([{"run":1},{"run":2}])"));
  }
  // What kolo-bench wrote before it appended: one object.
  {
    std::ofstream out(path, std::ios::trunc);
    out << R"({"run":0})";
  }
  ASSERT_TRUE(AppendJsonRecord(path, {{"run", 1}}).ok());
  {
    std::ifstream in(path);
    EXPECT_EQ(nlohmann::json::parse(in),
              nlohmann::json::parse(R"([{"run":0},{"run":1}])"));
  }
  // Anything else is refused, naming the file and the flag.
  {
    std::ofstream out(path, std::ios::trunc);
    out << "not json";
  }
  Status refused = AppendJsonRecord(path, {{"run", 3}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find(path), std::string::npos);
  EXPECT_NE(refused.message().find("--json"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo::bench
