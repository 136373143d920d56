#include "vlrnn/measure/timer.h"

#include "vlrnn/measure/confidence.h"

#ifdef VLRNN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#endif

#include <algorithm>
#include <chrono>
#include <numeric>

namespace vlrnn::measure {

void synchronize(const torch::Device& device) {
#ifdef VLRNN_WITH_CUDA
  if (device.is_cuda()) {
    torch::cuda::synchronize(device.has_index() ? device.index() : -1);
    return;
  }
#endif
  TORCH_CHECK(device.is_cpu(), "synchronize device: expected cpu",
#ifdef VLRNN_WITH_CUDA
              " or cuda",
#else
              " (this build has no CUDA: configure with -DVLRNN_WITH_CUDA=ON and a CUDA LibTorch)",
#endif
              ", got ", device);
}

struct DeviceTimer::Impl {
  torch::Device device;
  std::chrono::steady_clock::time_point t0;
#ifdef VLRNN_WITH_CUDA
  // Events on the current stream time the GPU's own work, without the host's launch gaps
  // ending the interval early.
  std::unique_ptr<at::cuda::CUDAEvent> start, stop;
#endif
};

DeviceTimer::DeviceTimer(torch::Device device) : impl_(new Impl{device, {}}) {
  synchronize(device);  // validates the device, too
}

DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::start() {
  synchronize(impl_->device);
#ifdef VLRNN_WITH_CUDA
  if (impl_->device.is_cuda()) {
    impl_->start = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    impl_->stop = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    impl_->start->record();
    return;
  }
#endif
  impl_->t0 = std::chrono::steady_clock::now();
}

double DeviceTimer::stop() {
#ifdef VLRNN_WITH_CUDA
  if (impl_->device.is_cuda()) {
    TORCH_CHECK(impl_->start != nullptr, "DeviceTimer::stop: start() was not called");
    impl_->stop->record();
    impl_->stop->synchronize();
    return double(impl_->start->elapsed_time(*impl_->stop)) * 1e-3;  // ms -> s
  }
#endif
  synchronize(impl_->device);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - impl_->t0).count();
}

TimingStats summarize(std::vector<double> seconds) {
  TORCH_CHECK(!seconds.empty(), "summarize seconds: expected at least one timing, got none");
  std::sort(seconds.begin(), seconds.end());
  TimingStats stats;
  stats.samples = int64_t(seconds.size());
  stats.min = seconds.front();
  stats.max = seconds.back();
  stats.median = sorted_quantile(seconds, 0.5);
  stats.q1 = sorted_quantile(seconds, 0.25);
  stats.q3 = sorted_quantile(seconds, 0.75);
  stats.mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / double(seconds.size());
  return stats;
}

TimingStats time_repeats(const std::function<void()>& work, int64_t warmup, int64_t repeats,
                         torch::Device device) {
  TORCH_CHECK(warmup >= 0, "warmup: expected >= 0 untimed runs, got ", warmup);
  TORCH_CHECK(repeats >= 1, "repeats: expected >= 1 timed runs, got ", repeats);
  for (int64_t i = 0; i < warmup; ++i) work();
  DeviceTimer timer(device);
  std::vector<double> seconds;
  for (int64_t i = 0; i < repeats; ++i) {
    timer.start();
    work();
    seconds.push_back(timer.stop());
  }
  return summarize(std::move(seconds));
}

}  // namespace vlrnn::measure
