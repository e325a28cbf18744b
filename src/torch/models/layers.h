// Building blocks shared by the model zoo's translation units (internal).
#ifndef KOLO_TORCH_MODELS_LAYERS_H_
#define KOLO_TORCH_MODELS_LAYERS_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>

namespace kolo::models {
namespace internal {

// Aborts, naming `model` and both values, unless num_classes and
// in_channels are at least 1: the factories' precondition.
void CheckModelShape(const char* model, int64_t num_classes,
                     int64_t in_channels);

// A square convolution with "same" padding for odd kernels (k / 2), so only
// the stride changes the spatial size. No bias by default: in the networks
// that use this helper a batch norm follows, whose shift makes a bias
// redundant.
torch::nn::Conv2d Conv(int64_t in_channels, int64_t out_channels,
                       int64_t kernel, int64_t stride = 1, int64_t groups = 1,
                       bool bias = false);

// Re-initializes every convolution below `module` as torchvision does for
// ResNet, MobileNetV2 and VGG: He normal with fan-out for ReLU, zero bias.
// LibTorch's default (He uniform with a = sqrt(5)) gives deep ReLU stacks a
// smaller starting variance; matching torchvision keeps accuracy comparable
// with published numbers. Draws from the global generator.
void InitConvolutionsForRelu(torch::nn::Module& module);

}  // namespace internal
}  // namespace kolo::models

#endif  // KOLO_TORCH_MODELS_LAYERS_H_
