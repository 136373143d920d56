#include "vlrnn/methods/vlrnn_method.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/methods/block.h"

#include <cmath>

namespace vlrnn {

VlrnnMethod::VlrnnMethod(VlrnnOptions options) : options_(options) {
  TORCH_CHECK(options.block_length >= 0,
              "vlrnn block_length (K): expected a positive number of steps, got ",
              options.block_length);
  TORCH_CHECK(options.num_blocks >= 0, "vlrnn num_blocks (N): expected a positive count, got ",
              options.num_blocks);
  TORCH_CHECK(!(options.block_length > 0 && options.num_blocks > 0),
              "vlrnn: give block_length (K) or num_blocks (N), not both (got K = ",
              options.block_length, ", N = ", options.num_blocks, ")");
}

std::string VlrnnMethod::describe() const {
  if (options_.block_length > 0) return "vlrnn(K=" + std::to_string(options_.block_length) + ")";
  if (options_.num_blocks > 0) return "vlrnn(N=" + std::to_string(options_.num_blocks) + ")";
  return "vlrnn(K=sqrt(T))";
}

int64_t VlrnnMethod::block_length_for(int64_t time_steps) const {
  if (options_.block_length > 0) return std::min(options_.block_length, time_steps);
  if (options_.num_blocks > 0) {
    return (time_steps + options_.num_blocks - 1) / options_.num_blocks;
  }
  return sqrt_steps(time_steps);
}

GradientResult VlrnnMethod::compute_impl(const Workload& workload) {
  const auto& inputs = workload.batch.inputs;  // [T, B, F]
  const int64_t steps = workload.batch.time_steps();
  const int64_t block_length = block_length_for(steps);              // K
  const int64_t num_blocks = (steps + block_length - 1) / block_length;  // N
  GradientResult result;

  // Pass 1, without grad: the entry state (and generator state) of every block. The last
  // block is skipped: the backward pass starts there and runs it with grad anyway.
  std::vector<State> entries(num_blocks);
  std::vector<RngState> entry_rng(num_blocks);  // NOTE [ RNG across the no-grad pass ]
  entries[0] = workload.h0;
  entry_rng[0] = RngState::capture(inputs.device());
  for (int64_t b = 1; b < num_blocks; ++b) {
    entries[b] = advance_without_grad(workload, (b - 1) * block_length, block_length,
                                      entries[b - 1]);
    entry_rng[b] = RngState::capture(inputs.device());
    result.counters.forward_without_grad += block_length;
  }
  RngState after_forward;  // where one forward pass leaves the generators

  // Pass 2, last block to first: re-run the block with grad from its stored entry, then
  // back-propagate from its loss and its exit state (seeded with δh) in one call.
  const bool want_input_grad = inputs.requires_grad();
  torch::Tensor input_grad;  // [T, B, F]
  if (want_input_grad) input_grad = torch::zeros_like(inputs, torch::MemoryFormat::Contiguous);
  result.step_losses = torch::zeros({steps, workload.batch.batch_size()}, inputs.options()
                                        .requires_grad(false));
  auto loss = torch::zeros({}, inputs.options().requires_grad(false));
  State exit_grad;  // δh at the exit of the block being processed; empty for the last
  for (int64_t b = num_blocks - 1; b >= 0; --b) {
    const int64_t t0 = b * block_length;
    const int64_t n = std::min(block_length, steps - t0);
    // The first block starts from the caller's h0 so its gradient lands where autograd
    // would put it; later blocks start from detached leaves whose .grad() is δh.
    const State entry = b == 0 ? workload.h0 : entries[b].detached_leaves();
    auto block_inputs = inputs.narrow(0, t0, n);  // [n, B, F]
    if (want_input_grad) block_inputs = block_inputs.detach().requires_grad_(true);

    entry_rng[b].restore();
    const BlockForward block = forward_block(workload, block_inputs, t0, n, entry);
    result.counters.forward_with_grad += n;
    if (b == num_blocks - 1) {
      result.final_state = block.exit.detached();
      after_forward = RngState::capture(inputs.device());
    }
    loss += block.loss.detach();
    result.step_losses.narrow(0, t0, n).copy_(block.step_losses);

    backward_block(block, exit_grad);
    result.counters.backward += n;

    if (b > 0) {
      std::vector<torch::Tensor> entry_grads;  // δh at this block's entry
      for (const auto& h : entry) entry_grads.push_back(h.grad());
      exit_grad = State(std::move(entry_grads));
    }
    if (want_input_grad) input_grad.narrow(0, t0, n).copy_(block_inputs.grad());
    entries[b] = State();  // this block's stored state is no longer needed
  }
  after_forward.restore();
  if (want_input_grad) accumulate_input_grad(inputs, input_grad);
  result.loss = loss;
  return result;
}

}  // namespace vlrnn
