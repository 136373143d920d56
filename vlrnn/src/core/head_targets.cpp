#include "vlrnn/core/head_targets.h"

#include <fmt/format.h>

namespace vlrnn {

std::string HeadTargets::describe() const {
  if (kind == Kind::kClasses) return fmt::format("class indices [T, B] int64 in [0, {})", size);
  return fmt::format("values [T, B, {}] (floating)", size);
}

void HeadTargets::check(const torch::Tensor& targets, bool sparse, const std::string& argument,
                        const std::string& head) const {
  if (kind == Kind::kClasses) {
    TORCH_CHECK(targets.dim() == 2, argument, ": expected class indices of shape [T, B] (rank 2) "
                "for ", head, ", got rank ", targets.dim(), " with shape ", targets.sizes());
    TORCH_CHECK(targets.scalar_type() == torch::kLong, argument,
                ": expected int64 class indices, got ", targets.scalar_type());
    if (targets.numel() > 0) {
      const auto lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
      const int64_t lowest = sparse ? kNoTarget : 0;
      TORCH_CHECK(lo >= lowest && hi < size, argument, ": expected class indices in [0, ", size,
                  ")", sparse ? " or -1 (no target)" : "", ", got values in [", lo, ", ", hi, "]");
    }
    return;
  }
  TORCH_CHECK(targets.dim() == 3 && targets.size(2) == size, argument,
              ": expected regression targets of shape [T, B, ", size, "] for ", head,
              ", got shape ", targets.sizes());
  TORCH_CHECK(targets.is_floating_point(), argument,
              ": expected floating-point regression targets, got ", targets.scalar_type());
  TORCH_CHECK(sparse || targets.numel() == 0 || !torch::isnan(targets).any().item<bool>(),
              argument, ": NaN in regression targets (a head built with sparse_targets reads "
              "NaN as 'no target at this step'; this one was not)");
}

torch::Tensor HeadTargets::random(int64_t time_steps, int64_t batch,
                                  const torch::TensorOptions& float_options) const {
  if (kind == Kind::kClasses) {
    return torch::randint(0, size, {time_steps, batch}, float_options.dtype(torch::kLong));
  }
  return torch::randn({time_steps, batch, size}, float_options);
}

}  // namespace vlrnn
