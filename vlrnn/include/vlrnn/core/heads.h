#pragma once
// Built-in per-step heads: a Linear layer and a per-step loss.
// Shapes: z_block [Tb, B, Z] -> logits / predictions [Tb, B, C or O] -> loss [Tb, B].

#include "vlrnn/core/output_module.h"

#include <string>

namespace vlrnn {

// kNoTarget and NOTE [ Steps without a target ]: vlrnn/core/head_targets.h.

// Linear + cross-entropy; targets [T, B] int64 class indices in [0, C) (or kNoTarget when
// built with sparse_targets).
class LinearCrossEntropyHead : public OutputModule {
 public:
  LinearCrossEntropyHead(int64_t input_size, int64_t num_classes, bool sparse_targets = false);
  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return linear_->options.in_features(); }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override;
  int64_t num_classes() const { return linear_->options.out_features(); }
  std::optional<HeadTargets> targets() const override {
    return HeadTargets{HeadTargets::Kind::kClasses, num_classes()};
  }

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
  std::optional<HeadTargets> targets() const override {
    return HeadTargets{HeadTargets::Kind::kValues, num_outputs()};
  }

 private:
  torch::nn::Linear linear_{nullptr};
  bool sparse_targets_;
};

// Heads by name (make_head, add_head, head_kinds): vlrnn/registry/heads.h.

// Random targets suited to `head` for a batch of T steps and B sequences (its targets());
// throws for a head that does not say which it reads.
torch::Tensor random_targets(const OutputModule& head, int64_t time_steps, int64_t batch,
                             const torch::TensorOptions& float_options);

}  // namespace vlrnn
