#include "test_util.h"

#include "vlrnn/core/device.h"

namespace vlrnn {
namespace {

TEST(ResolvedDevice, AnIndexedOrNonCudaDeviceIsAsGiven) {
  EXPECT_EQ(resolved_device(torch::kCPU), torch::Device(torch::kCPU));
  EXPECT_EQ(resolved_device(torch::Device("cuda:3")), torch::Device("cuda:3"));
}

TEST(ResolvedDevice, CudaWithoutAnIndexIsWhereItsTensorsLand) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  EXPECT_EQ(resolved_device(torch::kCUDA), torch::empty({0}, torch::kCUDA).device());
}

}  // namespace
}  // namespace vlrnn
