#pragma once
// Built-in per-step heads: a Linear layer and a per-step loss.
// Shapes: z_block [Tb, B, Z] -> logits / predictions [Tb, B, C or O] -> loss [Tb, B].

#include "vlrnn/core/output_module.h"

#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

// NOTE [ Steps without a target ]: sparse supervision (the adding problem scores the last
// step only, a copy task its recall steps) marks the other steps as having no target: class
// index kNoTarget for a cross-entropy head, NaN for an MSE head. Their loss is 0 and they pass
// no gradient. A head accepts the markers only when built with `sparse_targets`, so that a
// stray -1 or NaN in ordinary data is still an error, not a silently unscored step.
constexpr int64_t kNoTarget = -1;

// Linear + cross-entropy; targets [T, B] int64 class indices in [0, C) (or kNoTarget when
// built with sparse_targets).
class LinearCrossEntropyHead : public OutputModule {
 public:
  LinearCrossEntropyHead(int64_t input_size, int64_t num_classes, bool sparse_targets = false);
  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return linear_->options.in_features(); }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override;
  int64_t num_classes() const { return linear_->options.out_features(); }

 private:
  torch::nn::Linear linear_{nullptr};
  bool sparse_targets_;
};

// Linear + squared error averaged over the O outputs of a step; targets [T, B, O] floating
// (NaN where a step has no target, when built with sparse_targets).
class LinearMseHead : public OutputModule {
 public:
  LinearMseHead(int64_t input_size, int64_t num_outputs, bool sparse_targets = false);
  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return linear_->options.in_features(); }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override;
  int64_t num_outputs() const { return linear_->options.out_features(); }

 private:
  torch::nn::Linear linear_{nullptr};
  bool sparse_targets_;
};

std::vector<std::string> head_kinds();  // "ce", "mse"
std::shared_ptr<OutputModule> make_head(const std::string& kind, int64_t input_size,
                                        int64_t outputs, bool sparse_targets = false);

// Random targets suited to `head` for a batch of T steps and B sequences.
torch::Tensor random_targets(const OutputModule& head, int64_t time_steps, int64_t batch,
                             const torch::TensorOptions& float_options);

}  // namespace vlrnn
