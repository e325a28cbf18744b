// The PyTorch peers' interpreter: which one is used, what the probe of its
// torch reads, what a table says when it has none, which precisions it may
// run, and the line that names both sides' torch. One test runs the real
// probe on the configured interpreter (KOLO_PEER_PYTHON, the build's
// KOLO_PYTHON), skipping where it has no torch.
#include "peer_python.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kolo/build_info.h"
#include "testing/requirements.h"

#ifndef KOLO_PEER_PYTHON
#define KOLO_PEER_PYTHON ""
#endif

namespace kolo::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(PeerPython, TheFlagWinsOverTheConfiguredInterpreter) {
  EXPECT_EQ(FindPython("/opt/python/bin/python3"), "/opt/python/bin/python3");
  const std::string configured = KOLO_PEER_PYTHON;
  if (!configured.empty()) {
    EXPECT_EQ(FindPython(""), configured);
  } else {
    EXPECT_THAT(FindPython(""),
                ::testing::AnyOf("/usr/bin/python3", "python3"));
  }
}

TEST(PeerPython, TheProbeGivesTheVersionAndFp16Support) {
  const PeerPython two =
      ParsePeerProbe("/venv/bin/python", true, "2.11.0+cu130\ncpu-fp16\n");
  EXPECT_EQ(two.path, "/venv/bin/python");
  EXPECT_EQ(two.torch_version, "2.11.0+cu130");
  EXPECT_TRUE(two.cpu_fp16);
  EXPECT_EQ(two.Missing(), "");
  const PeerPython old =
      ParsePeerProbe("/usr/bin/python3", true, "1.13.0a0\nno-cpu-fp16\n");
  EXPECT_EQ(old.torch_version, "1.13.0a0");
  EXPECT_FALSE(old.cpu_fp16);
  // A failed import leaves no version, whatever it printed.
  const PeerPython none = ParsePeerProbe("/usr/bin/python3", false, "Trace");
  EXPECT_EQ(none.torch_version, "");
  EXPECT_THAT(none.Missing(),
              HasSubstr("not installed (/usr/bin/python3 cannot import "
                        "torch; run scripts/setup.sh"));
  EXPECT_THAT(none.Missing(), HasSubstr("--python"));
}

TEST(PeerPython, Fp16IsRefusedOnlyWhereThePeersTorchLacksIt) {
  const PeerPython two =
      ParsePeerProbe("/venv/bin/python", true, "2.11.0\ncpu-fp16\n");
  const PeerPython old =
      ParsePeerProbe("/usr/bin/python3", true, "1.13.0a0\nno-cpu-fp16\n");
  EXPECT_TRUE(CheckPeerPrecision("fp16", two, "torch-zero").ok());
  EXPECT_TRUE(CheckPeerPrecision("bf16", old, "torch-zero").ok());
  EXPECT_TRUE(CheckPeerPrecision("fp32", old, "torch-zero").ok());
  const Status refused = CheckPeerPrecision("fp16", old, "torch-zero");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(),
              HasSubstr("--precision fp16: torch-zero runs in "
                        "/usr/bin/python3, whose torch 1.13.0a0 has no CPU "
                        "float16 autocast"));
  // A peer without torch gets a "not installed" row instead.
  EXPECT_TRUE(
      CheckPeerPrecision("fp16", ParsePeerProbe("p", false, ""), "x").ok());
}

TEST(PeerPython, TheTorchLineNamesBothSides) {
  const std::string libtorch =
      BuildInfo().torch_version.empty() ? "none" : BuildInfo().torch_version;
  EXPECT_EQ(KoloTorchVersion(), libtorch);
  EXPECT_EQ(TorchVersionsLine(nullptr),
            "# torch: kolo's side built with LibTorch " + libtorch);
  const PeerPython two =
      ParsePeerProbe("/venv/bin/python", true, "2.11.0+cu130\ncpu-fp16\n");
  EXPECT_EQ(TorchVersionsLine(&two),
            "# torch: kolo's side built with LibTorch " + libtorch +
                "; the PyTorch peers ran torch 2.11.0+cu130 "
                "(/venv/bin/python)");
  const PeerPython none = ParsePeerProbe("/usr/bin/python3", false, "");
  EXPECT_THAT(TorchVersionsLine(&none),
              HasSubstr("the PyTorch peers did not run (/usr/bin/python3 "
                        "cannot import torch)"));
}

// The real probe of the configured interpreter: the version `import torch`
// reports, and on torch 2.x, CPU fp16.
TEST(PeerPython, ProbesTheConfiguredInterpreter) {
  const PeerPython peer = ProbePeerPython(FindPython(""));
  KOLO_REQUIRE_OR_SKIP(
      !peer.torch_version.empty(),
      "torch in " + peer.path + " (scripts/setup.sh makes .venv with it)");
  EXPECT_THAT(peer.torch_version, ::testing::MatchesRegex("[0-9]+\\.[0-9]+.*"));
  if (std::stoi(peer.torch_version) >= 2) {
    EXPECT_TRUE(peer.cpu_fp16);
  }
  // A missing interpreter is no torch, not a failure.
  EXPECT_EQ(ProbePeerPython("/nonexistent/python").torch_version, "");
}

}  // namespace
}  // namespace kolo::bench
