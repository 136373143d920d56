#include "vlrnn/core/heads.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vlrnn {

namespace F = torch::nn::functional;

LinearCrossEntropyHead::LinearCrossEntropyHead(int64_t input_size, int64_t num_classes,
                                               bool sparse_targets)
    : sparse_targets_(sparse_targets) {
  TORCH_CHECK(input_size > 0, "head input_size: expected > 0, got ", input_size);
  TORCH_CHECK(num_classes >= 2, "num_classes: expected >= 2, got ", num_classes);
  linear_ = register_module("linear", torch::nn::Linear(input_size, num_classes));
}

torch::Tensor LinearCrossEntropyHead::forward(const torch::Tensor& z_block,
                                              const torch::Tensor& y_block) {
  const int64_t steps = z_block.size(0), batch = z_block.size(1);
  auto logits = linear_->forward(z_block);  // [Tb, B, C]
  auto loss = F::cross_entropy(logits.reshape({steps * batch, num_classes()}),
                               y_block.reshape({steps * batch}),
                               F::CrossEntropyFuncOptions().reduction(torch::kNone)
                                   .ignore_index(kNoTarget));  // 0 loss, no gradient
  return loss.view({steps, batch});  // [Tb, B]
}

void LinearCrossEntropyHead::check_targets(const torch::Tensor& targets,
                                           const std::string& argument) const {
  TORCH_CHECK(targets.dim() == 2, argument,
              ": expected class indices of shape [T, B] (rank 2) for a cross-entropy head, got "
              "rank ", targets.dim(), " with shape ", targets.sizes());
  TORCH_CHECK(targets.scalar_type() == torch::kLong, argument,
              ": expected int64 class indices, got ", targets.scalar_type());
  if (targets.numel() > 0) {
    const auto lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
    const int64_t lowest = sparse_targets_ ? kNoTarget : 0;
    TORCH_CHECK(lo >= lowest && hi < num_classes(), argument, ": expected class indices in [0, ",
                num_classes(), ")", sparse_targets_ ? " or -1 (no target)" : "",
                ", got values in [", lo, ", ", hi, "]");
  }
}

LinearMseHead::LinearMseHead(int64_t input_size, int64_t num_outputs, bool sparse_targets)
    : sparse_targets_(sparse_targets) {
  TORCH_CHECK(input_size > 0, "head input_size: expected > 0, got ", input_size);
  TORCH_CHECK(num_outputs >= 1, "num_outputs: expected >= 1, got ", num_outputs);
  linear_ = register_module("linear", torch::nn::Linear(input_size, num_outputs));
}

torch::Tensor LinearMseHead::forward(const torch::Tensor& z_block, const torch::Tensor& y_block) {
  auto prediction = linear_->forward(z_block);  // [Tb, B, O]
  if (!sparse_targets_) return (prediction - y_block).pow(2).mean(-1);  // [Tb, B]
  // NOTE [ Steps without a target ] (heads.h). NaN is replaced before the subtraction: a
  // NaN there would reach the gradient as 0 * NaN even through a mask.
  auto present = ~torch::isnan(y_block);                                // [Tb, B, O]
  auto target = torch::where(present, y_block, torch::zeros_like(y_block));
  return ((prediction - target).pow(2) * present).mean(-1);            // [Tb, B]
}

void LinearMseHead::check_targets(const torch::Tensor& targets,
                                  const std::string& argument) const {
  TORCH_CHECK(targets.dim() == 3 && targets.size(2) == num_outputs(), argument,
              ": expected regression targets of shape [T, B, ", num_outputs(),
              "] for an MSE head, got shape ", targets.sizes());
  TORCH_CHECK(targets.is_floating_point(), argument,
              ": expected floating-point regression targets, got ", targets.scalar_type());
  TORCH_CHECK(sparse_targets_ || targets.numel() == 0 || !torch::isnan(targets).any().item<bool>(),
              argument, ": NaN in regression targets (a head built with sparse_targets reads "
              "NaN as 'no target at this step'; this one was not)");
}

std::vector<std::string> head_kinds() { return {"ce", "mse"}; }

std::shared_ptr<OutputModule> make_head(const std::string& kind, int64_t input_size,
                                        int64_t outputs, bool sparse_targets) {
  if (kind == "ce") {
    return std::make_shared<LinearCrossEntropyHead>(input_size, outputs, sparse_targets);
  }
  if (kind == "mse") return std::make_shared<LinearMseHead>(input_size, outputs, sparse_targets);
  TORCH_CHECK(false, "head: unknown kind \"", kind, "\"; known kinds: ",
              fmt::format("{}", fmt::join(head_kinds(), ", ")));
}

torch::Tensor random_targets(const OutputModule& head, int64_t time_steps, int64_t batch,
                             const torch::TensorOptions& float_options) {
  if (auto ce = dynamic_cast<const LinearCrossEntropyHead*>(&head)) {
    return torch::randint(0, ce->num_classes(), {time_steps, batch},
                          float_options.dtype(torch::kLong));
  }
  if (auto mse = dynamic_cast<const LinearMseHead*>(&head)) {
    return torch::randn({time_steps, batch, mse->num_outputs()}, float_options);
  }
  TORCH_CHECK(false, "random_targets: only the built-in heads (ce, mse) are supported");
}

}  // namespace vlrnn
