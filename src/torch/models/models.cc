// The plain feed-forward networks (LeNet, VGG-16), the registry behind
// CreateModel(), and the helpers the residual networks share; see
// kolo/models.h.
#include "kolo/models.h"

#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "torch/models/layers.h"

namespace kolo::models {

namespace internal {

void CheckModelShape(const char* model, int64_t num_classes,
                     int64_t in_channels) {
  KOLO_CHECK(num_classes >= 1 && in_channels >= 1)
      << model << ": num_classes " << num_classes << ", in_channels "
      << in_channels << " (both must be at least 1)";
}

torch::nn::Conv2d Conv(int64_t in_channels, int64_t out_channels,
                       int64_t kernel, int64_t stride, int64_t groups,
                       bool bias) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in_channels, out_channels, kernel)
          .stride(stride)
          .padding(kernel / 2)
          .groups(groups)
          .bias(bias));
}

void InitConvolutionsForRelu(torch::nn::Module& module) {
  for (const std::shared_ptr<torch::nn::Module>& child :
       module.modules(/*include_self=*/false)) {
    auto* conv = child->as<torch::nn::Conv2d>();
    if (conv == nullptr) continue;
    torch::nn::init::kaiming_normal_(conv->weight, /*a=*/0, torch::kFanOut,
                                     torch::kReLU);
    if (conv->bias.defined()) torch::nn::init::zeros_(conv->bias);
  }
}

}  // namespace internal

namespace {

using internal::CheckModelShape;
using internal::Conv;

// The PyTorch MNIST example's network, with the names it uses (conv1, conv2,
// conv2_drop, fc1, fc2). LibTorch's default initialization, as there.
class LeNetNet : public Model {
 public:
  LeNetNet(int64_t num_classes, int64_t in_channels)
      : Model("LeNet"),
        conv1_(
            register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                         in_channels, 10, /*kernel_size=*/5)))),
        conv2_(
            register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                         10, 20, /*kernel_size=*/5)))),
        conv2_drop_(register_module("conv2_drop", torch::nn::Dropout2d())),
        fc1_(register_module("fc1", torch::nn::Linear(320, 50))),
        dropout_(register_module("dropout", torch::nn::Dropout())),
        fc2_(register_module("fc2", torch::nn::Linear(50, num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(torch::max_pool2d(conv1_(x), {2, 2}));
    // Adaptive to 4x4 rather than a fixed 2x2 pool: the same windows for
    // 28x28 input, and 320 features for 32x32 input as well.
    x = torch::relu(std::get<0>(
        torch::adaptive_max_pool2d(conv2_drop_(conv2_(x)), {4, 4})));
    x = torch::relu(fc1_(x.flatten(1)));
    return fc2_(dropout_(x));
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::Conv2d conv2_;
  torch::nn::Dropout2d conv2_drop_;
  torch::nn::Linear fc1_;
  torch::nn::Dropout dropout_;
  torch::nn::Linear fc2_;
};

// VGG-16 with batch norm for small images; see VGG16() in kolo/models.h.
class VGG16Net : public Model {
 public:
  VGG16Net(int64_t num_classes, int64_t in_channels) : Model("VGG16") {
    // Configuration D: output channels of the convolutions in each stage.
    const std::vector<std::vector<int64_t>> kStages = {{64, 64},
                                                       {128, 128},
                                                       {256, 256, 256},
                                                       {512, 512, 512},
                                                       {512, 512, 512}};
    int64_t channels = in_channels;
    for (size_t stage = 0; stage < kStages.size(); ++stage) {
      std::vector<ConvBn> layers;
      for (size_t i = 0; i < kStages[stage].size(); ++i) {
        const std::string suffix =
            std::to_string(stage + 1) + "_" + std::to_string(i + 1);
        const int64_t out = kStages[stage][i];
        // Biased convolutions despite the batch norm, as in the paper's
        // network and torchvision's vgg16_bn.
        layers.push_back(
            {register_module("conv" + suffix,
                             Conv(channels, out, 3, 1, 1, /*bias=*/true)),
             register_module("bn" + suffix, torch::nn::BatchNorm2d(out))});
        channels = out;
      }
      stages_.push_back(std::move(layers));
    }
    fc6_ = register_module("fc6", torch::nn::Linear(channels, 512));
    fc7_ = register_module("fc7", torch::nn::Linear(512, 512));
    fc8_ = register_module("fc8", torch::nn::Linear(512, num_classes));
    dropout_ = register_module("dropout", torch::nn::Dropout(0.5));
    internal::InitConvolutionsForRelu(*this);
  }

  torch::Tensor forward(torch::Tensor x) override {
    for (std::vector<ConvBn>& stage : stages_) {
      for (ConvBn& layer : stage) x = torch::relu(layer.bn(layer.conv(x)));
      x = torch::max_pool2d(x, /*kernel_size=*/{2, 2}, /*stride=*/{2, 2},
                            /*padding=*/{0, 0}, /*dilation=*/{1, 1},
                            /*ceil_mode=*/true);
    }
    // 1x1 already for 28 and 32 pixels; averages larger maps down to it.
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    x = dropout_(torch::relu(fc6_(x)));
    x = dropout_(torch::relu(fc7_(x)));
    return fc8_(x);
  }

 private:
  struct ConvBn {
    torch::nn::Conv2d conv;
    torch::nn::BatchNorm2d bn;
  };

  std::vector<std::vector<ConvBn>> stages_;
  torch::nn::Linear fc6_{nullptr};
  torch::nn::Linear fc7_{nullptr};
  torch::nn::Linear fc8_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

using Factory = std::function<std::shared_ptr<Model>(int64_t, int64_t)>;

// The registry, in the order ModelNames() reports.
const std::vector<std::pair<std::string, Factory>>& Registry() {
  static const auto* const registry =
      new std::vector<std::pair<std::string, Factory>>{
          {"lenet", LeNet},       {"resnet18", ResNet18},
          {"resnet50", ResNet50}, {"mobilenetv2", MobileNetV2},
          {"vgg16", VGG16},
      };
  return *registry;
}

}  // namespace

std::shared_ptr<Model> LeNet(int64_t num_classes, int64_t in_channels) {
  CheckModelShape("LeNet", num_classes, in_channels);
  return std::make_shared<LeNetNet>(num_classes, in_channels);
}

std::shared_ptr<Model> VGG16(int64_t num_classes, int64_t in_channels) {
  CheckModelShape("VGG16", num_classes, in_channels);
  return std::make_shared<VGG16Net>(num_classes, in_channels);
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const auto& entry : Registry()) names.push_back(entry.first);
  return names;
}

StatusOr<std::shared_ptr<Model>> CreateModel(const std::string& name,
                                             int64_t num_classes,
                                             int64_t in_channels) {
  for (const auto& [known, factory] : Registry()) {
    if (known != name) continue;
    if (num_classes < 1 || in_channels < 1) {
      return InvalidArgument("model \"" + name + "\": num_classes " +
                             std::to_string(num_classes) + " and in_channels " +
                             std::to_string(in_channels) +
                             " must both be at least 1");
    }
    return factory(num_classes, in_channels);
  }
  std::string valid;
  for (const auto& entry : Registry()) {
    valid += (valid.empty() ? "" : ", ") + entry.first;
  }
  return InvalidArgument("unknown model \"" + name +
                         "\"; valid names: " + valid);
}

int64_t CountParameters(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const torch::Tensor& parameter : module.parameters()) {
    count += parameter.numel();
  }
  return count;
}

}  // namespace kolo::models
