#pragma once
// Which targets a per-step head reads, so that data can be drawn for it (verify, compare,
// sweeps) and a task's targets checked against it (train) before anything runs.
//
// NOTE [ Head targets ]: two kinds, the two that the built-in problems and tasks produce:
//   classes  y [T, B] int64 class indices in [0, C)     (the "ce" head; C = size)
//   values   y [T, B, O] floating, the batch's dtype     (the "mse" head; O = size)
// A TorchScript head declares its kind by its attribute (num_classes or target_size,
// script_head.h); a head of your own in C++ overrides OutputModule::targets().

#include <torch/torch.h>

#include <string>

namespace vlrnn {

// NOTE [ Steps without a target ]: sparse supervision (the adding problem scores the last
// step only, a copy task its recall steps) marks the other steps as having no target: class
// index kNoTarget for a cross-entropy head, NaN for an MSE head. Their loss is 0 and they pass
// no gradient. A head accepts the markers only when built with `sparse_targets`, so that a
// stray -1 or NaN in ordinary data is still an error, not a silently unscored step.
constexpr int64_t kNoTarget = -1;

struct HeadTargets {
  enum class Kind { kClasses, kValues };
  Kind kind = Kind::kClasses;
  int64_t size = 2;  // C classes, or O values per step

  // "class indices [T, B] int64 in [0, 3)" / "values [T, B, 2] (floating)"
  std::string describe() const;
  bool operator==(const HeadTargets& other) const {
    return kind == other.kind && size == other.size;
  }

  // Throws naming `argument` and `head` (e.g. "a cross-entropy head") when `targets` are
  // not of this kind and size. With `sparse`, the markers of a step without a target pass
  // (kNoTarget for classes, NaN for values: NOTE [ Steps without a target ]).
  void check(const torch::Tensor& targets, bool sparse, const std::string& argument,
             const std::string& head) const;
  // Random targets of this kind for T steps of B sequences; values in `float_options`.
  torch::Tensor random(int64_t time_steps, int64_t batch,
                       const torch::TensorOptions& float_options) const;
};

}  // namespace vlrnn
