#include "vlrnn/baselines/checkpoint_bidirectional.h"

// Shape legend: T = time, S = segment length, n = steps in a segment, B = batch,
// I = a layer's input features, Zf / Zb = the directions' outputs, Z = Zf + Zb.

#include "vlrnn/baselines/checkpoint_function.h"
#include "vlrnn/methods/block.h"

namespace vlrnn {
namespace {

// One direction of one layer over all T steps, segment by segment through checkpoint():
// returns (z [T, B, Zf or Zb] with its graph, exit state).
std::pair<torch::Tensor, State> checkpointed_direction(const Workload& workload,
                                                       const Bidirectional& model, int64_t layer,
                                                       bool forward, const torch::Tensor& input,
                                                       const State& h0, int64_t length,
                                                       StepCounters& counters) {
  const int64_t steps = input.size(0);
  const int64_t segments = (steps + length - 1) / length;
  const size_t state_size = h0.size();
  // A reentrant checkpoint whose inputs need no grad returns outputs without a graph:
  // the entry state is made a leaf that requires grad (as CheckpointMethod does).
  std::vector<torch::Tensor> state;
  for (const auto& h : h0) state.push_back(h.requires_grad() ? h : h.detach().requires_grad_(true));
  std::vector<torch::Tensor> outputs(static_cast<size_t>(segments));
  for (int64_t k = 0; k < segments; ++k) {
    const int64_t s = forward ? k : segments - 1 - k;
    const int64_t t0 = s * length, n = std::min(length, steps - t0);
    const bool pass_input = input.requires_grad();
    auto args = state;  // (entry state..., [x [n, B, I]])
    if (pass_input) args.push_back(input.narrow(0, t0, n));
    auto segment = [&workload, &model, layer, forward, input, state_size, t0, n,
                    pass_input](const std::vector<torch::Tensor>& in) {
      State entry(std::vector<torch::Tensor>(in.begin(), in.begin() + long(state_size)));
      const auto x = pass_input ? in.back() : input.narrow(0, t0, n);
      const auto lengths = workload.batch.slice(t0, n).lengths;  // [B] valid in the segment
      const auto restarts =
          model.restarts(workload.batch.resets, workload.h0, layer, forward, t0, n);
      auto [z, exit] = forward ? model.run_forward_direction(layer, x, entry, lengths, restarts)
                               : model.run_backward_direction(layer, x, entry, lengths, restarts);
      std::vector<torch::Tensor> out{z};
      out.insert(out.end(), exit.begin(), exit.end());
      return out;
    };
    auto out = checkpoint(segment, args);
    outputs[size_t(s)] = out[0];
    state.assign(out.begin() + 1, out.end());
    counters.forward_no_grad += n;
    counters.forward_with_grad += n;  // the recomputation in backward
    counters.backward += n;
  }
  return {torch::cat(outputs, 0), State(state)};
}

}  // namespace

GradientResult checkpoint_bidirectional(const Workload& workload, const Bidirectional& model,
                                        int64_t segment_length) {
  const int64_t steps = workload.batch.time_steps(), batch = workload.batch.batch_size();
  StepCounters direction_steps;  // summed over every direction of every layer
  std::vector<std::pair<State, State>> finals;
  torch::Tensor input = workload.batch.inputs;  // [T, B, I]
  for (int64_t l = 0; l < model.num_layers(); ++l) {
    auto [h0_f, h0_b] = model.split_state(workload.h0, l);
    auto [zf, exit_f] = checkpointed_direction(workload, model, l, true, input, h0_f,
                                               segment_length, direction_steps);
    auto [zb, exit_b] = checkpointed_direction(workload, model, l, false, input, h0_b,
                                               segment_length, direction_steps);
    input = torch::cat({zf, zb}, -1);  // [T, B, Z]
    const auto masks = model.draw_dropout_masks(l, steps, batch, input.options());
    if (masks.defined()) input = input * masks;
    finals.emplace_back(std::move(exit_f), std::move(exit_b));
  }
  // NOTE [ Checkpointing both directions ]
  auto head = head_loss(workload, input, 0, steps);
  GradientResult result;
  result.loss = head.loss.detach();
  result.step_losses = head.step_losses;
  const State final_state = model.join_states(finals);
  // In steps of the whole model (both directions of every layer).
  const int64_t runs = 2 * model.num_layers();
  result.counters = {direction_steps.forward_with_grad / runs, direction_steps.forward_no_grad / runs,
                     direction_steps.backward / runs};
  result.final_state = final_state.detached();
  // NOTE [ Gradients across calls ]: both directions' final states take their seeds.
  backward_block(BlockForward{head.loss, head.step_losses, final_state}, workload.final_state_grad);
  return result;
}

}  // namespace vlrnn
