// kolo-bench collectives --peer end to end: two ranks started by the real
// kolorun time small sizes on kolo and on raw engines, shm and gloo under
// kolorun's own launcher and, where mpirun is installed, MPI as well with
// the runtime on shm in an MPI world. Checks the exit status, that no value
// was wrong on any engine, and what the appended JSON record holds; and that
// asking for MPI without mpirun fails saying how to start the job.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/requirements.h"

namespace {

using kolo::testing::Describe;
using kolo::testing::OnPath;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;

struct PeerCase {
  std::string name;                 // the test's suffix
  std::vector<std::string> launch;  // kolorun's flags besides -np
  std::string peers;
  std::vector<std::string> engines;  // what the JSON must list
};

class PeersRunTest : public ::testing::TestWithParam<PeerCase> {};

int64_t Occurrences(const std::string& text, const std::string& what) {
  int64_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

void ExpectRowsRight(const nlohmann::json& rows, const std::string& engine) {
  ASSERT_FALSE(rows.empty()) << engine;
  for (const nlohmann::json& row : rows) {
    for (const char* placement : {"out_of_place", "in_place"}) {
      EXPECT_EQ(row[placement]["wrong"], 0)
          << engine << " " << row["collective"] << " " << row["size"] << " "
          << placement;
      EXPECT_GT(row[placement]["time_us"].get<double>(), 0.0) << engine;
      EXPECT_GE(row[placement]["switches_per_call"].get<double>(), 0.0)
          << engine;
    }
  }
}

TEST_P(PeersRunTest, EveryEngineRunsAndIsRight) {
  const PeerCase& c = GetParam();
  KOLO_REQUIRE_OR_SKIP(
      std::find(c.engines.begin(), c.engines.end(), "mpi") == c.engines.end() ||
          OnPath("mpirun"),
      "mpirun on PATH (openmpi-bin)");
  const std::string json_path = ::testing::TempDir() + "kolo_bench_peers_" +
                                std::to_string(c.engines.size()) + ".json";
  std::remove(json_path.c_str());
  std::vector<std::string> argv = {KOLORUN_PATH, "-np", "2"};
  argv.insert(argv.end(), c.launch.begin(), c.launch.end());
  argv.insert(argv.end(), {KOLO_BENCH_PATH,
                           "collectives",
                           "--ops",
                           "allreduce,broadcast,reducescatter",
                           "-o",
                           "avg",
                           "-b",
                           "1K",
                           "-e",
                           "16K",
                           "-f",
                           "4",
                           "-n",
                           "2",
                           "-w",
                           "1",
                           "--peer",
                           c.peers,
                           "--json",
                           json_path});
  RunResult r = RunProgram(argv, {}, std::chrono::seconds(150));
  ASSERT_FALSE(r.timed_out) << Describe(r);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // kolo's table and one per peer, each with its footer.
  EXPECT_EQ(Occurrences(r.out, "Out of bounds values : 0 OK"),
            1 + static_cast<int64_t>(c.engines.size()))
      << r.out;
  EXPECT_NE(r.out.find("kolo against its peers"), std::string::npos) << r.out;
  // The switches table: one line per kolo row (3 ops x 3 sizes), after it.
  const size_t switches = r.out.find("context switches per call");
  ASSERT_NE(switches, std::string::npos) << r.out;
  EXPECT_EQ(Occurrences(r.out.substr(switches), "  allreduce "), 3) << r.out;

  std::ifstream file(json_path);
  ASSERT_TRUE(file) << json_path;
  const nlohmann::json records = nlohmann::json::parse(file);
  ASSERT_TRUE(records.is_array());
  ASSERT_EQ(records.size(), 1u);
  const nlohmann::json& json = records[0];
  EXPECT_EQ(json["backend"], "shm");
  EXPECT_EQ(json["np"], 2);
  EXPECT_EQ(json["out_of_bounds"], 0);
  EXPECT_TRUE(json["environment"].contains("cpu_model"));
  ExpectRowsRight(json["rows"], "kolo");
  ASSERT_EQ(json["peers"].size(), c.engines.size());
  for (size_t i = 0; i < c.engines.size(); ++i) {
    EXPECT_EQ(json["peers"][i]["engine"], c.engines[i]);
    EXPECT_EQ(json["peers"][i]["rows"].size(), json["rows"].size());
    ExpectRowsRight(json["peers"][i]["rows"], c.engines[i]);
  }
  // 1K, 4K and 16K, each measured once although three ops share them.
  ASSERT_EQ(json["memcpy_2thread"].size(), 3u);
  for (const nlohmann::json& point : json["memcpy_2thread"]) {
    EXPECT_GT(point["gbps"].get<double>(), 0.0);
  }
  std::remove(json_path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Launchers, PeersRunTest,
    ::testing::Values(
        PeerCase{"KolorunGlooShm", {}, "gloo,shm", {"gloo", "shm"}},
        PeerCase{"MpirunMpiGlooShm",
                 {"--launcher", "mpirun", "--backend", "shm"},
                 "mpi,gloo,shm",
                 {"mpi", "gloo", "shm"}}),
    [](const ::testing::TestParamInfo<PeerCase>& info) {
      return info.param.name;
    });

TEST(PeersRunErrorTest, MpiWithoutMpirunSaysHowToRunIt) {
  RunResult r =
      RunProgram({KOLORUN_PATH, "-np", "2", KOLO_BENCH_PATH, "collectives",
                  "-b", "1K", "-e", "1K", "--peer", "mpi"},
                 {}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.err.find("--peer mpi: an MPI engine needs ranks started by "
                       "mpirun"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--launcher mpirun"), std::string::npos) << r.err;
}

TEST(PeersRunErrorTest, UnknownPeerIsNamed) {
  RunResult r = RunProgram({KOLORUN_PATH, "-np", "2", KOLO_BENCH_PATH,
                            "collectives", "--peer", "gloo,nccl"},
                           {}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << Describe(r);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.err.find("--peer: unknown engine 'nccl'"), std::string::npos)
      << r.err;
}

}  // namespace
