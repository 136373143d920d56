#pragma once
// Wall-clock timing of device work: the device is synchronized before a clock is read (CUDA
// events on the GPU when VLRNN_WITH_CUDA is defined), and repeated timings are summarized
// by their median and spread.

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

namespace vlrnn::measure {

// Waits until every kernel queued on `device` has finished (a no-op on CPU).
void synchronize(const torch::Device& device);

// Times one region of work on `device`: start(), the work, stop() -> seconds.
class DeviceTimer {
 public:
  explicit DeviceTimer(torch::Device device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  void start();
  double stop();  // seconds since start()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Median and spread of repeated timings, in seconds. Quartiles interpolate linearly
// between order statistics (numpy's default), so they exist for any count >= 1.
struct TimingStats {
  int64_t samples = 0;
  double median = 0.0, min = 0.0, max = 0.0, q1 = 0.0, q3 = 0.0, mean = 0.0;
};

// Throws when `seconds` is empty.
TimingStats summarize(std::vector<double> seconds);

// Runs `work` `warmup` times untimed, then `repeats` times timed.
TimingStats time_repeats(const std::function<void()>& work, int64_t warmup, int64_t repeats,
                         torch::Device device);

}  // namespace vlrnn::measure
