#include "vlrnn/core/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace vlrnn {

torch::Device resolved_device(const torch::Device& device) {
  if (!device.is_cuda() || device.has_index()) return device;
  return c10::impl::getDeviceGuardImpl(c10::kCUDA)->getDevice();
}

}  // namespace vlrnn
