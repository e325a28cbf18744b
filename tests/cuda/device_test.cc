#include "cuda/device.h"

#include <gtest/gtest.h>

#include "kolo/build_info.h"

namespace kolo::cuda {
namespace {

// On a machine without a GPU (CI's), the runtime's answer is 0 devices, not
// an error; on a GPU machine, at least one.
TEST(CudaDevice, CountsDevicesOrAnswersZero) {
  StatusOr<int32_t> count = DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_GE(*count, 0);
}

// The CUDA runtime loaded is the toolkit kolo was compiled with: the
// version BuildInfo reports comes from CMake, this one from the library.
TEST(CudaDevice, RuntimeIsTheToolkitKoloWasBuiltWith) {
  StatusOr<std::string> version = RuntimeVersion();
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, BuildInfo().cuda_version);
}

TEST(CudaDevice, NcclLoadedIsTheOneKoloWasBuiltWith) {
  StatusOr<std::string> version = NcclVersion();
  if (!BuildInfo().nccl) {
    EXPECT_EQ(version.status().code(), StatusCode::kInvalidArgument);
    return;
  }
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, BuildInfo().nccl_version);
}

}  // namespace
}  // namespace kolo::cuda
