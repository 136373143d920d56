#pragma once
// The peak matrix-multiply rate of a device, measured by the tool itself: utilization is
// useful FLOP/s over this rate. Shapes: A [n, n] x B [n, n] -> C [n, n], 2·n³ FLOPs.

#include "vlrnn/measure/timer.h"

#include <torch/torch.h>

namespace vlrnn::measure {

struct PeakGemm {
  int64_t n = 0;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  int64_t threads = 0;        // at::get_num_threads() while it ran
  TimingStats time;           // seconds per GEMM
  double flops_per_second = 0.0;  // 2·n³ / median time
};

// Runs a square GEMM `warmup` + `repeats` times into a preallocated output.
PeakGemm measure_peak_gemm(torch::Device device, torch::ScalarType dtype = torch::kFloat32,
                           int64_t n = 1024, int64_t repeats = 10, int64_t warmup = 2);

}  // namespace vlrnn::measure
