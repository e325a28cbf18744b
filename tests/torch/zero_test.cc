// ZeroOptimizer: alone in this process (a world of one: the layout, the
// checkpoint's checks) and in real processes under kolorun (equivalence
// with one process on the whole batch, checkpoints loaded at other world
// sizes, loss scaling agreed across ranks).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "common/atomic_file.h"
#include "kolo/torch_zero.h"
#include "testing/child_process.h"

namespace kolo {
namespace {

using testing::Describe;
using ::testing::HasSubstr;
using testing::RunProgram;
using testing::RunResult;
namespace fs = std::filesystem;

constexpr const char* kKolorun = KOLORUN_PATH;
constexpr const char* kWorker = ZERO_WORKER_PATH;

RunResult RunWorker(int np, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kKolorun, "-np", std::to_string(np),
                                   kWorker};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, {}, std::chrono::seconds(240));
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("kolo-zero-test-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter_++));
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

struct Net : ::torch::nn::Module {
  explicit Net(int64_t hidden = 13) {
    fc1 = register_module("fc1", ::torch::nn::Linear(7, hidden));
    fc2 = register_module("fc2", ::torch::nn::Linear(hidden, 5));
  }
  ::torch::Tensor forward(::torch::Tensor x) {
    return fc2(::torch::tanh(fc1(x)));
  }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

OptimizerConfig Adam() {
  OptimizerConfig config;
  config.type = OptimizerType::kAdam;
  config.lr = 0.01;
  return config;
}

torch::ZeroOptions Small(int32_t stage) {
  torch::ZeroOptions options;
  options.stage = stage;
  options.reduce_bucket_elements = 50;
  return options;
}

void TrainSteps(Net& net, torch::ZeroOptimizer& zero, int steps) {
  for (int step = 0; step < steps; ++step) {
    ::torch::manual_seed(step);
    zero.ZeroGrad();
    ::torch::nn::functional::cross_entropy(
        net.forward(::torch::randn({8, 7})),
        ::torch::randint(0, 5, {8}, ::torch::kInt64))
        .backward();
    ASSERT_TRUE(zero.Step().ok());
  }
}

// A model trained `steps` steps from weights drawn after seeding with
// `seed`, and its stage-2 optimizer.
struct TrainedZero {
  TrainedZero(uint64_t seed, int steps) : seeded(seed) {
    TrainSteps(net, zero, steps);
  }
  struct Seed {
    explicit Seed(uint64_t seed) { ::torch::manual_seed(seed); }
  } seeded;
  Net net;
  torch::ZeroOptimizer zero{net.named_parameters(),
                            torch::MakeOptimizer(Adam()), Small(2)};
};

TEST(ZeroOptimizerTest, AloneEveryStageMatchesThePlainOptimizer) {
  for (int32_t stage : {0, 1, 2}) {
    ::torch::manual_seed(1);
    Net net;
    Net plain;
    {
      ::torch::NoGradGuard no_grad;
      for (size_t i = 0; i < net.parameters().size(); ++i)
        plain.parameters()[i].copy_(net.parameters()[i]);
    }
    torch::ZeroOptimizer zero(net.named_parameters(),
                              torch::MakeOptimizer(Adam()), Small(stage));
    // Buckets of about 50 elements: fc2 (70) and fc1 (104).
    EXPECT_EQ(zero.bucket_count(), 2);
    EXPECT_EQ(zero.shard_count(), 1);
    auto optimizer = torch::MakeOptimizer(Adam())(plain.parameters());
    TrainSteps(net, zero, 3);
    for (int step = 0; step < 3; ++step) {
      ::torch::manual_seed(step);
      optimizer->zero_grad();
      ::torch::nn::functional::cross_entropy(
          plain.forward(::torch::randn({8, 7})),
          ::torch::randint(0, 5, {8}, ::torch::kInt64))
          .backward();
      optimizer->step();
    }
    for (size_t i = 0; i < net.parameters().size(); ++i) {
      EXPECT_LT((net.parameters()[i] - plain.parameters()[i])
                    .abs()
                    .max()
                    .item<double>(),
                1e-6)
          << "stage " << stage;
    }
    // Adam's two moments of 174 float32 elements, and the masters.
    EXPECT_EQ(zero.Memory().optimizer_state_bytes, 2 * 174 * 4);
    EXPECT_EQ(zero.Memory().master_weight_bytes, 174 * 4);
  }
}

TEST(ZeroOptimizerTest, BadOptionsAreRefusedNamingThem) {
  Net net;
  torch::ZeroOptions options;
  options.stage = 3;
  auto made = torch::ZeroOptimizer::Create(
      net.named_parameters(), torch::MakeOptimizer(Adam()), options);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("stage 3"));
  options.stage = 2;
  options.gradient_clipping = -1;
  made = torch::ZeroOptimizer::Create(net.named_parameters(),
                                      torch::MakeOptimizer(Adam()), options);
  EXPECT_THAT(made.status().message(), HasSubstr("gradient_clipping"));
}

TEST(ZeroCheckpointTest, SavedStateLoadsIntoAFreshOptimizer) {
  TempDir dir;
  TrainedZero trained(/*seed=*/2, /*steps=*/2);
  Net& net = trained.net;
  torch::ZeroOptimizer& zero = trained.zero;
  ASSERT_TRUE(zero.Save(dir.str()).ok());

  ::torch::manual_seed(99);  // other weights: the load must replace them
  Net other;
  torch::ZeroOptions wider = Small(1);
  wider.reduce_bucket_elements = 1000;  // one bucket: another layout
  torch::ZeroOptimizer loaded(other.named_parameters(),
                              torch::MakeOptimizer(Adam()), wider);
  Status status = loaded.Load(dir.str());
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(loaded.steps_taken(), 2);
  for (size_t i = 0; i < net.parameters().size(); ++i)
    EXPECT_TRUE(::torch::equal(net.parameters()[i], other.parameters()[i]));
  // Both continue identically (the moments and step counts came along).
  TrainSteps(net, zero, 2);
  TrainSteps(other, loaded, 2);
  for (size_t i = 0; i < net.parameters().size(); ++i) {
    EXPECT_LT((net.parameters()[i] - other.parameters()[i])
                  .abs()
                  .max()
                  .item<double>(),
              1e-6);
  }
}

TEST(ZeroCheckpointTest, MismatchesAreNamedNeverLoaded) {
  TempDir dir;
  Net net;
  torch::ZeroOptimizer zero(net.named_parameters(),
                            torch::MakeOptimizer(Adam()), Small(2));
  TrainSteps(net, zero, 1);
  ASSERT_TRUE(zero.Save(dir.str()).ok());
  const std::string manifest_path = dir.str() + "/zero_manifest.json";

  {  // Another model: a parameter of another shape.
    Net wider(14);
    torch::ZeroOptimizer other(wider.named_parameters(),
                               torch::MakeOptimizer(Adam()), Small(2));
    Status status = other.Load(dir.str());
    EXPECT_THAT(status.message(), HasSubstr("parameter fc1.weight has shape "
                                            "[13,7]; in this model it is "
                                            "[14,7]"));
  }
  {  // Another optimizer.
    OptimizerConfig sgd;
    sgd.type = OptimizerType::kSgd;
    torch::ZeroOptimizer other(net.named_parameters(),
                               torch::MakeOptimizer(sgd), Small(2));
    EXPECT_THAT(other.Load(dir.str()).message(),
                HasSubstr("written by a adam optimizer; this one is sgd"));
  }
  // A manifest whose slices disagree with the shard: bucket 0 claims one
  // more element per slice (an uneven layout the shard does not have).
  nlohmann::json manifest;
  std::ifstream(manifest_path) >> manifest;
  nlohmann::json uneven = manifest;
  uneven["buckets"][0]["slice"] = uneven["buckets"][0]["slice"].get<int>() + 1;
  uneven["buckets"][0]["padded"] = uneven["buckets"][0]["slice"];
  std::ofstream(manifest_path) << uneven.dump();
  {
    torch::ZeroOptimizer other(net.named_parameters(),
                               torch::MakeOptimizer(Adam()), Small(2));
    Status status = other.Load(dir.str());
    EXPECT_THAT(status.message(), HasSubstr("tensor b0.master has 70 elements; "
                                            "the manifest gives bucket 0 "
                                            "slices of 71"));
  }
  // A shard file the manifest names but that is gone.
  std::ofstream(manifest_path) << manifest.dump();
  fs::remove(dir.str() + "/" + manifest["files"][0].get<std::string>());
  {
    torch::ZeroOptimizer other(net.named_parameters(),
                               torch::MakeOptimizer(Adam()), Small(2));
    EXPECT_THAT(other.Load(dir.str()).message(),
                HasSubstr("is missing (the manifest lists it)"));
  }
  EXPECT_EQ(zero.Load(dir.str() + "/nothing-here").code(),
            StatusCode::kNotFound);
}

// A manifest edited by `edit` is refused with a message containing
// `expected`, before any shard is read.
void ExpectRefused(const std::string& dir, const nlohmann::json& manifest,
                   const std::function<void(nlohmann::json&)>& edit,
                   const std::string& expected) {
  nlohmann::json edited = manifest;
  edit(edited);
  const std::string path = dir + "/zero_manifest.json";
  std::ofstream(path, std::ios::trunc) << edited.dump();
  Net net;
  torch::ZeroOptimizer other(net.named_parameters(),
                             torch::MakeOptimizer(Adam()), Small(2));
  Status status = other.Load(dir);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << expected;
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr(expected));
}

TEST(ZeroCheckpointTest, ManifestFieldsAreCheckedBeforeTheyAreUsed) {
  TempDir dir;
  TrainedZero trained(/*seed=*/1, /*steps=*/1);
  ASSERT_TRUE(trained.zero.Save(dir.str()).ok());
  nlohmann::json manifest;
  std::ifstream(dir.str() + "/zero_manifest.json") >> manifest;
  ASSERT_EQ(manifest["buckets"][0]["parameters"][1]["name"], "fc2.weight");

  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) {
        m["shards"] = 0;
        m["files"] = nlohmann::json::array();
      },
      "shards is 0; it must be 1 to 1048576");
  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) { m["files"][0] = "../elsewhere.pt"; },
      "files[0] '../elsewhere.pt' is not a file name");
  // A slice of 0 would divide by zero when elements are mapped to shards.
  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) {
        auto& b = m["buckets"][0];
        b["slice"] = 0;
        b["padded"] = 0;
        b["elements"] = 0;
        for (auto& p : b["parameters"]) p["numel"] = 0;
      },
      "bucket 0: slice is 0; it must be at least 1");
  // A numel that disagrees with the shape (the model is checked against
  // the shape, the bucket bounds against the numel).
  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) { m["buckets"][0]["parameters"][1]["numel"] = 1; },
      "bucket 0 parameter fc2.weight: numel 1 is not the product of its "
      "shape [5,13] (65)");
  // offset + numel would overflow int64 and pass a plain comparison.
  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) {
        m["buckets"][0]["parameters"][1]["offset"] =
            std::numeric_limits<int64_t>::max() - 10;
      },
      "bucket 0 parameter fc2.weight: offset 9223372036854775797 + numel 65 "
      "lies outside the bucket's 70 elements");
  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) {
        m["buckets"][0]["parameters"][1]["shape"] = {int64_t{1} << 40,
                                                     int64_t{1} << 40};
      },
      "bucket 0 parameter fc2.weight: shape [1099511627776,1099511627776] "
      "does not fit in the bucket's 70 elements");
  ExpectRefused(
      dir.str(), manifest,
      [](nlohmann::json& m) {
        m["buckets"][0]["slice"] = std::numeric_limits<int64_t>::max() / 2 + 1;
        m["shards"] = 2;
        m["files"].push_back("zero-other.pt");
      },
      "bucket 0: 70 elements in 2 slices of 4611686018427387904");
}

// The second of two saves at one step dies after writing its shards and
// before its manifest: the first save's checkpoint loads bit for bit.
TEST(ZeroCheckpointTest, ASaveDyingBeforeItsManifestLeavesTheLastOneWhole) {
  TempDir dir;
  TrainedZero first(/*seed=*/3, /*steps=*/2);
  ASSERT_TRUE(first.zero.Save(dir.str()).ok());
  TrainedZero second(/*seed=*/4, /*steps=*/2);  // other weights, same step
  ASSERT_FALSE(
      ::torch::equal(first.net.parameters()[0], second.net.parameters()[0]));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SetBeforeRenameHookForTesting(
        [](const std::string&, const std::string& path) {
          if (fs::path(path).filename() == "zero_manifest.json") ::_exit(42);
        });
    (void)second.zero.Save(dir.str());
    ::_exit(0);
  }
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 42)
      << "the save did not stop before its manifest: " << wait_status;

  ::torch::manual_seed(5);
  Net loaded_net;
  torch::ZeroOptimizer loaded(loaded_net.named_parameters(),
                              torch::MakeOptimizer(Adam()), Small(2));
  Status status = loaded.Load(dir.str());
  ASSERT_TRUE(status.ok()) << status.ToString();
  for (size_t i = 0; i < first.net.parameters().size(); ++i) {
    EXPECT_TRUE(
        ::torch::equal(first.net.parameters()[i], loaded_net.parameters()[i]))
        << "parameter " << i;
  }
  // The next save commits and removes every file its manifest does not
  // name, the dead save's included.
  ASSERT_TRUE(second.zero.Save(dir.str()).ok());
  nlohmann::json manifest;
  std::ifstream(dir.str() + "/zero_manifest.json") >> manifest;
  std::set<std::string> expected = {"zero_manifest.json"};
  for (const auto& file : manifest["files"]) expected.insert(file);
  std::set<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir.str()))
    found.insert(entry.path().filename().string());
  EXPECT_EQ(found, expected);
}

// ---------------------------------------------------------- processes

class ZeroEquivalenceTest : public ::testing::TestWithParam<int> {};

TEST_P(ZeroEquivalenceTest, EveryStageMatchesTheWholeBatch) {
  const int np = GetParam();
  RunResult r = RunWorker(np, {"equivalence"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // 2 optimizers x 2 stages x 3 variants, on every rank.
  std::regex line("max parameter difference");
  const auto lines =
      std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), line),
                    std::sregex_iterator());
  EXPECT_EQ(lines, 12 * np) << Describe(r);
  EXPECT_THAT(r.out, Not(HasSubstr("FAILED")));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ZeroEquivalenceTest,
                         ::testing::Values(2, 4));

// Save at one world size, load at another, and end where one process
// trained without stopping ends.
TEST(ZeroReshardTest, CheckpointsLoadAtAnyWorldSize) {
  struct Leg {
    int save_np, save_stage;
    int load_np, load_stage;
    const char* load_bucket;
  };
  for (const Leg& leg : {Leg{4, 2, 2, 2, "50"}, Leg{4, 1, 1, 2, "50"},
                         Leg{1, 2, 4, 2, "30"}, Leg{2, 2, 3, 1, "1000"}}) {
    TempDir dir;
    const std::string what =
        std::to_string(leg.save_np) + " -> " + std::to_string(leg.load_np);
    RunResult saved = RunWorker(
        leg.save_np,
        {"save", dir.str(), "3", std::to_string(leg.save_stage), "50"});
    ASSERT_EQ(saved.exit_code, 0) << what << "\n" << Describe(saved);
    RunResult resumed = RunWorker(
        leg.load_np, {"resume", dir.str(), "6", std::to_string(leg.load_stage),
                      leg.load_bucket});
    ASSERT_EQ(resumed.exit_code, 0) << what << "\n" << Describe(resumed);
    EXPECT_THAT(resumed.out, HasSubstr("resumed at step 3 of 6")) << what;
  }
}

TEST(ZeroLossScaleTest, EveryRankSkipsTheSameStepsAndScales) {
  RunResult r = RunWorker(2, {"scaling"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // DeepSpeed's rule by hand: 2^4; the overflow at 2 uses up the
  // hysteresis, the one at 3 halves; 3 clean steps (4, 5, 6) double it
  // back; 7 uses up the hysteresis again. The linear warm-up to 0.1 over
  // 10 steps advances only on the 7 taken steps; as in DeepSpeed, the
  // first two taken steps both run at the minimum (its scheduler is
  // stepped after each optimizer step, from iteration -1).
  const std::string want =
      "scales 16 16 16 16 8 8 8 16 16 16; skipped 2 3 7; lr 0.000 0.000 "
      "0.010 0.010 0.010 0.020 0.030 0.040 0.040 0.050; final scale 16";
  EXPECT_THAT(r.out, HasSubstr("rank 0: " + want)) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("rank 1: " + want)) << Describe(r);
}

}  // namespace
}  // namespace kolo
