#include "vlrnn/measure/peak_gemm.h"

namespace vlrnn::measure {

PeakGemm measure_peak_gemm(torch::Device device, torch::ScalarType dtype, int64_t n,
                           int64_t repeats, int64_t warmup) {
  TORCH_CHECK(n >= 1, "measure_peak_gemm n: expected a matrix size >= 1, got ", n);
  TORCH_CHECK(dtype == torch::kFloat32 || dtype == torch::kFloat64 || dtype == torch::kFloat16 ||
                  dtype == torch::kBFloat16,
              "measure_peak_gemm dtype: expected a floating-point type, got ", dtype);
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  auto a = torch::randn({n, n}, options);    // [n, n]
  auto b = torch::randn({n, n}, options);    // [n, n]
  auto c = torch::empty({n, n}, options);    // [n, n], reused: the allocator stays out of it
  PeakGemm out;
  out.n = n;
  out.dtype = dtype;
  out.device = device;
  out.threads = at::get_num_threads();
  out.time = time_repeats([&] { torch::mm_out(c, a, b); }, warmup, repeats, device);
  out.flops_per_second = 2.0 * double(n) * double(n) * double(n) / out.time.median;
  return out;
}

}  // namespace vlrnn::measure
