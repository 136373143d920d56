#include "vlrnn/measure/iteration_memory.h"

#include "vlrnn/core/device.h"
#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/process_memory.h"
#include "vlrnn/measure/timer.h"

#ifdef VLRNN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <unordered_set>

namespace vlrnn::measure {
namespace {

#ifdef VLRNN_WITH_CUDA
// allocated_bytes[0] is the aggregate over both pools (StatType::AGGREGATE) in LibTorch
// 1.13 and 2.x alike; `auto` spares naming the struct, which moved namespace in 2.x.
struct CudaBytes {
  int64_t current, peak;
};
CudaBytes cuda_allocated(const torch::Device& device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(resolved_device(device).index());
  return {stats.allocated_bytes[0].current, stats.allocated_bytes[0].peak};
}
#endif

// The innermost open scope (NOTE [ Nested iteration scopes ]).
IterationMemoryScope* innermost_scope = nullptr;

}  // namespace

int64_t IterationMemoryScope::device_peak_bytes() const {
#ifdef VLRNN_WITH_CUDA
  if (device_.is_cuda()) return cuda_allocated(device_).peak;
#endif
  return CpuMemoryTracker::instance().peak_bytes();
}

void IterationMemoryScope::reset_device_peak() const {
#ifdef VLRNN_WITH_CUDA
  if (device_.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(resolved_device(device_).index());
    return;
  }
#endif
  CpuMemoryTracker::instance().reset_peak();
}

IterationMemoryScope::IterationMemoryScope(torch::Device device) : device_(device) {
#ifdef VLRNN_WITH_CUDA
  const bool supported = device_.is_cpu() || device_.is_cuda();
#else
  const bool supported = device_.is_cpu();
#endif
  TORCH_CHECK(supported, "IterationMemoryScope device: expected cpu (or cuda in a "
              "VLRNN_WITH_CUDA build), got ", device_);
  synchronize(device_);  // work queued before the step must not land inside it
  if (device_.is_cpu()) {
    auto& tracker = CpuMemoryTracker::instance();
    if (!tracker.installed()) {
      tracker.install();
      installed_tracker_ = true;
    }
  }
  enclosing_ = innermost_scope;
  if (enclosing_ != nullptr) {  // keep what the enclosing scope has seen so far
    enclosing_->carried_peak_bytes_ =
        std::max(enclosing_->carried_peak_bytes_, enclosing_->device_peak_bytes());
    enclosing_->carried_peak_rss_bytes_ =
        std::max(enclosing_->carried_peak_rss_bytes_, peak_rss_bytes());
  }
  innermost_scope = this;
  memory_.rss_peak_reset = reset_peak_rss();
  reset_device_peak();
#ifdef VLRNN_WITH_CUDA
  if (device_.is_cuda()) {
    memory_.start_bytes = cuda_allocated(device_).current;
    return;
  }
#endif
  memory_.start_bytes = CpuMemoryTracker::instance().current_bytes();
}

IterationMemoryScope::~IterationMemoryScope() { close(); }

void IterationMemoryScope::close() {
  if (!open_) return;
  open_ = false;
  if (innermost_scope == this) innermost_scope = enclosing_;
  if (enclosing_ != nullptr) {
    // The enclosing scope goes on from what this one left live, not from its peak.
    reset_peak_rss();
    reset_device_peak();
  }
  if (installed_tracker_) CpuMemoryTracker::instance().uninstall();
}

IterationMemory IterationMemoryScope::finish() {
  TORCH_CHECK(open_, "IterationMemoryScope::finish: the scope was already finished");
  synchronize(device_);
  IterationMemory out = memory_;
#ifdef VLRNN_WITH_CUDA
  if (device_.is_cuda()) {
    out.end_bytes = cuda_allocated(device_).current;
  } else
#endif
  {
    out.end_bytes = CpuMemoryTracker::instance().current_bytes();
  }
  out.peak_bytes = std::max(carried_peak_bytes_, device_peak_bytes());
  out.iteration_peak_bytes = std::max<int64_t>(0, out.peak_bytes - out.start_bytes);
  out.peak_rss_bytes = std::max(carried_peak_rss_bytes_, peak_rss_bytes());
  close();
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
