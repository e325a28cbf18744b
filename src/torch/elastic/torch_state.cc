#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "kolo/torch_elastic.h"

namespace kolo::torch {
namespace {

// The parameters, then the buffers, in the module's own order: the same on
// every rank that built the same model.
std::vector<::torch::Tensor> ModuleTensors(::torch::nn::Module& module) {
  std::vector<::torch::Tensor> tensors = module.parameters();
  for (const ::torch::Tensor& buffer : module.buffers())
    tensors.push_back(buffer);
  return tensors;
}

}  // namespace

elastic::Field ModuleField(const std::string& name,
                           ::torch::nn::Module& module) {
  elastic::Field field;
  field.name = name;
  field.save = [&module]() -> StatusOr<std::string> {
    std::vector<::torch::Tensor> tensors = ModuleTensors(module);
    size_t bytes = 0;
    for (const ::torch::Tensor& t : tensors) bytes += t.nbytes();
    std::string blob(bytes, '\0');
    size_t offset = 0;
    ::torch::NoGradGuard no_grad;
    for (const ::torch::Tensor& t : tensors) {
      const ::torch::Tensor dense = t.contiguous().cpu();
      std::memcpy(&blob[offset], dense.data_ptr(), dense.nbytes());
      offset += dense.nbytes();
    }
    return blob;
  };
  field.load = [&module, name](const std::string& blob) -> Status {
    std::vector<::torch::Tensor> tensors = ModuleTensors(module);
    size_t bytes = 0;
    for (const ::torch::Tensor& t : tensors) bytes += t.nbytes();
    if (bytes != blob.size()) {
      return InvalidArgument("elastic state field '" + name + "' holds " +
                             std::to_string(blob.size()) +
                             " bytes of parameters and buffers; this model "
                             "has " +
                             std::to_string(bytes) +
                             " (every worker must build the same model)");
    }
    size_t offset = 0;
    ::torch::NoGradGuard no_grad;
    for (::torch::Tensor& t : tensors) {
      const ::torch::Tensor source =
          ::torch::from_blob(const_cast<char*>(blob.data()) + offset, t.sizes(),
                             t.options().device(::torch::kCPU));
      t.copy_(source);
      offset += t.nbytes();
    }
    return Status::Ok();
  };
  return field;
}

elastic::Field OptimizerField(const std::string& name,
                              ::torch::optim::Optimizer& optimizer) {
  elastic::Field field;
  field.name = name;
  field.save = [&optimizer, name]() -> StatusOr<std::string> {
    try {
      ::torch::serialize::OutputArchive archive;
      optimizer.save(archive);
      std::ostringstream bytes;
      archive.save_to(bytes);
      return bytes.str();
    } catch (const std::exception& e) {
      return Internal("saving the optimizer of elastic state field '" + name +
                      "': " + e.what());
    }
  };
  field.load = [&optimizer, name](const std::string& blob) -> Status {
    try {
      std::istringstream bytes(blob);
      ::torch::serialize::InputArchive archive;
      archive.load_from(bytes);
      optimizer.load(archive);
      return Status::Ok();
    } catch (const std::exception& e) {
      return InvalidArgument("loading the optimizer of elastic state field '" +
                             name + "': " + e.what());
    }
  };
  return field;
}

ElasticState::ElasticState(::torch::nn::Module& module,
                           ::torch::optim::Optimizer& optimizer) {
  Track(ModuleField("module", module));
  Track(OptimizerField("optimizer", optimizer));
}

}  // namespace kolo::torch
