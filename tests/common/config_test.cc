#include "common/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>

#include "kolo/build_info.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

// Long enough for CheckJobSecret (kMinJobSecretBytes).
constexpr char kSecret[] = "a-job-secret-of-32-bytes-or-more";

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// Gloo and MPI are the defaults where they were built; kolo's tcp engine
// stands in for either where not (src/common/config.cc).
BackendKind DefaultIfBuilt(BackendKind kind) {
  return BuildInfo().HasEngine(BackendName(kind)) ? kind : BackendKind::kTcp;
}

TEST(ConfigTest, NoLauncherIsASingleProcess) {
  StatusOr<InitOptions> c = ReadInitOptions(Env({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->world.launcher, "none");
  EXPECT_EQ(c->world.ranks.size, 1);
  EXPECT_EQ(c->engine.backend, DefaultIfBuilt(BackendKind::kGloo));
  EXPECT_EQ(c->engine.timeout, std::chrono::seconds(30));
}

TEST(ConfigTest, KolorunEnvironment) {
  StatusOr<InitOptions> c =
      ReadInitOptions(Env({{"KOLO_RANK", "2"},
                           {"KOLO_SIZE", "4"},
                           {"KOLO_LOCAL_RANK", "0"},
                           {"KOLO_LOCAL_SIZE", "2"},
                           {"KOLO_CROSS_RANK", "1"},
                           {"KOLO_CROSS_SIZE", "2"},
                           {"KOLO_STORE_ADDR", "127.0.0.1:4242"},
                           {"KOLO_STORE_SECRET", kSecret},
                           {"KOLO_STORE_HOSTED", "1"},
                           {"KOLO_TIMEOUT_S", "5"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->world.launcher, "kolorun");
  EXPECT_EQ(c->world.ranks.rank, 2);
  EXPECT_EQ(c->world.ranks.size, 4);
  EXPECT_EQ(c->world.ranks.local_size, 2);
  EXPECT_EQ(c->world.ranks.cross_rank, 1);
  EXPECT_EQ(c->store.host, "127.0.0.1");
  EXPECT_EQ(c->store.port, 4242);
  EXPECT_EQ(c->store.secret, kSecret);
  EXPECT_FALSE(c->store.rank0_hosts);
  EXPECT_EQ(c->engine.timeout, std::chrono::seconds(5));
  EXPECT_EQ(c->engine.gloo_hostname, "127.0.0.1");
}

TEST(ConfigTest, MpirunEnvironmentDefaultsToMpiWithoutStore) {
  StatusOr<InitOptions> c =
      ReadInitOptions(Env({{"OMPI_COMM_WORLD_RANK", "3"},
                           {"OMPI_COMM_WORLD_SIZE", "4"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->world.launcher, "mpirun");
  EXPECT_EQ(c->engine.backend, DefaultIfBuilt(BackendKind::kMpi));
  EXPECT_EQ(c->world.ranks.cross_rank, 1);
  EXPECT_EQ(c->world.ranks.cross_size, 2);
}

TEST(ConfigTest, MpirunWithStoreAddressHostsTheStoreOnRankZero) {
  StatusOr<InitOptions> c =
      ReadInitOptions(Env({{"OMPI_COMM_WORLD_RANK", "0"},
                           {"OMPI_COMM_WORLD_SIZE", "2"},
                           {"KOLO_STORE_ADDR", "node1:29500"},
                           {"KOLO_STORE_SECRET", kSecret}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.backend, DefaultIfBuilt(BackendKind::kGloo));
  EXPECT_TRUE(c->store.rank0_hosts);
  EXPECT_EQ(c->store.host, "node1");
}

TEST(ConfigTest, SlurmEnvironment) {
  StatusOr<InitOptions> c =
      ReadInitOptions(Env({{"SLURM_PROCID", "5"},
                           {"SLURM_NTASKS", "7"},
                           {"SLURM_NNODES", "3"},
                           {"SLURM_NODEID", "2"},
                           {"SLURM_LOCALID", "0"},
                           {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"},
                           {"KOLO_STORE_ADDR", "[::1]:29500"},
                           {"KOLO_STORE_SECRET", kSecret}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->world.launcher, "slurm");
  EXPECT_EQ(c->world.ranks.rank, 5);
  EXPECT_EQ(c->world.ranks.local_size, 1);
  EXPECT_EQ(c->world.ranks.cross_rank, 2);
  EXPECT_EQ(c->world.ranks.cross_size, 3);
  EXPECT_EQ(c->store.host, "::1");
}

TEST(ConfigTest, PmiEnvironment) {
  StatusOr<InitOptions> c =
      ReadInitOptions(Env({{"PMI_RANK", "1"},
                           {"PMI_SIZE", "2"},
                           {"KOLO_STORE_ADDR", "localhost:1234"},
                           {"KOLO_STORE_SECRET", kSecret}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->world.launcher, "pmi");
  EXPECT_EQ(c->world.ranks.rank, 1);
  EXPECT_EQ(c->world.ranks.size, 2);
}

TEST(ConfigTest, BadValuesNameTheVariable) {
  auto message = [](std::map<std::string, std::string> vars) {
    return ReadInitOptions(Env(std::move(vars))).status().message();
  };
  EXPECT_THAT(message({{"KOLO_RANK", "x"}, {"KOLO_SIZE", "2"}}),
              HasSubstr("KOLO_RANK"));
  EXPECT_THAT(message({{"KOLO_RANK", "2"}, {"KOLO_SIZE", "2"}}),
              HasSubstr("KOLO_RANK"));
  EXPECT_THAT(message({{"KOLO_BACKEND", "nccl"}}),
              HasSubstr("unknown backend 'nccl'"));
  EXPECT_THAT(message({{"KOLO_TIMEOUT_S", "0"}}), HasSubstr("KOLO_TIMEOUT_S"));
  EXPECT_THAT(message({{"KOLO_STORE_ADDR", "nohost"}}),
              HasSubstr("KOLO_STORE_ADDR"));
  EXPECT_THAT(message({{"KOLO_RANK", "0"}, {"KOLO_SIZE", "2"}}),
              HasSubstr("KOLO_STORE_ADDR is not set"));
}

// srun, mpirun and PMI launchers have MPI's bootstrap to hand rank 0's
// store address around (collectives/mpi/mpi_bootstrap.h).
TEST(ConfigTest, MpiLaunchersWithoutAStoreAddressShareItOverMpi) {
  for (const auto& launcher : std::vector<std::map<std::string, std::string>>{
           {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}},
           {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}}) {
    std::map<std::string, std::string> vars = launcher;
    vars["KOLO_BACKEND"] = BackendName(DefaultIfBuilt(BackendKind::kGloo));
    StatusOr<InitOptions> c = ReadInitOptions(Env(vars));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE(c->store.shared_over_mpi) << c->world.launcher;
    EXPECT_TRUE(c->store.host.empty());
    // Init takes the address on the route to the store.
    EXPECT_TRUE(c->engine.gloo_hostname.empty());
  }
  StatusOr<InitOptions> given = ReadInitOptions(
      Env({{"SLURM_PROCID", "1"},
           {"SLURM_NTASKS", "2"},
           {"KOLO_BACKEND", BackendName(DefaultIfBuilt(BackendKind::kGloo))},
           {"KOLO_STORE_ADDR", "10.0.0.1:29500"},
           {"KOLO_STORE_SECRET", kSecret}}));
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_FALSE(given->store.shared_over_mpi);
}

TEST(ConfigTest, ShmBackendAndAreaSize) {
  StatusOr<InitOptions> c = ReadInitOptions(
      Env({{"KOLO_BACKEND", "shm"}, {"KOLO_SHM_AREA_BYTES", "256K"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine.backend, BackendKind::kShm);
  EXPECT_EQ(c->engine.shm_area_bytes, 256 << 10);
  // Like gloo, a multi-rank shm job rendezvouses through the store.
  EXPECT_THAT(ReadInitOptions(Env({{"KOLO_BACKEND", "shm"},
                                   {"KOLO_RANK", "0"},
                                   {"KOLO_SIZE", "2"}}))
                  .status()
                  .message(),
              HasSubstr("2-rank shm job"));
  for (const char* bad : {"1000", "0", "2G", "x"}) {
    EXPECT_THAT(
        ReadInitOptions(Env({{"KOLO_SHM_AREA_BYTES", bad}})).status().message(),
        HasSubstr("KOLO_SHM_AREA_BYTES"))
        << bad;
  }
}

TEST(ConfigTest, HostIdentityAndHierarchicalSwitch) {
  StatusOr<InitOptions> defaults = ReadInitOptions(Env({}));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  EXPECT_EQ(defaults->world.host_id, hostname);
  EXPECT_FALSE(defaults->engine.hierarchical_allreduce.has_value());

  StatusOr<InitOptions> set = ReadInitOptions(Env(
      {{"KOLO_HOST_ID", "rack3-node7"}, {"KOLO_HIERARCHICAL_ALLREDUCE", "0"}}));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->world.host_id, "rack3-node7");
  EXPECT_EQ(set->engine.hierarchical_allreduce, std::optional<bool>(false));
  EXPECT_EQ(ReadInitOptions(Env({{"KOLO_HIERARCHICAL_ALLREDUCE", "1"}}))
                ->engine.hierarchical_allreduce,
            std::optional<bool>(true));

  EXPECT_THAT(
      ReadInitOptions(Env({{"KOLO_HIERARCHICAL_ALLREDUCE", "yes"}}))
          .status()
          .message(),
      HasSubstr("KOLO_HIERARCHICAL_ALLREDUCE must be 0 or 1, got 'yes'"));
  EXPECT_THAT(ReadInitOptions(Env({{"KOLO_HOST_ID", ""}})).status().message(),
              HasSubstr("KOLO_HOST_ID is set but empty"));
}

TEST(ConfigTest, RoleFromKolorunServers) {
  StatusOr<RoleInfo> none = ReadRoleInfo(Env({}));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->role, ProcessRole::kWorker);
  EXPECT_EQ(none->server_count, 0);

  StatusOr<RoleInfo> server =
      ReadRoleInfo(Env({{"KOLO_ROLE", "server"}, {"KOLO_SERVERS", "3"}}));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(server->role, ProcessRole::kServer);
  EXPECT_EQ(server->server_count, 3);

  EXPECT_THAT(ReadRoleInfo(Env({{"KOLO_ROLE", "boss"}})).status().message(),
              HasSubstr("KOLO_ROLE must be worker or server, got 'boss'"));
  EXPECT_THAT(ReadRoleInfo(Env({{"KOLO_ROLE", "server"}})).status().message(),
              HasSubstr("KOLO_SERVERS is unset or 0"));
  EXPECT_THAT(ReadRoleInfo(Env({{"KOLO_SERVERS", "-1"}})).status().message(),
              HasSubstr("KOLO_SERVERS"));
}

TEST(ConfigTest, ElasticWorker) {
  StatusOr<ElasticWorkerConfig> none = ReadElasticWorkerConfig(Env({}));
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("kolorun --elastic"),
            std::string::npos);

  StatusOr<ElasticWorkerConfig> config =
      ReadElasticWorkerConfig(Env({{"KOLO_ELASTIC_WORKER", "7"},
                                   {"KOLO_STORE_ADDR", "10.1.0.1:4000"},
                                   {"KOLO_STORE_SECRET", kSecret},
                                   {"KOLO_ELASTIC_TIMEOUT_S", "90"},
                                   {"KOLO_ELASTIC_HEARTBEAT_MS", "250"}}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->worker, 7);
  EXPECT_EQ(config->store.host, "10.1.0.1");
  EXPECT_EQ(config->store.port, 4000);
  EXPECT_EQ(config->store.secret, kSecret);
  EXPECT_EQ(config->round_timeout, std::chrono::seconds(90));
  EXPECT_EQ(config->heartbeat_interval, std::chrono::milliseconds(250));

  const std::map<std::string, std::string> bad[] = {
      {{"KOLO_ELASTIC_WORKER", "x"}, {"KOLO_STORE_ADDR", "h:1"}},
      {{"KOLO_ELASTIC_WORKER", "1"}},
      {{"KOLO_ELASTIC_WORKER", "1"}, {"KOLO_STORE_ADDR", "nohost"}},
      {{"KOLO_ELASTIC_WORKER", "1"},
       {"KOLO_STORE_ADDR", "h:1"},
       {"KOLO_STORE_SECRET", kSecret},
       {"KOLO_ELASTIC_HEARTBEAT_MS", "1"}},
  };
  const char* named[] = {"KOLO_ELASTIC_WORKER", "KOLO_STORE_ADDR",
                         "KOLO_STORE_ADDR", "KOLO_ELASTIC_HEARTBEAT_MS"};
  for (size_t i = 0; i < std::size(bad); ++i) {
    StatusOr<ElasticWorkerConfig> failed = ReadElasticWorkerConfig(Env(bad[i]));
    ASSERT_FALSE(failed.ok()) << named[i];
    EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(failed.status().message().find(named[i]), std::string::npos)
        << failed.status().message();
  }
}

// A store secret that is missing, empty or shorter than 16 bytes is
// refused wherever a process would prove it to a store: the message names
// the variable and says how to make one. A single process never opens the
// store, so it needs none.
TEST(ConfigTest, ShortOrMissingStoreSecretsAreRefused) {
  const std::map<std::string, std::string> job = {
      {"KOLO_RANK", "0"},
      {"KOLO_SIZE", "2"},
      {"KOLO_STORE_ADDR", "127.0.0.1:4242"}};
  const std::map<std::string, std::string> elastic = {
      {"KOLO_ELASTIC_WORKER", "1"}, {"KOLO_STORE_ADDR", "127.0.0.1:4242"}};
  for (const std::optional<std::string>& secret :
       {std::optional<std::string>(), std::optional<std::string>(""),
        std::optional<std::string>("s3cret"),
        std::optional<std::string>("0123456789abcde")}) {
    std::map<std::string, std::string> with_job = job;
    std::map<std::string, std::string> with_elastic = elastic;
    if (secret) {
      with_job["KOLO_STORE_SECRET"] = *secret;
      with_elastic["KOLO_STORE_SECRET"] = *secret;
    }
    const std::string what =
        !secret || secret->empty()
            ? "KOLO_STORE_SECRET is empty"
            : "KOLO_STORE_SECRET holds a job secret of only " +
                  std::to_string(secret->size()) + " bytes";
    for (const Status& status :
         {ReadInitOptions(Env(with_job)).status(),
          ReadElasticWorkerConfig(Env(with_elastic)).status()}) {
      EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(status.message(), HasSubstr("environment variable "));
      EXPECT_THAT(status.message(), HasSubstr(what));
      EXPECT_THAT(status.message(),
                  HasSubstr("at least 16 bytes, or anyone who can reach the "
                            "store could guess it. Make one with: head -c "
                            "32 /dev/urandom | base64 > secret"));
      if (secret && !secret->empty()) {
        EXPECT_EQ(status.message().find(*secret + " "), std::string::npos)
            << "the message quotes the secret";
      }
    }
  }
  std::map<std::string, std::string> alone = job;
  alone["KOLO_SIZE"] = "1";
  EXPECT_TRUE(ReadInitOptions(Env(alone)).ok());
  std::map<std::string, std::string> good = job;
  good["KOLO_STORE_SECRET"] = "0123456789abcdef";  // exactly 16 bytes
  EXPECT_TRUE(ReadInitOptions(Env(good)).ok());
}

TEST(ConfigTest, DirectPathIsOnUnlessTurnedOff) {
  EXPECT_TRUE(ReadInitOptions(Env({}))->direct_path.enabled);
  EXPECT_FALSE(
      ReadInitOptions(Env({{"KOLO_DIRECT_PATH", "0"}}))->direct_path.enabled);
  EXPECT_TRUE(
      ReadInitOptions(Env({{"KOLO_DIRECT_PATH", "1"}}))->direct_path.enabled);
  EXPECT_THAT(
      ReadInitOptions(Env({{"KOLO_DIRECT_PATH", "on"}})).status().message(),
      HasSubstr("KOLO_DIRECT_PATH must be 0 or 1, got 'on'"));
}

TEST(ConfigTest, LogLevelAndReduceIsaAreChecked) {
  EXPECT_EQ(ReadInitOptions(Env({}))->logging.level, LogLevel::kInfo);
  EXPECT_EQ(ReadInitOptions(Env({{"KOLO_LOG_LEVEL", "debug"}}))->logging.level,
            LogLevel::kDebug);
  EXPECT_EQ(ReadInitOptions(Env({{"KOLO_LOG_LEVEL", "error"}}))->logging.level,
            LogLevel::kError);
  EXPECT_THAT(
      ReadInitOptions(Env({{"KOLO_LOG_LEVEL", "loud"}})).status().message(),
      HasSubstr(
          "KOLO_LOG_LEVEL='loud' is not a log level (expected debug, info, "
          "warning or error)"));

  EXPECT_EQ(ReadInitOptions(Env({}))->engine.reduce_isa, "");
  EXPECT_EQ(ReadInitOptions(Env({{"KOLO_REDUCE_ISA", "portable"}}))
                ->engine.reduce_isa,
            "portable");
  const Status bad =
      ReadInitOptions(Env({{"KOLO_REDUCE_ISA", "avx9"}})).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(),
              HasSubstr("KOLO_REDUCE_ISA='avx9' is not an instruction set"));
  EXPECT_THAT(bad.message(), HasSubstr("portable"));
}

TEST(ConfigTest, EveryBadValueNamesItsVariable) {
  const std::map<std::string, std::string> bad = {
      {"KOLO_BACKEND", "nccl"},
      {"KOLO_TIMEOUT_S", "soon"},
      {"KOLO_CYCLE_TIME_MS", "-1"},
      {"KOLO_FUSION_THRESHOLD", "lots"},
      {"KOLO_CACHE_CAPACITY", "many"},
      {"KOLO_STALL_WARNING_S", "0"},
      {"KOLO_STALL_SHUTDOWN_S", "x"},
      {"KOLO_SHM_AREA_BYTES", "3"},
      {"KOLO_LOG_LEVEL", "loud"},
      {"KOLO_REDUCE_ISA", "avx9"},
      {"KOLO_DIRECT_PATH", "yes"},
      {"KOLO_HIERARCHICAL_ALLREDUCE", "2"},
      {"KOLO_RANK", "x"},
      {"KOLO_STORE_ADDR", "nowhere"}};
  for (const auto& [name, value] : bad) {
    const Status status = ReadInitOptions(Env({{name, value}})).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument)
        << name << "=" << value;
    EXPECT_THAT(status.message(), HasSubstr(name)) << value;
  }
}

TEST(ConfigTest, BackendNamesRoundTrip) {
  for (BackendKind kind : {BackendKind::kGloo, BackendKind::kMpi,
                           BackendKind::kShm, BackendKind::kTcp}) {
    if (!BuildInfo().HasEngine(BackendName(kind))) continue;
    EXPECT_EQ(*ParseBackend(BackendName(kind)), kind);
  }
  EXPECT_THAT(
      ParseBackend("nccl").status().message(),
      HasSubstr("unknown backend 'nccl' (expected gloo, mpi, shm or tcp)"));
}

TEST(ConfigTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("8", "-b"), 8);
  EXPECT_EQ(*ParseByteSize("64K", "-b"), 64 << 10);
  EXPECT_EQ(*ParseByteSize("256M", "-e"), int64_t{256} << 20);
  EXPECT_EQ(*ParseByteSize("2G", "-e"), int64_t{2} << 30);
  EXPECT_THAT(ParseByteSize("12Q", "-e").status().message(), HasSubstr("-e"));
}

}  // namespace
}  // namespace kolo
