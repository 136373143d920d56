#include "vlrnn/core/loss.h"

namespace vlrnn {

std::string to_string(Reduction reduction) {
  return reduction == Reduction::kSum ? "sum" : "mean";
}

Reduction reduction_from_string(const std::string& name) {
  if (name == "sum") return Reduction::kSum;
  if (name == "mean") return Reduction::kMean;
  TORCH_CHECK(false, "reduction: expected \"sum\" or \"mean\", got \"", name, "\"");
}

torch::Tensor step_weights(Reduction reduction, int64_t t0, int64_t n, int64_t total_steps,
                           int64_t batch, const torch::Tensor& lengths,
                           const torch::TensorOptions& options) {
  if (!lengths.defined()) {
    const double w = reduction == Reduction::kSum ? 1.0 : 1.0 / double(total_steps * batch);
    return torch::full({n, batch}, w, options);  // [n, B]
  }
  auto lens = lengths.to(options.device(), torch::kLong);                         // [B]
  auto steps = torch::arange(t0, t0 + n, options.dtype(torch::kLong)).unsqueeze(1);  // [n, 1]
  auto valid = (steps < lens.unsqueeze(0)).to(options.dtype());                   // [n, B]
  if (reduction == Reduction::kSum) return valid;
  auto per_sequence = 1.0 / (lens.to(options.dtype()) * double(batch));            // [B]
  return valid * per_sequence.unsqueeze(0);
}

}  // namespace vlrnn
