// The model zoo as torch::nn::Sequential, for pipeline parallelism
// (kolo/torch_pipeline.h cuts a Sequential into stages); see
// CreateSequentialModel() in kolo/models.h.
//
// Each sequence is built from the layers of the network CreateModel()
// returns, not from new ones: the factory draws the initial weights, and the
// sequence takes its convolutions, batch norms, linear layers and residual
// blocks as they are (shared, not copied), adding parameter-free modules
// (relu, pooling, flatten) where the network's forward() calls a function.
// So the sequence has the model's parameters, in the model's order, with the
// model's values for the same seed, and computes the same function; only
// the names differ ("4.conv1.weight" for "layer1.0.conv1.weight"). A
// residual block stays one module of the sequence, since its shortcut spans
// its layers; a stage of blocks (a Sequential inside the model) is
// unpacked into its blocks, so a pipeline can cut between any two.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "kolo/models.h"

namespace kolo::models {
namespace {

namespace nn = ::torch::nn;

// The child `name` of `model` as the module type `Holder` wraps. A missing
// or differently typed child is a bug here: the layouts below follow the
// factories' registrations.
template <typename Holder>
Holder Child(const nn::Module& model, const std::string& name) {
  using Impl = typename Holder::ContainedType;
  const auto children = model.named_children();
  const std::shared_ptr<nn::Module>* child = children.find(name);
  KOLO_CHECK(child != nullptr)
      << model.name() << " has no layer \"" << name << "\"";
  std::shared_ptr<Impl> impl = std::dynamic_pointer_cast<Impl>(*child);
  KOLO_CHECK(impl != nullptr)
      << model.name() << "'s layer \"" << name << "\" has another type";
  return Holder(impl);
}

// Appends the modules of the model's Sequential `name` (residual blocks)
// one by one.
void AppendBlocks(const nn::Module& model, const std::string& name,
                  nn::Sequential& sequence) {
  for (const nn::AnyModule& block : *Child<nn::Sequential>(model, name)) {
    sequence->push_back(block);
  }
}

// conv1 -> max-pool 2 -> relu -> conv2 -> dropout2d -> adaptive max-pool 4
// -> relu -> flatten -> fc1 -> relu -> dropout -> fc2, as LeNetNet.
nn::Sequential LeNetSequence(const nn::Module& model) {
  nn::Sequential s;
  s->push_back(Child<nn::Conv2d>(model, "conv1"));
  s->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
  s->push_back(nn::ReLU());
  s->push_back(Child<nn::Conv2d>(model, "conv2"));
  s->push_back(Child<nn::Dropout2d>(model, "conv2_drop"));
  s->push_back(nn::AdaptiveMaxPool2d(nn::AdaptiveMaxPool2dOptions(4)));
  s->push_back(nn::ReLU());
  s->push_back(nn::Flatten());
  s->push_back(Child<nn::Linear>(model, "fc1"));
  s->push_back(nn::ReLU());
  s->push_back(Child<nn::Dropout>(model, "dropout"));
  s->push_back(Child<nn::Linear>(model, "fc2"));
  return s;
}

// Five stages of (conv, batch norm, relu) closed by a ceil-mode max-pool,
// then the 512-512-512 classifier with dropout, as VGG16Net. The model
// applies its one dropout module twice; the sequence holds two (dropout
// has no parameters, so nothing is duplicated).
nn::Sequential VGG16Sequence(const nn::Module& model) {
  const std::vector<int64_t> kConvolutionsPerStage = {2, 2, 3, 3, 3};
  nn::Sequential s;
  for (size_t stage = 0; stage < kConvolutionsPerStage.size(); ++stage) {
    for (int64_t i = 0; i < kConvolutionsPerStage[stage]; ++i) {
      const std::string suffix =
          std::to_string(stage + 1) + "_" + std::to_string(i + 1);
      s->push_back(Child<nn::Conv2d>(model, "conv" + suffix));
      s->push_back(Child<nn::BatchNorm2d>(model, "bn" + suffix));
      s->push_back(nn::ReLU());
    }
    s->push_back(
        nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2).ceil_mode(true)));
  }
  s->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
  s->push_back(nn::Flatten());
  const double p = Child<nn::Dropout>(model, "dropout")->options.p();
  s->push_back(Child<nn::Linear>(model, "fc6"));
  s->push_back(nn::ReLU());
  s->push_back(nn::Dropout(p));
  s->push_back(Child<nn::Linear>(model, "fc7"));
  s->push_back(nn::ReLU());
  s->push_back(nn::Dropout(p));
  s->push_back(Child<nn::Linear>(model, "fc8"));
  return s;
}

// Stem (conv1, bn1, relu), the blocks of layer1..layer4, global average
// pooling, flatten, fc, as ResNet<Block>.
nn::Sequential ResNetSequence(const nn::Module& model) {
  nn::Sequential s;
  s->push_back(Child<nn::Conv2d>(model, "conv1"));
  s->push_back(Child<nn::BatchNorm2d>(model, "bn1"));
  s->push_back(nn::ReLU());
  for (int stage = 1; stage <= 4; ++stage) {
    AppendBlocks(model, "layer" + std::to_string(stage), s);
  }
  s->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
  s->push_back(nn::Flatten());
  s->push_back(Child<nn::Linear>(model, "fc"));
  return s;
}

// Stem (conv, bn, relu6), the 17 inverted residuals, head (conv, bn,
// relu6), global average pooling, flatten, dropout, classifier, as
// MobileNetV2Net.
nn::Sequential MobileNetV2Sequence(const nn::Module& model) {
  nn::Sequential s;
  s->push_back(Child<nn::Conv2d>(model, "stem_conv"));
  s->push_back(Child<nn::BatchNorm2d>(model, "stem_bn"));
  s->push_back(nn::ReLU6());
  AppendBlocks(model, "blocks", s);
  s->push_back(Child<nn::Conv2d>(model, "head_conv"));
  s->push_back(Child<nn::BatchNorm2d>(model, "head_bn"));
  s->push_back(nn::ReLU6());
  s->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
  s->push_back(nn::Flatten());
  s->push_back(Child<nn::Dropout>(model, "dropout"));
  s->push_back(Child<nn::Linear>(model, "classifier"));
  return s;
}

}  // namespace

StatusOr<nn::Sequential> CreateSequentialModel(const std::string& name,
                                               int64_t num_classes,
                                               int64_t in_channels) {
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<Model> model,
                        CreateModel(name, num_classes, in_channels));
  if (name == "lenet") return LeNetSequence(*model);
  if (name == "vgg16") return VGG16Sequence(*model);
  if (name == "resnet18" || name == "resnet50") return ResNetSequence(*model);
  if (name == "mobilenetv2") return MobileNetV2Sequence(*model);
  // CreateModel knows a model this file does not: a bug, caught by the
  // test that builds every ModelNames() entry both ways.
  return Internal("model \"" + name + "\" has no sequential form");
}

}  // namespace kolo::models
