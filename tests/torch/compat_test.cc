// The compatibility header (src/torch/compat.h) against the LibTorch of the
// build: CI runs this file built against LibTorch 2.11 (build/) and Debian's
// 1.13 (build-debian/), so each branch of the header is exercised.
#include "torch/compat.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kolo/build_info.h"

namespace kolo::torch {
namespace {

// What kolo reports it was built against (from CMake's find_package) is the
// LibTorch whose headers this file was compiled with.
TEST(TorchCompat, BuildInfoNamesTheLibTorchOfTheHeaders) {
  EXPECT_EQ(BuildInfo().torch_version, compat::TorchVersion());
  EXPECT_EQ(compat::TorchVersion().rfind(
                std::to_string(TORCH_VERSION_MAJOR) + "." +
                    std::to_string(TORCH_VERSION_MINOR) + ".",
                0),
            0u)
      << compat::TorchVersion();
}

TEST(TorchCompat, VersionComparison) {
  EXPECT_TRUE(KOLO_TORCH_AT_LEAST(1, 0));
  EXPECT_TRUE(KOLO_TORCH_AT_LEAST(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR));
  EXPECT_FALSE(
      KOLO_TORCH_AT_LEAST(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR + 1));
  EXPECT_FALSE(KOLO_TORCH_AT_LEAST(TORCH_VERSION_MAJOR + 1, 0));
}

// The key StateKeyOf gives is the one LibTorch's own optimizer files a
// parameter's state under after a step: found there, and holding that
// parameter's momentum.
TEST(TorchCompat, StateKeyFindsTheStateAnOptimizerStepMade) {
  ::torch::manual_seed(0);
  ::torch::nn::Linear layer(3, 2);
  ::torch::optim::SGD sgd(layer->parameters(),
                          ::torch::optim::SGDOptions(0.1).momentum(0.9));
  layer->forward(::torch::ones({4, 3})).sum().backward();
  sgd.step();
  ASSERT_EQ(sgd.state().size(), 2u);
  for (const ::torch::Tensor& parameter : layer->parameters()) {
    auto it = sgd.state().find(compat::StateKeyOf(parameter));
    ASSERT_NE(it, sgd.state().end());
    const auto& state =
        static_cast<const ::torch::optim::SGDParamState&>(*it->second);
    // The first step's momentum buffer is the gradient itself.
    EXPECT_TRUE(::torch::equal(state.momentum_buffer(), parameter.grad()));
  }
  // Another tensor of the same shape has no state under its key.
  const ::torch::Tensor other = ::torch::zeros_like(layer->weight);
  EXPECT_EQ(sgd.state().find(compat::StateKeyOf(other)), sgd.state().end());
}

}  // namespace
}  // namespace kolo::torch
