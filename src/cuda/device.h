// The CUDA devices and the NCCL library this process sees. Built only with
// KOLO_WITH_CUDA; the GPU engines and the staging of tensors build on it.
//
// A machine without a GPU or without NVIDIA's driver is not an error here:
// kolo's CPU engines then carry every job, so DeviceCount() answers 0.
#ifndef KOLO_CUDA_DEVICE_H_
#define KOLO_CUDA_DEVICE_H_

#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace kolo::cuda {

// The number of devices the CUDA runtime reports: 0 where there is no
// device or no driver; kInternal naming the runtime's error otherwise.
StatusOr<int32_t> DeviceCount();

// The version of the CUDA runtime library loaded ("13.0").
StatusOr<std::string> RuntimeVersion();

// The version of the NCCL library loaded ("2.28.9"), which must be the
// one kolo was compiled against (kolo::BuildInfo().nccl_version): NCCL's
// communicators are not compatible across versions. Only with
// KOLO_WITH_NCCL.
StatusOr<std::string> NcclVersion();

}  // namespace kolo::cuda

#endif  // KOLO_CUDA_DEVICE_H_
