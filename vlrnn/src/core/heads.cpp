#include "vlrnn/core/heads.h"

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
  this->targets()->check(targets, sparse_targets_, argument, "a cross-entropy head");
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
  this->targets()->check(targets, sparse_targets_, argument, "an MSE head");
}

torch::Tensor random_targets(const OutputModule& head, int64_t time_steps, int64_t batch,
                             const torch::TensorOptions& float_options) {
  const auto targets = head.targets();
  TORCH_CHECK(targets, "random_targets: the head does not say which targets it reads (expected "
              "OutputModule::targets() to give class indices or values, found none)");
  return targets->random(time_steps, batch, float_options);
}

}  // namespace vlrnn
