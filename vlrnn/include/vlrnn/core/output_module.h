#pragma once
// The per-step head: maps the recurrent model's outputs and the targets of a block to one
// loss per step and sequence. Shapes: z_block [Tb, B, Z], y_block [Tb, B(, O)] -> [Tb, B].

#include "vlrnn/core/head_targets.h"

#include <torch/torch.h>

#include <optional>
#include <string>

namespace vlrnn {

class OutputModule : public torch::nn::Module {
 public:
  // Per-step losses [Tb, B]; steps beyond a sequence's length may hold any finite value
  // (the gradient methods weight them by zero).
  virtual torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) = 0;

  virtual int64_t input_size() const = 0;  // Z
  // Throws naming `argument` when `targets` [T, B(, O)] do not suit this head.
  virtual void check_targets(const torch::Tensor& targets, const std::string& argument) const = 0;
  // The targets it reads (NOTE [ Head targets ]): what verify, compare and sweeps draw for it
  // and what train checks a task against. None: a head that does not say (it can still be
  // trained and verified on data you give it).
  virtual std::optional<HeadTargets> targets() const { return std::nullopt; }
};

}  // namespace vlrnn
