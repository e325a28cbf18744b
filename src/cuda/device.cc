#include "cuda/device.h"

#include <cuda_runtime_api.h>

#ifdef KOLO_WITH_NCCL
#include <nccl.h>
#endif

#include <string>

namespace kolo::cuda {
namespace {

std::string RuntimeError(cudaError_t error, const char* call) {
  return std::string(call) + " failed: " + cudaGetErrorName(error) + " (" +
         cudaGetErrorString(error) + ")";
}

}  // namespace

StatusOr<int32_t> DeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  // The two answers of a machine that simply has no GPU to offer.
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // the runtime keeps the error otherwise
    return 0;
  }
  if (error != cudaSuccess) {
    return Internal(RuntimeError(error, "cudaGetDeviceCount"));
  }
  return static_cast<int32_t>(count);
}

StatusOr<std::string> RuntimeVersion() {
  int version = 0;
  const cudaError_t error = cudaRuntimeGetVersion(&version);
  if (error != cudaSuccess) {
    return Internal(RuntimeError(error, "cudaRuntimeGetVersion"));
  }
  // 13000 for 13.0: major * 1000 + minor * 10.
  return std::to_string(version / 1000) + "." +
         std::to_string((version % 1000) / 10);
}

StatusOr<std::string> NcclVersion() {
#ifdef KOLO_WITH_NCCL
  int code = 0;
  const ncclResult_t result = ncclGetVersion(&code);
  if (result != ncclSuccess) {
    return Internal(std::string("ncclGetVersion failed: ") +
                    ncclGetErrorString(result));
  }
  // NCCL >= 2.9 codes its version as major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." +
         std::to_string((code % 10000) / 100) + "." +
         std::to_string(code % 100);
#else
  return InvalidArgument(
      "kolo was built without NCCL (configure with "
      "-DKOLO_WITH_NCCL=ON)");
#endif
}

}  // namespace kolo::cuda
