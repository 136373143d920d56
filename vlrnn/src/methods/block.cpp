#include "vlrnn/methods/block.h"

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/core/padding.h"
#include "vlrnn/core/resets.h"

#include <c10/util/accumulate.h>

#include <cmath>

#include <unistd.h>

namespace vlrnn {

int64_t sqrt_steps(int64_t time_steps) {
  return std::max<int64_t>(1, int64_t(std::ceil(std::sqrt(double(time_steps)))));
}

int64_t cache_fitting_block_length(int64_t time_steps, int64_t state_bytes_per_step,
                                   int64_t cache_bytes) {
  const int64_t longest = sqrt_steps(time_steps);
  if (cache_bytes <= 0 || state_bytes_per_step <= 0) return longest;
  const int64_t shortest = (longest + 3) / 4;
  const int64_t fitting = cache_bytes / state_bytes_per_step;
  return std::min(longest, std::max(shortest, fitting));
}

int64_t l2_cache_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
  return std::max<int64_t>(0, int64_t(sysconf(_SC_LEVEL2_CACHE_SIZE)));
#else
  return 0;
#endif
}

int64_t default_block_length(const Workload& workload) {
  const auto& inputs = workload.batch.inputs;
  const int64_t T = workload.batch.time_steps();
  if (!inputs.device().is_cpu()) return sqrt_steps(T);
  int64_t state_elements = 0;
  for (const auto& spec : workload.model.state_spec()) {
    state_elements += c10::multiply_integers(spec.shape_for_batch(workload.batch.batch_size()));
  }
  const int64_t state_bytes = state_elements * int64_t(inputs.element_size());
  static const int64_t cache = l2_cache_bytes();
  return cache_fitting_block_length(T, state_bytes, cache);
}

HeadLoss head_loss(const Workload& workload, const torch::Tensor& z, int64_t t0, int64_t n) {
  const auto& batch = workload.batch;
  auto losses = workload.head.forward(z, batch.targets.narrow(0, t0, n));  // [n, B]
  auto weights = step_weights(workload.reduction, t0, n, batch.time_steps(), batch.batch_size(),
                              batch.lengths, losses.options());            // [n, B]
  if (batch.has_lengths()) {
    // NOTE [ Padded steps ]: past a sequence's end the head saw zero targets (validated()
    // replaced the padding) and the model emitted zeros; select those losses away rather
    // than trusting a zero weight, so the loss never sees them.
    losses = torch::where(weights > 0, losses, torch::zeros_like(losses));
  }
  auto loss = (weights * losses).sum();
  if (workload.loss_scale != 1.0 && loss.requires_grad()) {
    // NOTE [ Loss scale ] (gradient_method.h): whatever seeds this loss arrives scaled.
    const double scale = workload.loss_scale;
    loss.register_hook([scale](const torch::Tensor& grad) { return grad * scale; });
  }
  return {std::move(loss), losses.detach()};
}

namespace {

// The model on steps [t0, t0 + n) from `entry`, with no reset inside.
std::pair<torch::Tensor, State> run_unbroken(const Workload& workload, const torch::Tensor& inputs,
                                             int64_t t0, int64_t n, const State& entry) {
  const auto lengths = workload.batch.slice(t0, n).lengths;  // [B] valid steps in the block
  // NOTE [ Padding never reaches the model ]
  return workload.model.forward(workload.model.reads_padding() ? zero_padding(inputs, lengths)
                                                               : inputs,
                                entry, lengths);
}

}  // namespace

std::pair<torch::Tensor, State> run_model(const Workload& workload, const torch::Tensor& inputs,
                                          int64_t t0, int64_t n, const State& entry) {
  const int64_t steps = workload.batch.time_steps();
  if (as_bidirectional(workload.model) && (t0 != 0 || n != steps)) {
    // NOTE [ A bidirectional model is not left to right ] (vlrnn/core/bidirectional.h)
    TORCH_CHECK(false, "model: a bidirectional model's output at a step depends on the whole "
                "sequence, so it cannot run steps [", t0, ", ", t0 + n, ") of T = ", steps,
                " on their own, as a method that cuts the sequence into blocks needs; use a "
                "method that handles bidirectional models: full, checkpoint, bivlrnn or planner");
  }
  if (!workload.batch.has_resets()) return run_unbroken(workload, inputs, t0, n, entry);
  if (const auto* bidirectional = as_bidirectional(workload.model)) {
    // The whole sequence from h0: each direction restarts, the backward one at each
    // segment's end (Bidirectional::restarts()).
    return bidirectional->run(inputs, entry, workload.batch.lengths, workload.batch.resets);
  }
  // NOTE [ Resets ]: the block runs in pieces cut at the steps where any sequence restarts.
  const Restarts restarts{workload.batch.resets.narrow(0, t0, n), workload.h0};
  return run_with_restarts(n, restarts, workload.model.state_spec(), entry,
                           [&](int64_t a, int64_t m, const State& from) {
                             return run_unbroken(workload, inputs.narrow(0, a, m), t0 + a, m, from);
                           });
}

BlockForward forward_block(const Workload& workload, const torch::Tensor& inputs, int64_t t0,
                           int64_t n, const State& entry) {
  auto [z, exit] = run_model(workload, inputs, t0, n, entry);  // z [n, B, Z]
  auto [loss, step_losses] = head_loss(workload, z, t0, n);
  return {std::move(loss), std::move(step_losses), std::move(exit)};
}

State forward_no_grad(const Workload& workload, int64_t t0, int64_t n, const State& entry) {
  torch::NoGradGuard no_grad;
  // Callers store it: NOTE [ Stored states are compact ] (core/state.h).
  return run_model(workload, workload.batch.inputs.narrow(0, t0, n), t0, n, entry)
      .second.compacted();
}

void backward_block(const BlockForward& block, const State& exit_grad) {
  std::vector<torch::Tensor> roots{block.loss};
  std::vector<torch::Tensor> seeds{torch::ones_like(block.loss)};
  for (size_t i = 0; i < exit_grad.size(); ++i) {
    // An undefined δh means the next block's loss does not depend on this state tensor.
    if (exit_grad[i].defined() && block.exit[i].requires_grad()) {
      roots.push_back(block.exit[i]);
      seeds.push_back(exit_grad[i]);
    }
  }
  torch::autograd::backward(roots, seeds);
}

void accumulate_input_grad(const torch::Tensor& inputs, const torch::Tensor& input_grad) {
  if (inputs.requires_grad()) torch::autograd::backward({inputs}, {input_grad});
}

}  // namespace vlrnn
