#pragma once
// Built-in per-step heads: a Linear layer and a per-step loss.
// Shapes: z_block [Tb, B, Z] -> logits / predictions [Tb, B, C or O] -> loss [Tb, B].

#include "vlrnn/core/output_module.h"

#include <memory>
#include <string>
#include <vector>

namespace vlrnn {

// Linear + cross-entropy; targets [T, B] int64 class indices in [0, C).
class LinearCrossEntropyHead : public OutputModule {
 public:
  LinearCrossEntropyHead(int64_t input_size, int64_t num_classes);
  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return linear_->options.in_features(); }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override;
  int64_t num_classes() const { return linear_->options.out_features(); }

 private:
  torch::nn::Linear linear_{nullptr};
};

// Linear + squared error averaged over the O outputs of a step; targets [T, B, O] floating.
class LinearMseHead : public OutputModule {
 public:
  LinearMseHead(int64_t input_size, int64_t num_outputs);
  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return linear_->options.in_features(); }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override;
  int64_t num_outputs() const { return linear_->options.out_features(); }

 private:
  torch::nn::Linear linear_{nullptr};
};

std::vector<std::string> head_kinds();  // "ce", "mse"
std::shared_ptr<OutputModule> make_head(const std::string& kind, int64_t input_size,
                                        int64_t outputs);

// Random targets suited to `head` for a batch of T steps and B sequences.
torch::Tensor random_targets(const OutputModule& head, int64_t time_steps, int64_t batch,
                             const torch::TensorOptions& float_options);

}  // namespace vlrnn
