#include "kolo/build_info.h"

#include <gtest/gtest.h>

#include "kolo/options.h"

namespace kolo {
namespace {

// The engines BuildInfo lists are exactly those a job can ask for: each
// name ParseBackend accepts is listed, and each it refuses is not.
TEST(BuildInfo, EnginesAreTheOnesAJobCanChoose) {
  const BuildConfiguration& build = BuildInfo();
  ASSERT_GE(build.engines.size(), 2u);
  EXPECT_EQ(build.engines[0], "shm");
  EXPECT_EQ(build.engines[1], "tcp");
  for (const char* name : {"shm", "tcp", "gloo", "mpi"}) {
    EXPECT_EQ(ParseBackend(name).ok(), build.HasEngine(name)) << name;
  }
  EXPECT_FALSE(build.HasEngine("nccl-not-an-engine"));
}

TEST(BuildInfo, DescribesEveryFactOnItsOwnLine) {
  const BuildConfiguration& build = BuildInfo();
  EXPECT_EQ(build.version, KOLO_EXPECTED_VERSION);
  const std::string text = build.Describe();
  EXPECT_EQ(text.rfind("kolo " + build.version + "\n", 0), 0u) << text;
  EXPECT_NE(text.find("\nLibTorch: "), std::string::npos) << text;
  EXPECT_NE(text.find("\nCUDA: "), std::string::npos) << text;
  EXPECT_NE(text.find("\nNCCL: "), std::string::npos) << text;
  std::string engines = "engines:";
  for (size_t i = 0; i < build.engines.size(); ++i) {
    engines += (i == 0 ? " " : ", ") + build.engines[i];
  }
  EXPECT_NE(text.find("\n" + engines + "\n"), std::string::npos) << text;
  EXPECT_EQ(build.cuda, !build.cuda_version.empty());
  EXPECT_EQ(build.nccl, !build.nccl_version.empty());
  // NCCL only ever comes with CUDA.
  if (build.nccl) {
    EXPECT_TRUE(build.cuda);
  }
}

}  // namespace
}  // namespace kolo
