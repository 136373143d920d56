#pragma once
// A per-step head and loss written in Python and saved with TorchScript, wrapped as an
// OutputModule: the loss the user cares about (an MLP and its own likelihood, say) is the
// one every gradient method differentiates and the verifier checks. Shapes: T = block
// steps, B = batch, Z = the model's output features.
//
// NOTE [ The TorchScript head signature ]
// The saved module (torch.jit.script(head).save(path); scripts/export_head.py) must have:
//   self.input_size: int      Z: the model's output features
//   and exactly one of        which targets it reads (NOTE [ Head targets ]):
//   self.num_classes: int       y [T, B] int64 class indices in [0, C)
//   self.target_size: int       y [T, B, O] values in z's dtype
//   def forward(self, z: Tensor, y: Tensor) -> Tensor   the loss [T, B], not reduced
// loss[t, b] reads z[t, b] and y[t, b] alone; the engine reduces it as for the built-in
// heads. On padded steps z and y are zero (NOTE [ Padded steps ]): the loss must be finite
// there, and it is weighted by zero. A step without a target (NOTE [ Steps without a
// target ]) reaches the script as 0 and its loss is set to 0 after the call, so the script
// never sees -1 or NaN. Its parameters are this module's own tensors. See docs/models.md.

#include "vlrnn/core/output_module.h"

#include <torch/script.h>

#include <memory>
#include <string>

namespace vlrnn {

class ScriptHead : public OutputModule {
 public:
  // Loads `path` with torch::jit::load and checks it (wrap()); throws naming the file.
  static std::shared_ptr<ScriptHead> load(const std::string& path, bool sparse_targets = false);
  // Checks the signature above with a tiny probe call (3 steps, 2 sequences) and throws
  // naming `origin` and what was expected and what was found: a missing method or
  // attribute, none or both of num_classes / target_size, the wrong arity, a loss of the
  // wrong shape or not floating, a loss that mixes steps or sequences (a reduced one), a
  // loss that is not finite on padded steps.
  static std::shared_ptr<ScriptHead> wrap(torch::jit::Module module, const std::string& origin,
                                          bool sparse_targets = false);

  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return input_size_; }
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override;
  std::optional<HeadTargets> targets() const override { return targets_; }
  void train(bool on = true) override;

  const torch::jit::Module& script() const { return module_; }

 private:
  ScriptHead(torch::jit::Module module, std::string origin, bool sparse_targets);
  void check_signature();  // forward's arity, input_size, the target attribute
  void probe_forward();    // one call: the loss's shape, per-step, finite on padding

  torch::jit::Module module_;
  std::string origin_;  // the file, or what the module came from, for messages
  bool sparse_targets_;
  int64_t input_size_ = 0;
  HeadTargets targets_;
};

}  // namespace vlrnn
