// What this kolo was built with: its version, the LibTorch it was compiled
// against, CUDA and NCCL, and the collective engines. The tools' --version
// prints it; kolo-bench records it beside every figure; a program can check
// it before asking for an engine.
//
//   const kolo::BuildConfiguration& build = kolo::BuildInfo();
//   kolo::InitOptions options;
//   if (!build.HasEngine("gloo")) {
//     options.engine.backend = kolo::BackendKind::kTcp;
//   }
//
// Thread-safety: BuildInfo() returns a reference to a constant made once;
// any thread may read it.
#ifndef KOLO_BUILD_INFO_H_
#define KOLO_BUILD_INFO_H_

#include <string>
#include <vector>

namespace kolo {

struct BuildConfiguration {
  // kolo's own version, as find_package(kolo) gives it in kolo_VERSION.
  std::string version;
  // The LibTorch kolo_torch was compiled against ("2.11.0"); empty when kolo
  // was built without LibTorch (KOLO_WITH_TORCH=OFF).
  std::string torch_version;
  // CUDA: compiled with the CUDA toolkit (KOLO_WITH_CUDA) and which
  // toolkit version ("13.0"); empty when not.
  bool cuda = false;
  std::string cuda_version;
  // NCCL's headers and library were found beside the toolkit, and their
  // version ("2.28.9"); empty when not.
  bool nccl = false;
  std::string nccl_version;
  // The engines a job may ask for with KOLO_BACKEND, in the order kolo
  // prefers them: "shm" and "tcp" always, then "gloo" and "mpi" where built.
  std::vector<std::string> engines;

  bool HasEngine(const std::string& name) const;
  // Several lines, "kolo 0.1.0" first, then one line per fact:
  //   kolo 0.1.0
  //   LibTorch: 2.11.0
  //   CUDA: 13.0 (compiled in; no GPU code runs yet)
  //   NCCL: 2.28.9
  //   engines: shm, tcp, gloo, mpi
  std::string Describe() const;
};

const BuildConfiguration& BuildInfo();

// What a kolo program's --version prints: "<program>, part of " and then
// BuildInfo().Describe() without its last newline.
std::string VersionText(const std::string& program);

}  // namespace kolo

#endif  // KOLO_BUILD_INFO_H_
