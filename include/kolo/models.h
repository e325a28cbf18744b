// kolo's model zoo: the image classifiers that kolo-train, the examples and
// the benchmarks train, so that every rank builds the same network from a
// name on the command line.
//
//   ::torch::manual_seed(42);  // same seed on every rank: same initial weights
//   kolo::StatusOr<std::shared_ptr<kolo::models::Model>> model =
//       kolo::models::CreateModel("resnet18", /*num_classes=*/10, /*in_channels=*/3);
//   if (!model.ok()) return model.status();
//   ::torch::Tensor logits = (*model)->forward(images);  // [N, 10]
//   ::torch::Tensor loss = ::torch::nn::functional::cross_entropy(logits, labels);
//
// Every model takes a float NCHW batch and returns raw logits of shape
// [N, num_classes]: the trainer applies cross-entropy (log-softmax and
// negative log-likelihood in one step), so no model ends in a softmax.
//
// The models are sized for MNIST-like (28x28) and CIFAR-like (32x32) images.
// The deep networks use the small-image variants that the CIFAR literature
// trains, rather than the ImageNet stems that would shrink a 32-pixel image to
// 1x1 before the last stage; each factory says what it changed. All of them
// end in global average pooling (or, for LeNet, adaptive max pooling) so
// larger inputs work too, with the same parameters.
//
// Parameter names: every layer is registered under a fixed, readable name
// ("layer2.0.conv1.weight", "conv3_2.bias"), so named_parameters() is the same
// on every rank and across runs. The distributed optimizer uses these names as
// the collective names of the gradients.
//
// Initialization draws from LibTorch's global generator: models built after
// the same ::torch::manual_seed() have identical parameters.
//
// Thread-safety: a factory may be called from any thread, but two threads that
// draw from the global generator at once make the weights depend on timing;
// seed and build on one thread. A Model is a ::torch::nn::Module: calls on one
// instance need external synchronization.
#ifndef KOLO_MODELS_H_
#define KOLO_MODELS_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kolo/status.h"

namespace kolo::models {

// A classifier: float NCHW images in, raw logits [N, num_classes] out.
// Dropout and batch-norm layers follow train()/eval() as usual.
class Model : public ::torch::nn::Module {
 public:
  explicit Model(std::string name) : ::torch::nn::Module(std::move(name)) {}

  virtual ::torch::Tensor forward(::torch::Tensor x) = 0;
};

// The factories below require num_classes >= 1 and in_channels >= 1 and abort
// otherwise (a bug in the caller); CreateModel() checks user input instead.

// The classic PyTorch MNIST example network: conv 5x5 (10) -> max-pool 2 ->
// relu -> conv 5x5 (20) -> dropout2d -> max-pool -> relu -> fc 320->50 -> relu
// -> dropout -> fc 50->num_classes. 21,840 parameters for 1 channel and 10
// classes. Two departures from the example: it returns logits, not
// log-probabilities; and the second pooling is an adaptive max-pool to 4x4,
// which equals the 2x2 max-pool for 28x28 input (8x8 -> 4x4) and lets 32x32
// input (10x10 -> 4x4, overlapping 3x3 windows) reach the same 320 features.
std::shared_ptr<Model> LeNet(int64_t num_classes = 10, int64_t in_channels = 1);

// ResNet-18 (He et al. 2016): basic blocks [2, 2, 2, 2] of 64, 128, 256, 512
// channels, global average pooling, fc 512 -> num_classes. Small-image stem:
// one 3x3 convolution, stride 1, 64 channels, then batch norm and relu, and no
// max-pool (the ImageNet stem is a 7x7 stride-2 convolution and a stride-2
// max-pool); the stages then take 32x32 to 32, 16, 8, 4 pixels. 11,173,962
// parameters for 3 channels and 10 classes. A block's projection shortcut is a
// 1x1 convolution with batch norm, named "downsample" as in torchvision.
std::shared_ptr<Model> ResNet18(int64_t num_classes = 10,
                                int64_t in_channels = 3);

// ResNet-50: bottleneck blocks (1x1, 3x3, 1x1 with expansion 4; stride on the
// 3x3 as in torchvision) [3, 4, 6, 3], fc 2048 -> num_classes, with the same
// small-image stem as ResNet18(). 23,520,842 parameters for 3 channels and 10
// classes.
std::shared_ptr<Model> ResNet50(int64_t num_classes = 10,
                                int64_t in_channels = 3);

// MobileNetV2 (Sandler et al. 2018), width 1.0: inverted residual blocks with
// ReLU6, a 1x1 convolution to 1280 channels, global average pooling, dropout
// 0.2 and fc 1280 -> num_classes, as in torchvision. Small-image variant, as
// the common CIFAR versions do: the first convolution has stride 1 (not 2) and
// the second stage (24 channels) stride 1 (not 2), so the network downsamples
// 8 times instead of 32 and a 32x32 image ends at 4x4. 2,236,682 parameters
// for 3 channels and 10 classes (the strides do not change the count).
std::shared_ptr<Model> MobileNetV2(int64_t num_classes = 10,
                                   int64_t in_channels = 3);

// VGG-16 with batch norm (configuration D, Simonyan & Zisserman 2015): 13 3x3
// convolutions (with bias, then batch norm and relu) in five stages of 64,
// 128, 256, 512, 512 channels, each closed by a 2x2 max-pool. The pools round
// up (ceil mode) so 28x28 input reaches 1x1 like 32x32 does (28, 14, 7, 4, 2,
// 1) instead of vanishing. The classifier is sized for that 1x1x512 feature
// map: fc 512 -> 512 -> 512 -> num_classes with relu and dropout 0.5, in place
// of the 25088 -> 4096 -> 4096 ImageNet classifier. Layers are named after the
// paper: conv1_1 ... conv5_3, bn1_1 ... bn5_3, fc6, fc7, fc8. 15,253,578
// parameters for 3 channels and 10 classes.
std::shared_ptr<Model> VGG16(int64_t num_classes = 10, int64_t in_channels = 3);

// The names CreateModel() accepts: lenet, resnet18, resnet50, mobilenetv2,
// vgg16.
std::vector<std::string> ModelNames();

// Builds the model `name` (one of ModelNames(), lower case). Returns
// kInvalidArgument, naming the valid choices, for an unknown name, and for a
// num_classes or in_channels below 1.
StatusOr<std::shared_ptr<Model>> CreateModel(const std::string& name,
                                             int64_t num_classes,
                                             int64_t in_channels);

// The model `name` as a ::torch::nn::Sequential, the form pipeline
// parallelism cuts into stages (kolo/torch_pipeline.h): the layers of the
// network CreateModel() builds (same parameters, in the same order, with
// the same values after the same ::torch::manual_seed), in the order its
// forward() applies them, with relu, pooling and flatten as modules of
// their own. A residual block (ResNet's basic or bottleneck block,
// MobileNetV2's inverted residual) is one module, since its shortcut spans
// its layers. The sequence computes what the model computes; its parameter
// names are its positions ("4.conv1.weight" for "layer1.0.conv1.weight").
// Errors as CreateModel().
StatusOr<::torch::nn::Sequential> CreateSequentialModel(const std::string& name,
                                                        int64_t num_classes,
                                                        int64_t in_channels);

// The number of scalar parameters of `module` and all its submodules,
// trainable or not; buffers (batch-norm running statistics) are not counted.
int64_t CountParameters(const ::torch::nn::Module& module);

}  // namespace kolo::models

#endif  // KOLO_MODELS_H_
