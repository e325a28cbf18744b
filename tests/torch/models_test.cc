#include "kolo/models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kolo::models {
namespace {

using ::testing::HasSubstr;

// Parameter counts of the layers, from their definitions: a k x k convolution
// holds out * (in / groups) * k * k weights (+ out biases), a batch norm a
// scale and a shift per channel, a linear layer in * out weights + out biases.
int64_t ConvParams(int64_t in, int64_t out, int64_t k, bool bias = false,
                   int64_t groups = 1) {
  return out * (in / groups) * k * k + (bias ? out : 0);
}
int64_t BnParams(int64_t channels) { return 2 * channels; }
int64_t LinearParams(int64_t in, int64_t out) { return in * out + out; }

int64_t ExpectedLeNet(int64_t classes, int64_t in) {
  return ConvParams(in, 10, 5, true) + ConvParams(10, 20, 5, true) +
         LinearParams(320, 50) + LinearParams(50, classes);
}

// Two 3x3 convolutions with batch norm, and a projection when the channels
// change (in every network here they change exactly where the size halves).
int64_t BasicBlockParams(int64_t in, int64_t out) {
  int64_t projection = in != out ? ConvParams(in, out, 1) + BnParams(out) : 0;
  return ConvParams(in, out, 3) + BnParams(out) + ConvParams(out, out, 3) +
         BnParams(out) + projection;
}

int64_t ExpectedResNet18(int64_t classes, int64_t in) {
  return ConvParams(in, 64, 3) + BnParams(64) +                     // stem
         2 * BasicBlockParams(64, 64) +                             // stage 1
         BasicBlockParams(64, 128) + BasicBlockParams(128, 128) +   // stage 2
         BasicBlockParams(128, 256) + BasicBlockParams(256, 256) +  // stage 3
         BasicBlockParams(256, 512) + BasicBlockParams(512, 512) +  // stage 4
         LinearParams(512, classes);
}

// 1x1 (in -> p), 3x3 (p -> p), 1x1 (p -> 4p), each with batch norm, and a
// projection when the input is not already 4p channels.
int64_t BottleneckParams(int64_t in, int64_t p) {
  int64_t projection =
      in != 4 * p ? ConvParams(in, 4 * p, 1) + BnParams(4 * p) : 0;
  return ConvParams(in, p, 1) + BnParams(p) + ConvParams(p, p, 3) +
         BnParams(p) + ConvParams(p, 4 * p, 1) + BnParams(4 * p) + projection;
}

int64_t ExpectedResNet50(int64_t classes, int64_t in) {
  return ConvParams(in, 64, 3) + BnParams(64) + BottleneckParams(64, 64) +
         2 * BottleneckParams(256, 64) + BottleneckParams(256, 128) +
         3 * BottleneckParams(512, 128) + BottleneckParams(512, 256) +
         5 * BottleneckParams(1024, 256) + BottleneckParams(1024, 512) +
         2 * BottleneckParams(2048, 512) + LinearParams(2048, classes);
}

// Expansion 1x1 (absent for t = 1), depthwise 3x3, projection 1x1, each with
// batch norm.
int64_t InvertedResidualParams(int64_t in, int64_t out, int64_t t) {
  int64_t hidden = in * t;
  int64_t expand = t != 1 ? ConvParams(in, hidden, 1) + BnParams(hidden) : 0;
  return expand + ConvParams(hidden, hidden, 3, false, hidden) +
         BnParams(hidden) + ConvParams(hidden, out, 1) + BnParams(out);
}

int64_t ExpectedMobileNetV2(int64_t classes, int64_t in) {
  return ConvParams(in, 32, 3) + BnParams(32) +
         InvertedResidualParams(32, 16, 1) + InvertedResidualParams(16, 24, 6) +
         InvertedResidualParams(24, 24, 6) + InvertedResidualParams(24, 32, 6) +
         2 * InvertedResidualParams(32, 32, 6) +
         InvertedResidualParams(32, 64, 6) +
         3 * InvertedResidualParams(64, 64, 6) +
         InvertedResidualParams(64, 96, 6) +
         2 * InvertedResidualParams(96, 96, 6) +
         InvertedResidualParams(96, 160, 6) +
         2 * InvertedResidualParams(160, 160, 6) +
         InvertedResidualParams(160, 320, 6) + ConvParams(320, 1280, 1) +
         BnParams(1280) + LinearParams(1280, classes);
}

int64_t VggLayerParams(int64_t in, int64_t out) {
  return ConvParams(in, out, 3, /*bias=*/true) + BnParams(out);
}

int64_t ExpectedVGG16(int64_t classes, int64_t in) {
  return VggLayerParams(in, 64) + VggLayerParams(64, 64) +
         VggLayerParams(64, 128) + VggLayerParams(128, 128) +
         VggLayerParams(128, 256) + 2 * VggLayerParams(256, 256) +
         VggLayerParams(256, 512) + 2 * VggLayerParams(512, 512) +
         3 * VggLayerParams(512, 512) + LinearParams(512, 512) +
         LinearParams(512, 512) + LinearParams(512, classes);
}

std::shared_ptr<Model> Create(const std::string& name, int64_t classes,
                              int64_t in) {
  StatusOr<std::shared_ptr<Model>> model = CreateModel(name, classes, in);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return *model;
}

TEST(ModelsTest, LeNetHasTheMnistExampleCount) {
  EXPECT_EQ(CountParameters(*LeNet()), 21840);
  EXPECT_EQ(ExpectedLeNet(10, 1), 21840);
}

TEST(ModelsTest, ParameterCountsMatchTheLayerFormulas) {
  using Formula = int64_t (*)(int64_t, int64_t);
  const std::map<std::string, Formula> expected = {
      {"lenet", ExpectedLeNet},
      {"resnet18", ExpectedResNet18},
      {"resnet50", ExpectedResNet50},
      {"mobilenetv2", ExpectedMobileNetV2},
      {"vgg16", ExpectedVGG16}};
  ASSERT_EQ(expected.size(), ModelNames().size());
  for (const std::string& name : ModelNames()) {
    ASSERT_EQ(expected.count(name), 1u) << name;
    for (auto [classes, in] :
         {std::pair<int64_t, int64_t>{10, 1}, {10, 3}, {100, 3}}) {
      EXPECT_EQ(CountParameters(*Create(name, classes, in)),
                expected.at(name)(classes, in))
          << name << " classes " << classes << " in_channels " << in;
    }
  }
}

// The published counts of the CIFAR variants (3 channels, 10 classes), as a
// check on the formulas above.
TEST(ModelsTest, CifarCountsMatchPublishedValues) {
  EXPECT_EQ(ExpectedResNet18(10, 3), 11173962);
  EXPECT_EQ(ExpectedResNet50(10, 3), 23520842);
  EXPECT_EQ(ExpectedMobileNetV2(10, 3), 2236682);
  EXPECT_EQ(CountParameters(*ResNet18()), 11173962);
  EXPECT_EQ(CountParameters(*ResNet50()), 23520842);
  EXPECT_EQ(CountParameters(*MobileNetV2()), 2236682);
  EXPECT_EQ(CountParameters(*VGG16()), 15253578);
}

TEST(ModelsTest, ForwardGivesLogitsPerImage) {
  for (const std::string& name : ModelNames()) {
    for (auto [size, channels] :
         {std::pair<int64_t, int64_t>{28, 1}, {32, 3}}) {
      std::shared_ptr<Model> model = Create(name, 10, channels);
      model->eval();
      torch::Tensor x = torch::randn({2, channels, size, size});
      torch::Tensor logits = model->forward(x);
      EXPECT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 10}))
          << name << " on " << size << "x" << size << "x" << channels;
      EXPECT_TRUE(torch::isfinite(logits).all().item<bool>()) << name;
      // Eval mode turns dropout off: the same input gives the same logits.
      EXPECT_TRUE(torch::equal(model->forward(x), logits)) << name;
    }
  }
}

TEST(ModelsTest, HundredClasses) {
  std::shared_ptr<Model> model = Create("resnet18", 100, 3);
  model->eval();
  EXPECT_EQ(model->forward(torch::randn({2, 3, 32, 32})).sizes().vec(),
            (std::vector<int64_t>{2, 100}));
}

// The adaptive 4x4 pool stands in for the example's 2x2 max-pool; on 28x28
// input the two must agree exactly.
TEST(ModelsTest, LeNetMatchesTheMnistExampleOn28Pixels) {
  std::shared_ptr<Model> model = LeNet();
  model->eval();
  auto p = model->named_parameters();
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  torch::Tensor y = torch::relu(torch::max_pool2d(
      torch::conv2d(x, p["conv1.weight"], p["conv1.bias"]), {2, 2}));
  y = torch::relu(torch::max_pool2d(
      torch::conv2d(y, p["conv2.weight"], p["conv2.bias"]), {2, 2}));
  y = torch::relu(
      torch::linear(y.view({-1, 320}), p["fc1.weight"], p["fc1.bias"]));
  y = torch::linear(y, p["fc2.weight"], p["fc2.bias"]);
  EXPECT_TRUE(torch::allclose(model->forward(x), y));
}

TEST(ModelsTest, ParameterNamesAreUniqueAndReadable) {
  const std::map<std::string, std::vector<std::string>> expected_names = {
      {"lenet", {"conv1.weight", "conv2.bias", "fc1.weight", "fc2.bias"}},
      {"resnet18",
       {"conv1.weight", "bn1.bias", "layer1.0.conv1.weight",
        "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
        "layer4.1.bn2.bias", "fc.weight"}},
      {"resnet50",
       {"layer1.0.downsample.0.weight", "layer3.5.conv3.weight", "fc.bias"}},
      {"mobilenetv2",
       {"stem_conv.weight", "blocks.0.depthwise_conv.weight",
        "blocks.1.expand_conv.weight", "blocks.16.project_bn.bias",
        "head_conv.weight", "classifier.weight"}},
      {"vgg16",
       {"conv1_1.weight", "bn3_3.bias", "conv5_3.bias", "fc6.weight",
        "fc8.bias"}}};
  for (const std::string& name : ModelNames()) {
    std::shared_ptr<Model> model = Create(name, 10, 3);
    std::vector<std::string> keys = model->named_parameters().keys();
    std::set<std::string> unique(keys.begin(), keys.end());
    EXPECT_EQ(unique.size(), keys.size()) << name;
    for (const std::string& key : keys) EXPECT_FALSE(key.empty()) << name;
    for (const std::string& key : expected_names.at(name)) {
      EXPECT_EQ(unique.count(key), 1u) << name << " lacks " << key;
    }
  }
  // The first MobileNetV2 block (expansion 1) has no expansion layer.
  auto mobilenet = MobileNetV2()->named_parameters();
  EXPECT_EQ(mobilenet.find("blocks.0.expand_conv.weight"), nullptr);
}

// The distributed optimizer waits for a gradient of every named parameter; one
// left out of the graph would stall every rank.
TEST(ModelsTest, EveryParameterGetsAGradient) {
  for (const std::string& name : ModelNames()) {
    std::shared_ptr<Model> model = Create(name, 10, 1);
    model->train();
    torch::Tensor logits = model->forward(torch::randn({2, 1, 28, 28}));
    torch::nn::functional::cross_entropy(logits, torch::tensor({3, 7}))
        .backward();
    for (const auto& item : model->named_parameters()) {
      EXPECT_TRUE(item.value().grad().defined())
          << name << " " << item.key() << " has no gradient";
    }
  }
}

TEST(ModelsTest, SameSeedSameParameters) {
  for (const std::string& name : ModelNames()) {
    torch::manual_seed(7);
    std::shared_ptr<Model> a = Create(name, 10, 3);
    torch::manual_seed(7);
    std::shared_ptr<Model> b = Create(name, 10, 3);
    torch::manual_seed(8);
    std::shared_ptr<Model> c = Create(name, 10, 3);
    auto pa = a->named_parameters();
    auto pb = b->named_parameters();
    auto pc = c->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    bool any_differs = false;
    for (const auto& item : pa) {
      EXPECT_TRUE(torch::equal(item.value(), pb[item.key()]))
          << name << " " << item.key();
      any_differs |= !torch::equal(item.value(), pc[item.key()]);
    }
    // Otherwise the check above would pass for a constant initialization.
    EXPECT_TRUE(any_differs) << name << " ignores the seed";
  }
}

TEST(ModelsTest, CreateModelRejectsUnknownNames) {
  StatusOr<std::shared_ptr<Model>> model = CreateModel("alexnet", 10, 3);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("\"alexnet\""));
  EXPECT_THAT(model.status().message(),
              HasSubstr("lenet, resnet18, resnet50, mobilenetv2, vgg16"));
}

TEST(ModelsTest, CreateModelRejectsEmptyShapes) {
  StatusOr<std::shared_ptr<Model>> model = CreateModel("lenet", 0, 1);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("num_classes 0"));
  model = CreateModel("vgg16", 10, -1);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("in_channels -1"));
}

// The sequential form is the model itself laid out as a sequence: after the
// same seed it holds the same parameters in the same order with the same
// values, so in eval mode (no dropout, batch norm from its running
// statistics) it must compute the same logits.
TEST(ModelsTest, SequentialFormComputesTheModel) {
  for (const std::string& name : ModelNames()) {
    torch::manual_seed(5);
    std::shared_ptr<Model> model = Create(name, 10, 1);
    torch::manual_seed(5);
    StatusOr<torch::nn::Sequential> sequence =
        CreateSequentialModel(name, 10, 1);
    ASSERT_TRUE(sequence.ok()) << name << ": " << sequence.status().ToString();
    EXPECT_EQ(CountParameters(**sequence), CountParameters(*model)) << name;
    const std::vector<torch::Tensor> expected = model->parameters();
    const std::vector<torch::Tensor> actual = (*sequence)->parameters();
    ASSERT_EQ(actual.size(), expected.size()) << name;
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_TRUE(torch::equal(actual[i], expected[i]))
          << name << " parameter " << i;
    }
    model->eval();
    (*sequence)->eval();
    torch::Tensor x = torch::randn({2, 1, 28, 28});
    torch::Tensor logits = (*sequence)->forward(x);
    EXPECT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 10})) << name;
    EXPECT_TRUE(torch::allclose(logits, model->forward(x), 1e-5, 1e-6)) << name;
  }
}

TEST(ModelsTest, SequentialFormKeepsResidualBlocksWhole) {
  // LeNet: 4 weighted layers and 8 functions; ResNet-18: stem (3), 8 basic
  // blocks, pool, flatten, fc; MobileNetV2: stem (3), 17 inverted
  // residuals, head (3), pool, flatten, dropout, classifier.
  for (auto [name, layers] : std::vector<std::pair<std::string, size_t>>{
           {"lenet", 12}, {"resnet18", 14}, {"mobilenetv2", 27}}) {
    StatusOr<torch::nn::Sequential> sequence =
        CreateSequentialModel(name, 10, 3);
    ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
    EXPECT_EQ((*sequence)->size(), layers) << name;
  }
  StatusOr<torch::nn::Sequential> unknown =
      CreateSequentialModel("alexnet", 10, 3);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"alexnet\""));
}

}  // namespace
}  // namespace kolo::models
