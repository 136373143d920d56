#include "vlrnn/baselines/checkpoint_function.h"

#include "vlrnn/core/rng.h"

namespace vlrnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the backward pass needs besides the saved inputs; held by the autograd context.
struct CheckpointClosure : torch::CustomClassHolder {
  CheckpointFunction fn;
  std::vector<bool> input_requires_grad;
  RngState rng;  // generators at the segment's start (empty without preserve_rng_state)
};

struct CheckpointSegment : torch::autograd::Function<CheckpointSegment> {
  // Runs under autograd's no-grad mode (Function::apply disables it around forward).
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<CheckpointClosure> closure,
                               torch::TensorList inputs) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["closure"] = c10::IValue::make_capsule(closure);
    return closure->fn(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto closure = c10::static_intrusive_pointer_cast<CheckpointClosure>(
        ctx->saved_data["closure"].toCapsule());
    const auto saved = ctx->get_saved_variables();

    // Fresh leaves: the recomputed graph ends here, and their .grad() is what we return.
    std::vector<torch::Tensor> leaves;
    for (size_t i = 0; i < saved.size(); ++i) {
      leaves.push_back(saved[i].detach().requires_grad_(closure->input_requires_grad[i]));
    }
    RngState during_backward;
    if (closure->rng.captured()) {
      during_backward = RngState::capture(leaves.empty() ? torch::Device(torch::kCPU)
                                                         : leaves.front().device());
      closure->rng.restore();
    }
    variable_list outputs;
    {
      torch::AutoGradMode enable_grad(true);
      outputs = closure->fn(leaves);
    }
    if (during_backward.captured()) during_backward.restore();

    variable_list roots, seeds;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].requires_grad() && grad_outputs[i].defined()) {
        roots.push_back(outputs[i]);
        seeds.push_back(grad_outputs[i]);
      }
    }
    if (!roots.empty()) torch::autograd::backward(roots, seeds);

    variable_list grads{torch::Tensor()};  // none for the closure argument
    for (const auto& leaf : leaves) {
      grads.push_back(leaf.requires_grad() ? leaf.grad() : torch::Tensor());
    }
    return grads;
  }
};

}  // namespace

std::vector<torch::Tensor> checkpoint(CheckpointFunction fn,
                                      const std::vector<torch::Tensor>& inputs,
                                      bool preserve_rng_state) {
  TORCH_CHECK(fn, "checkpoint: expected a function, got an empty one");
  auto closure = c10::make_intrusive<CheckpointClosure>();
  closure->fn = std::move(fn);
  for (const auto& input : inputs) {
    TORCH_CHECK(input.defined(), "checkpoint: inputs must be defined tensors");
    closure->input_requires_grad.push_back(input.requires_grad());
  }
  if (preserve_rng_state) {
    closure->rng =
        RngState::capture(inputs.empty() ? torch::Device(torch::kCPU) : inputs.front().device());
  }
  return CheckpointSegment::apply(closure, torch::TensorList(inputs));
}

}  // namespace vlrnn
