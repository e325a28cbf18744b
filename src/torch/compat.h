// Where LibTorch 1.13 (Debian's libtorch-dev) and LibTorch 2.x (PyPI's
// torch, the LibTorch archives) differ in the stable C++ API kolo uses, the
// one place that knows both. Everything else in kolo is written once, against
// these names. tests/torch/compat_test.cc checks each on the LibTorch of the
// build; CI builds and runs it against both versions.
//
// The differences, and what each name here stands for:
// - Optimizer state: LibTorch files a parameter's state under a key made
//   from its TensorImpl. 1.13 keys by that pointer printed as a string; 2.x
//   (since 2.0) by the pointer itself. OptimizerStateKey gives the key of
//   the version built against.
// - Version: TORCH_VERSION_MAJOR and _MINOR live in <torch/version.h> in
//   both; KOLO_TORCH_AT_LEAST(2, 0) compares against them.
#ifndef KOLO_TORCH_COMPAT_H_
#define KOLO_TORCH_COMPAT_H_

#include <torch/torch.h>
#include <torch/version.h>

#include <string>

#define KOLO_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace kolo::torch::compat {

// "2.11.0": the LibTorch these headers belong to.
inline std::string TorchVersion() { return TORCH_VERSION; }

// The key type of Optimizer::state(): std::string in 1.13, void* in 2.x.
using OptimizerStateKey =
    std::decay_t<decltype(std::declval<::torch::optim::Optimizer&>()
                              .state()
                              .begin()
                              ->first)>;

// The key under which `parameter`'s state is filed in Optimizer::state().
inline OptimizerStateKey StateKeyOf(const ::torch::Tensor& parameter) {
#if KOLO_TORCH_AT_LEAST(2, 0)
  return parameter.unsafeGetTensorImpl();
#else
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
#endif
}

}  // namespace kolo::torch::compat

#endif  // KOLO_TORCH_COMPAT_H_
