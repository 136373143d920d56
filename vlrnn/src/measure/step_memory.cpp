#include "vlrnn/measure/step_memory.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/process_memory.h"
#include "vlrnn/measure/timer.h"

#ifdef VLRNN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <unordered_set>

namespace vlrnn::measure {
namespace {

#ifdef VLRNN_WITH_CUDA
c10::DeviceIndex cuda_index(const torch::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}

// allocated_bytes[0] is the aggregate over both pools (StatType::AGGREGATE) in LibTorch
// 1.13 and 2.x alike; `auto` spares naming the struct, which moved namespace in 2.x.
struct CudaBytes {
  int64_t current, peak;
};
CudaBytes cuda_allocated(const torch::Device& device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device));
  return {stats.allocated_bytes[0].current, stats.allocated_bytes[0].peak};
}
#endif

}  // namespace

StepMemoryScope::StepMemoryScope(torch::Device device) : device_(device) {
  synchronize(device_);  // work queued before the step must not land inside it
  memory_.rss_peak_reset = reset_peak_rss();
#ifdef VLRNN_WITH_CUDA
  if (device_.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index(device_));
    memory_.start_bytes = cuda_allocated(device_).current;
    return;
  }
#endif
  TORCH_CHECK(device_.is_cpu(), "StepMemoryScope device: expected cpu (or cuda in a "
              "VLRNN_WITH_CUDA build), got ", device_);
  auto& tracker = CpuMemoryTracker::instance();
  tracker.install();
  memory_.start_bytes = tracker.reset_peak();
}

StepMemory StepMemoryScope::finish() {
  synchronize(device_);
  StepMemory out = memory_;
#ifdef VLRNN_WITH_CUDA
  if (device_.is_cuda()) {
    const auto bytes = cuda_allocated(device_);
    out.peak_bytes = bytes.peak;
    out.end_bytes = bytes.current;
  } else
#endif
  {
    const auto& tracker = CpuMemoryTracker::instance();
    out.peak_bytes = tracker.peak_bytes();
    out.end_bytes = tracker.current_bytes();
  }
  out.step_peak_bytes = std::max<int64_t>(0, out.peak_bytes - out.start_bytes);
  out.peak_rss_bytes = peak_rss_bytes();
  return out;
}

int64_t workload_bytes(const Workload& workload) {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  auto count = [&](const torch::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    const auto& storage = t.storage();
    if (seen.insert(storage.unsafeGetStorageImpl()).second) {
      bytes += int64_t(storage.nbytes());
    }
  };
  for (const auto& p : workload.model.parameters()) count(p);
  for (const auto& p : workload.head.parameters()) count(p);
  count(workload.batch.inputs);
  count(workload.batch.targets);
  count(workload.batch.lengths);
  for (const auto& h : workload.h0) count(h);
  return bytes;
}

}  // namespace vlrnn::measure
