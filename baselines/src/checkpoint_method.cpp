#include "vlrnn/baselines/checkpoint_method.h"

#include "vlrnn/baselines/checkpoint_bidirectional.h"
#include "vlrnn/baselines/checkpoint_function.h"
#include "vlrnn/methods/block.h"

#include <cmath>

namespace vlrnn {

CheckpointMethod::CheckpointMethod(CheckpointOptions options) : options_(options) {
  TORCH_CHECK(options.segments >= 0,
              "checkpoint segments: expected a positive number of segments, got ",
              options.segments);
}

std::string CheckpointMethod::describe() const {
  const std::string segments =
      options_.segments > 0 ? "S=" + std::to_string(options_.segments) : "S=sqrt(T)";
  return "checkpoint(" + segments + (options_.head_inside ? ",head inside)" : ",head outside)");
}

int64_t CheckpointMethod::segments_for(int64_t time_steps) const {
  if (options_.segments > 0) return std::min(options_.segments, time_steps);
  return sqrt_steps(time_steps);
}

GradientResult CheckpointMethod::compute_impl(const Workload& workload) {
  const auto& inputs = workload.batch.inputs;  // [T, B, F]
  const int64_t steps = workload.batch.time_steps();
  const int64_t length = (steps + segments_for(steps) - 1) / segments_for(steps);  // steps per segment
  const int64_t num_segments = (steps + length - 1) / length;
  if (const auto* bidirectional = as_bidirectional(workload.model)) {
    return checkpoint_bidirectional(workload, *bidirectional, length);  // head outside, always
  }
  const size_t state_size = workload.h0.size();
  const bool head_inside = options_.head_inside;

  GradientResult result;
  result.step_losses = torch::zeros({steps, workload.batch.batch_size()},
                                    inputs.options().requires_grad(false));
  // The entry state of the first segment: the caller's h0 when it requires grad (its
  // gradient flows back through the checkpoint), otherwise a detached leaf that requires
  // grad, because a reentrant checkpoint whose inputs need no grad produces outputs without
  // a graph and the parameters would get no gradient.
  std::vector<torch::Tensor> state;
  for (const auto& h : workload.h0) {
    state.push_back(h.requires_grad() ? h : h.detach().requires_grad_(true));
  }
  torch::Tensor loss;
  for (int64_t s = 0; s < num_segments; ++s) {
    const int64_t t0 = s * length;
    const int64_t n = std::min(length, steps - t0);
    const bool pass_inputs = inputs.requires_grad();
    auto segment_inputs = state;  // (h..., [x [n, B, F] when dL/dx is wanted])
    if (pass_inputs) segment_inputs.push_back(inputs.narrow(0, t0, n));

    // The segment: (entry state..., [x]) -> ([loss or z], exit state...).
    auto segment = [&workload, &result, t0, n, state_size, head_inside,
                    pass_inputs](const std::vector<torch::Tensor>& args) {
      State entry(std::vector<torch::Tensor>(args.begin(), args.begin() + state_size));
      const auto x = pass_inputs ? args.back() : workload.batch.inputs.narrow(0, t0, n);
      std::vector<torch::Tensor> out;
      if (head_inside) {
        auto block = forward_block(workload, x, t0, n, entry);
        result.step_losses.narrow(0, t0, n).copy_(block.step_losses);
        out.push_back(block.loss);
        out.insert(out.end(), block.exit.begin(), block.exit.end());
      } else {
        auto [z, exit] = run_model(workload, x, t0, n, entry);
        out.push_back(z);
        out.insert(out.end(), exit.begin(), exit.end());
      }
      return out;
    };
    auto outputs = checkpoint(segment, segment_inputs);
    result.counters.forward_no_grad += n;
    result.counters.forward_with_grad += n;  // the recomputation in backward
    result.counters.backward += n;

    torch::Tensor segment_loss = outputs[0];
    if (!head_inside) {
      auto head = head_loss(workload, outputs[0], t0, n);
      result.step_losses.narrow(0, t0, n).copy_(head.step_losses);
      segment_loss = head.loss;
    }
    loss = loss.defined() ? loss + segment_loss : segment_loss;
    state.assign(outputs.begin() + 1, outputs.end());
  }
  result.final_state = State(state).detached();
  result.loss = loss.detach();
  // One backward from the loss and the final state (NOTE [ Gradients across calls ]).
  backward_block(BlockForward{loss, result.step_losses, State(state)}, workload.final_state_grad);
  return result;
}

}  // namespace vlrnn
