// kolo::torch::ElasticState in one process: what Commit saves is what
// Restore puts back, for the module's parameters and buffers and for the
// optimizer's state, so a reset continues exactly where the commit was.
#include <gtest/gtest.h>

#include "kolo/kolo.h"
#include "kolo/torch_elastic.h"

namespace kolo {
namespace {

struct Net : ::torch::nn::Module {
  Net() {
    fc = register_module("fc", ::torch::nn::Linear(4, 3));
    norm = register_module("norm", ::torch::nn::BatchNorm1d(3));
  }
  ::torch::Tensor forward(const ::torch::Tensor& x) {
    return norm->forward(fc->forward(x));
  }
  ::torch::nn::Linear fc{nullptr};
  ::torch::nn::BatchNorm1d norm{nullptr};
};

void Step(Net& net, ::torch::optim::Optimizer& optimizer,
          const ::torch::Tensor& x) {
  optimizer.zero_grad();
  net.forward(x).pow(2).sum().backward();
  optimizer.step();
}

// Every parameter and buffer, cloned. Taken after steps that follow a
// restore, they show the optimizer's state too: momentum or Adam's moments
// restored wrongly would move the parameters elsewhere.
std::vector<::torch::Tensor> Snapshot(Net& net) {
  std::vector<::torch::Tensor> all;
  for (const auto& t : net.parameters()) all.push_back(t.detach().clone());
  for (const auto& t : net.buffers()) all.push_back(t.detach().clone());
  return all;
}

template <typename Optimizer, typename Options>
void ExpectRestoreReturnsToTheCommit(Options options) {
  ASSERT_FALSE(IsInitialized());
  ::torch::manual_seed(1);
  Net net;
  Optimizer optimizer(net.parameters(), options);
  const ::torch::Tensor x = ::torch::randn({8, 4});
  torch::ElasticState state(net, optimizer);
  Step(net, optimizer, x);
  Step(net, optimizer, x);
  ASSERT_TRUE(state.Commit().ok());

  // The run goes on from the commit: two more steps.
  Step(net, optimizer, x);
  Step(net, optimizer, x);
  const std::vector<::torch::Tensor> expected = Snapshot(net);

  // A failure after the commit: more steps that a reset must undo.
  for (int i = 0; i < 3; ++i) Step(net, optimizer, x * 2);
  ASSERT_TRUE(state.Restore().ok());
  Step(net, optimizer, x);
  Step(net, optimizer, x);
  const std::vector<::torch::Tensor> again = Snapshot(net);

  ASSERT_EQ(again.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(::torch::equal(again[i], expected[i])) << i;
}

TEST(ElasticStateTest, RestoreReturnsSgdWithMomentumToTheCommit) {
  ExpectRestoreReturnsToTheCommit<::torch::optim::SGD>(
      ::torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
}

TEST(ElasticStateTest, RestoreReturnsAdamToTheCommit) {
  ExpectRestoreReturnsToTheCommit<::torch::optim::Adam>(
      ::torch::optim::AdamOptions(0.01));
}

TEST(ElasticStateTest, AModelOfAnotherShapeIsRefusedByName) {
  Net net;
  // What another model saved does not fit this one.
  ::torch::nn::Linear small(2, 2);
  elastic::Field small_field = torch::ModuleField("module", *small);
  StatusOr<std::string> bytes = small_field.save();
  ASSERT_TRUE(bytes.ok());
  elastic::Field mine = torch::ModuleField("module", net);
  Status loaded = mine.load(*bytes);
  EXPECT_EQ(loaded.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.message().find("'module'"), std::string::npos)
      << loaded.message();
}

}  // namespace
}  // namespace kolo
