#include "vlrnn/core/padding.h"

// Shape legend: n = steps in the range, B = batch.

namespace vlrnn {

torch::Tensor zero_padding(const torch::Tensor& x, const torch::Tensor& lengths) {
  if (!lengths.defined()) return x;
  const int64_t n = x.size(0);
  auto valid_cpu = lengths.to(torch::kCPU, torch::kLong);  // [B]
  if (valid_cpu.min().item<int64_t>() >= n) return x;
  auto valid = torch::arange(n, valid_cpu.options()).unsqueeze(1) < valid_cpu.unsqueeze(0);  // [n, B]
  for (int64_t d = 2; d < x.dim(); ++d) valid = valid.unsqueeze(-1);
  return torch::where(valid.to(x.device()), x, torch::zeros({}, x.options().requires_grad(false)));
}

}  // namespace vlrnn
