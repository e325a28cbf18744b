#include "kolo/build_info.h"

#include <algorithm>

// CMake passes what it configured (src/CMakeLists.txt): the strings always,
// the engines as the same KOLO_WITH_* definitions the engines' code uses.
#ifndef KOLO_VERSION_STRING
#error "KOLO_VERSION_STRING must come from CMake"
#endif
#ifndef KOLO_TORCH_VERSION_STRING
#define KOLO_TORCH_VERSION_STRING ""
#endif
#ifndef KOLO_CUDA_VERSION_STRING
#define KOLO_CUDA_VERSION_STRING ""
#endif
#ifndef KOLO_NCCL_VERSION_STRING
#define KOLO_NCCL_VERSION_STRING ""
#endif

namespace kolo {
namespace {

BuildConfiguration MakeBuildInfo() {
  BuildConfiguration build;
  build.version = KOLO_VERSION_STRING;
  build.torch_version = KOLO_TORCH_VERSION_STRING;
  build.cuda_version = KOLO_CUDA_VERSION_STRING;
  build.cuda = !build.cuda_version.empty();
  build.nccl_version = KOLO_NCCL_VERSION_STRING;
  build.nccl = !build.nccl_version.empty();
  build.engines = {"shm", "tcp"};
#ifdef KOLO_WITH_GLOO
  build.engines.push_back("gloo");
#endif
#ifdef KOLO_WITH_MPI
  build.engines.push_back("mpi");
#endif
  return build;
}

std::string OrNot(const std::string& value, const std::string& absent) {
  return value.empty() ? absent : value;
}

}  // namespace

bool BuildConfiguration::HasEngine(const std::string& name) const {
  return std::find(engines.begin(), engines.end(), name) != engines.end();
}

std::string BuildConfiguration::Describe() const {
  std::string text = "kolo " + version + "\n";
  text +=
      "LibTorch: " + OrNot(torch_version, "not built (KOLO_WITH_TORCH=OFF)") +
      "\n";
  text += "CUDA: " +
          (cuda ? cuda_version + " (compiled in; no GPU code runs yet)"
                : std::string("not built (KOLO_WITH_CUDA=OFF)")) +
          "\n";
  text += "NCCL: " + OrNot(nccl_version, "not built") + "\n";
  text += "engines:";
  for (size_t i = 0; i < engines.size(); ++i) {
    text += (i == 0 ? " " : ", ") + engines[i];
  }
  return text + "\n";
}

std::string VersionText(const std::string& program) {
  std::string text = program + ", part of " + BuildInfo().Describe();
  text.pop_back();
  return text;
}

const BuildConfiguration& BuildInfo() {
  static const BuildConfiguration build = MakeBuildInfo();
  return build;
}

}  // namespace kolo
