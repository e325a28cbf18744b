// kolo::elastic for LibTorch: an elastic State that holds a module's
// parameters and buffers and an optimizer's state besides the plain fields
// of kolo/elastic.h.
//
//   auto model = std::make_shared<Net>();
//   torch::optim::SGD sgd(model->parameters(), /*lr=*/0.01);
//   kolo::torch::ElasticState state(*model, sgd);
//   int64_t step = 0;
//   state.Track("step", &step);
//   kolo::Status done = kolo::elastic::Run(state, [&]() -> kolo::Status {
//     kolo::torch::DistributedOptimizer optimizer(sgd,
//                                                 model->named_parameters());
//     for (; step < 1000; ++step) {
//       optimizer.ZeroGrad();
//       model->forward(torch::randn({8, 1, 28, 28})).sum().backward();
//       KOLO_RETURN_IF_ERROR(optimizer.Step());
//       if (step % 10 == 9) KOLO_RETURN_IF_ERROR(state.Commit());
//     }
//     return kolo::Status::Ok();
//   });
//
// The DistributedOptimizer belongs inside the training function: it is
// built for one world, and each reset makes a new one.
//
// Commit copies the parameters and buffers (a copy of their bytes) and
// serializes the optimizer's state (LibTorch's archive, so every optimizer
// works); Sync broadcasts rank 0's. Thread-safety: kolo/elastic.h's.
#ifndef KOLO_TORCH_ELASTIC_H_
#define KOLO_TORCH_ELASTIC_H_

#include <torch/torch.h>

#include "kolo/elastic.h"
#include "kolo/status.h"

namespace kolo::torch {

class ElasticState : public elastic::State {
 public:
  // `module` and `optimizer` must outlive the state; their values at the
  // first Sync (rank 0's) are where every worker starts.
  ElasticState(::torch::nn::Module& module,
               ::torch::optim::Optimizer& optimizer);
};

// The fields ElasticState adds, for a State of one's own: a module's
// parameters and buffers as raw bytes, and an optimizer's state as
// LibTorch's archive.
elastic::Field ModuleField(const std::string& name,
                           ::torch::nn::Module& module);
elastic::Field OptimizerField(const std::string& name,
                              ::torch::optim::Optimizer& optimizer);

}  // namespace kolo::torch

#endif  // KOLO_TORCH_ELASTIC_H_
