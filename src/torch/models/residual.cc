// The networks built from residual blocks: ResNet-18, ResNet-50 and
// MobileNetV2, in their small-image (CIFAR) variants; see kolo/models.h.
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kolo/models.h"
#include "torch/models/layers.h"

namespace kolo::models {
namespace {

using internal::CheckModelShape;
using internal::Conv;
using internal::InitConvolutionsForRelu;

// The projection shortcut of a residual block whose output differs from its
// input in channels or size: a strided 1x1 convolution and a batch norm.
torch::nn::Sequential Projection(int64_t in_channels, int64_t out_channels,
                                 int64_t stride) {
  return torch::nn::Sequential(Conv(in_channels, out_channels, 1, stride),
                               torch::nn::BatchNorm2d(out_channels));
}

// What ResNet's blocks share: the shortcut, the block's input or, when the
// block changes its channels or size, the input's projection, added to the
// block's output before the last relu.
class ResidualBlock : public torch::nn::Module {
 protected:
  // Registers the projection ("downsample", after the block's own layers,
  // as torchvision orders them) when the block needs one.
  void AddShortcut(int64_t in_channels, int64_t out_channels, int64_t stride) {
    if (stride != 1 || in_channels != out_channels) {
      downsample_ = register_module(
          "downsample", Projection(in_channels, out_channels, stride));
    }
  }

  torch::Tensor AddToShortcut(const torch::Tensor& out,
                              const torch::Tensor& x) {
    return torch::relu(out + (downsample_ ? downsample_->forward(x) : x));
  }

 private:
  torch::nn::Sequential downsample_{nullptr};
};

// ResNet's basic block: two 3x3 convolutions, the first strided, added to the
// input (or its projection) before the last relu.
class BasicBlock : public ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 1;

  BasicBlock(int64_t in_channels, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", Conv(in_channels, planes, 3, stride))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", Conv(planes, planes, 3))),
        bn2_(register_module("bn2", torch::nn::BatchNorm2d(planes))) {
    AddShortcut(in_channels, planes, stride);
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = torch::relu(bn1_(conv1_(x)));
    return AddToShortcut(bn2_(conv2_(out)), x);
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::BatchNorm2d bn2_;
};

// ResNet's bottleneck block: 1x1 down to `planes`, 3x3 (strided, as in
// torchvision's "ResNet v1.5"), 1x1 up to 4 * planes, plus the shortcut.
class Bottleneck : public ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 4;

  Bottleneck(int64_t in_channels, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", Conv(in_channels, planes, 1))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", Conv(planes, planes, 3, stride))),
        bn2_(register_module("bn2", torch::nn::BatchNorm2d(planes))),
        conv3_(register_module("conv3", Conv(planes, planes * kExpansion, 1))),
        bn3_(register_module("bn3",
                             torch::nn::BatchNorm2d(planes * kExpansion))) {
    AddShortcut(in_channels, planes * kExpansion, stride);
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = torch::relu(bn1_(conv1_(x)));
    out = torch::relu(bn2_(conv2_(out)));
    return AddToShortcut(bn3_(conv3_(out)), x);
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::BatchNorm2d bn2_;
  torch::nn::Conv2d conv3_;
  torch::nn::BatchNorm2d bn3_;
};

// ResNet with the small-image stem (3x3 stride-1 convolution, no max-pool).
// `Block` is BasicBlock or Bottleneck; `blocks` counts them per stage.
// Parameter names follow torchvision: conv1, bn1, layer1.0.conv1, ..., fc.
template <typename Block>
class ResNet : public Model {
 public:
  ResNet(std::string name, const std::array<int64_t, 4>& blocks,
         int64_t num_classes, int64_t in_channels)
      : Model(std::move(name)),
        conv1_(register_module("conv1", Conv(in_channels, 64, 3))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(64))) {
    constexpr std::array<int64_t, 4> kPlanes = {64, 128, 256, 512};
    int64_t channels = 64;
    for (size_t stage = 0; stage < blocks.size(); ++stage) {
      // The first stage keeps the stem's resolution; each later one halves it
      // in its first block.
      int64_t stride = stage == 0 ? 1 : 2;
      torch::nn::Sequential layer;
      for (int64_t i = 0; i < blocks[stage]; ++i) {
        layer->push_back(
            std::make_shared<Block>(channels, kPlanes[stage], stride));
        channels = kPlanes[stage] * Block::kExpansion;
        stride = 1;
      }
      layers_.push_back(
          register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", torch::nn::Linear(channels, num_classes));
    InitConvolutionsForRelu(*this);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn1_(conv1_(x)));
    for (torch::nn::Sequential& layer : layers_) x = layer->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_(x);
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  std::vector<torch::nn::Sequential> layers_;
  torch::nn::Linear fc_{nullptr};
};

// MobileNetV2's inverted residual: 1x1 expansion by `expand_ratio` (skipped
// when it is 1), 3x3 depthwise (strided), linear 1x1 projection; the input is
// added back only when the shape is unchanged (stride 1, same channels), as in
// the paper and torchvision.
class InvertedResidual : public torch::nn::Module {
 public:
  InvertedResidual(int64_t in_channels, int64_t out_channels, int64_t stride,
                   int64_t expand_ratio)
      : residual_(stride == 1 && in_channels == out_channels) {
    const int64_t hidden = in_channels * expand_ratio;
    if (expand_ratio != 1) {
      expand_conv_ =
          register_module("expand_conv", Conv(in_channels, hidden, 1));
      expand_bn_ = register_module("expand_bn", torch::nn::BatchNorm2d(hidden));
    }
    depthwise_conv_ = register_module(
        "depthwise_conv", Conv(hidden, hidden, 3, stride, /*groups=*/hidden));
    depthwise_bn_ =
        register_module("depthwise_bn", torch::nn::BatchNorm2d(hidden));
    project_conv_ =
        register_module("project_conv", Conv(hidden, out_channels, 1));
    project_bn_ =
        register_module("project_bn", torch::nn::BatchNorm2d(out_channels));
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = x;
    if (expand_conv_) out = torch::relu6(expand_bn_(expand_conv_(out)));
    out = torch::relu6(depthwise_bn_(depthwise_conv_(out)));
    out = project_bn_(project_conv_(out));
    return residual_ ? out + x : out;
  }

 private:
  const bool residual_;
  torch::nn::Conv2d expand_conv_{nullptr};
  torch::nn::BatchNorm2d expand_bn_{nullptr};
  torch::nn::Conv2d depthwise_conv_{nullptr};
  torch::nn::BatchNorm2d depthwise_bn_{nullptr};
  torch::nn::Conv2d project_conv_{nullptr};
  torch::nn::BatchNorm2d project_bn_{nullptr};
};

// MobileNetV2, width 1.0, small-image strides. Parameter names: stem_conv,
// stem_bn, blocks.0 ... blocks.16 (expand_, depthwise_, project_ conv/bn),
// head_conv, head_bn, classifier.
class MobileNetV2Net : public Model {
 public:
  MobileNetV2Net(int64_t num_classes, int64_t in_channels)
      : Model("MobileNetV2"),
        stem_conv_(register_module("stem_conv", Conv(in_channels, 32, 3))),
        stem_bn_(register_module("stem_bn", torch::nn::BatchNorm2d(32))) {
    struct Stage {
      int64_t expand_ratio;
      int64_t channels;
      int64_t blocks;
      int64_t stride;  // of the stage's first block
    };
    // The paper's Table 2, except the 24-channel stage: stride 1 instead of 2
    // (and the stem above: stride 1 instead of 2), so that 32x32 input is
    // downsampled 8 times rather than 32.
    constexpr Stage kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 1}, {6, 32, 3, 2},
                                 {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2},
                                 {6, 320, 1, 1}};
    int64_t channels = 32;
    for (const Stage& stage : kStages) {
      for (int64_t i = 0; i < stage.blocks; ++i) {
        blocks_->push_back(std::make_shared<InvertedResidual>(
            channels, stage.channels, i == 0 ? stage.stride : 1,
            stage.expand_ratio));
        channels = stage.channels;
      }
    }
    register_module("blocks", blocks_);
    head_conv_ = register_module("head_conv", Conv(channels, 1280, 1));
    head_bn_ = register_module("head_bn", torch::nn::BatchNorm2d(1280));
    dropout_ = register_module("dropout", torch::nn::Dropout(0.2));
    classifier_ =
        register_module("classifier", torch::nn::Linear(1280, num_classes));
    InitConvolutionsForRelu(*this);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu6(stem_bn_(stem_conv_(x)));
    x = blocks_->forward(x);
    x = torch::relu6(head_bn_(head_conv_(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return classifier_(dropout_(x));
  }

 private:
  torch::nn::Conv2d stem_conv_;
  torch::nn::BatchNorm2d stem_bn_;
  torch::nn::Sequential blocks_;
  torch::nn::Conv2d head_conv_{nullptr};
  torch::nn::BatchNorm2d head_bn_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear classifier_{nullptr};
};

}  // namespace

std::shared_ptr<Model> ResNet18(int64_t num_classes, int64_t in_channels) {
  CheckModelShape("ResNet18", num_classes, in_channels);
  return std::make_shared<ResNet<BasicBlock>>(
      "ResNet18", std::array<int64_t, 4>{2, 2, 2, 2}, num_classes, in_channels);
}

std::shared_ptr<Model> ResNet50(int64_t num_classes, int64_t in_channels) {
  CheckModelShape("ResNet50", num_classes, in_channels);
  return std::make_shared<ResNet<Bottleneck>>(
      "ResNet50", std::array<int64_t, 4>{3, 4, 6, 3}, num_classes, in_channels);
}

std::shared_ptr<Model> MobileNetV2(int64_t num_classes, int64_t in_channels) {
  CheckModelShape("MobileNetV2", num_classes, in_channels);
  return std::make_shared<MobileNetV2Net>(num_classes, in_channels);
}

}  // namespace kolo::models
