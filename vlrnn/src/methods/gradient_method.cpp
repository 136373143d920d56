#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/cells/onednn_lstm.h"

#include "vlrnn/core/rng.h"

#include <cmath>

namespace vlrnn {

namespace {

// NOTE [ Resets ] (core/sequence.h): the caller's mask, checked, on the CPU, with the resets
// that change nothing dropped (at step 0, past a sequence's end); undefined when none is left.
torch::Tensor checked_resets(const Workload& workload) {
  const auto& resets = workload.batch.resets;
  const int64_t steps = workload.batch.time_steps(), batch = workload.batch.batch_size();
  TORCH_CHECK(resets.dim() == 2 && resets.size(0) == steps && resets.size(1) == batch,
              "batch.resets: expected a mask of shape [T, B] = [", steps, ", ", batch,
              "] (true where a new segment starts), got shape ", resets.sizes());
  TORCH_CHECK(resets.scalar_type() == torch::kBool, "batch.resets: expected a bool mask, got ",
              resets.scalar_type());
  auto kept = resets.to(torch::kCPU).clone();  // [T, B]
  kept[0].fill_(false);  // step 0 starts from the initial state anyway
  if (workload.batch.has_lengths()) {
    const auto lengths = workload.batch.lengths.to(torch::kCPU, torch::kLong);
    kept &= torch::arange(steps, torch::kLong).unsqueeze(1) < lengths.unsqueeze(0);
  }
  return kept.any().item<bool>() ? kept : torch::Tensor();
}

}  // namespace

Workload validated(const Workload& workload) {
  const auto& x = workload.batch.inputs;
  TORCH_CHECK(x.defined(), "batch.inputs: expected a tensor of shape [T, B, F], got none");
  TORCH_CHECK(x.dim() == 3, "batch.inputs: expected rank 3 (time-major [T, B, F]), got rank ",
              x.dim(), " with shape ", x.sizes());
  const int64_t steps = x.size(0), batch = x.size(1);
  TORCH_CHECK(steps > 0, "batch.inputs: expected at least one time step (T > 0), got T = 0 "
              "(shape ", x.sizes(), ")");
  TORCH_CHECK(batch > 0, "batch.inputs: expected at least one sequence (B > 0), got B = 0");
  TORCH_CHECK(x.is_floating_point(), "batch.inputs: expected a floating-point dtype, got ",
              x.scalar_type());
  TORCH_CHECK(x.size(2) == workload.model.input_size(), "batch.inputs: expected F = ",
              workload.model.input_size(), " features per step (the model's input size), got ",
              x.size(2));
  for (const auto& p : workload.model.named_parameters()) {
    TORCH_CHECK(p.value().scalar_type() == x.scalar_type(), "model parameter ", p.key(),
                ": dtype ", p.value().scalar_type(), " differs from batch.inputs' dtype ",
                x.scalar_type(), "; convert the model with model->to(dtype)");
    TORCH_CHECK(p.value().device() == x.device(), "model parameter ", p.key(), ": on ",
                p.value().device(), " but batch.inputs are on ", x.device());
  }
  for (const auto& p : workload.head.named_parameters()) {
    TORCH_CHECK(p.value().scalar_type() == x.scalar_type(), "head parameter ", p.key(),
                ": dtype ", p.value().scalar_type(), " differs from batch.inputs' dtype ",
                x.scalar_type(), "; convert the head with head->to(dtype)");
    TORCH_CHECK(p.value().device() == x.device(), "head parameter ", p.key(), ": on ",
                p.value().device(), " but batch.inputs are on ", x.device(),
                "; move the head with head->to(device)");
  }
  TORCH_CHECK(workload.head.input_size() == workload.model.output_size(),
              "head: expected input size ", workload.model.output_size(),
              " (the model's output size), got ", workload.head.input_size());

  const auto& y = workload.batch.targets;
  TORCH_CHECK(y.defined(), "batch.targets: expected a tensor of shape [T, B] or [T, B, O], got none");
  TORCH_CHECK(y.dim() >= 2 && y.size(0) == steps && y.size(1) == batch,
              "batch.targets: expected leading dimensions [T, B] = [", steps, ", ", batch,
              "] matching batch.inputs, got shape ", y.sizes());
  TORCH_CHECK(y.device() == x.device(), "batch.targets: expected them on ", x.device(),
              " with batch.inputs, got ", y.device());
  Workload out = workload;
  if (workload.batch.has_lengths()) {
    const auto& lengths = workload.batch.lengths;
    TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch,
                "batch.lengths: expected one length per sequence, shape [", batch, "], got shape ",
                lengths.sizes());
    TORCH_CHECK(!lengths.is_floating_point() && !lengths.is_complex(),
                "batch.lengths: expected integer lengths, got ", lengths.scalar_type());
    auto lengths_cpu = lengths.to(torch::kCPU, torch::kLong);
    const auto lo = lengths_cpu.min().item<int64_t>(), hi = lengths_cpu.max().item<int64_t>();
    TORCH_CHECK(lo >= 1 && hi <= steps, "batch.lengths: expected every length in [1, T = ", steps,
                "], got values in [", lo, ", ", hi, "]");
    out.batch.lengths = lengths_cpu;
    // NOTE [ Padded steps ]: targets past a sequence's end may hold anything (-100, nan);
    // they become zeros here, so the head never computes a loss or a gradient from them.
    auto valid = torch::arange(steps, torch::kLong).unsqueeze(1) < lengths_cpu.unsqueeze(0);  // [T, B]
    for (int64_t d = 2; d < y.dim(); ++d) valid = valid.unsqueeze(-1);
    out.batch.targets = torch::where(valid.to(y.device()), y, torch::zeros_like(y));
  }
  workload.head.check_targets(out.batch.targets, "batch.targets");
  if (workload.batch.has_resets()) out.batch.resets = checked_resets(workload);

  // A state the caller gave: shaped as the model's state for this batch, on the inputs'
  // dtype and device.
  auto check_state = [&](const State& state, const char* argument) {
    workload.model.check_state(state, batch, x.scalar_type(), argument);
    for (size_t i = 0; i < state.size(); ++i) {
      TORCH_CHECK(state[i].device() == x.device(), argument, "[", i, "]: expected it on ",
                  x.device(), " with batch.inputs, got ", state[i].device());
    }
  };
  if (workload.h0.empty()) {
    out.h0 = workload.model.initial_state(batch, x.options().requires_grad(false));
  } else {
    check_state(workload.h0, "h0");
  }
  // NOTE [ Gradients across calls ] (gradient_method.h)
  if (!workload.final_state_grad.empty()) check_state(workload.final_state_grad, "final_state_grad");
  TORCH_CHECK(std::isfinite(workload.loss_scale) && workload.loss_scale > 0.0,
              "loss_scale: expected a finite number > 0, got ", workload.loss_scale);
  return out;
}

// The probe's tensors and time would otherwise land in the first measured step's (a cold
// step's peak would differ from a warm one's).
GradientMethod::GradientMethod() { onednn_lstm_inference_agrees(); }

namespace {

// The caller's tensors whose graphs the method would enter apart, which it is given as
// leaves instead (NOTE [ Resets ]; NOTE [ Targets with a graph ] in gradient_method.h).
struct CallerGraphs {
  State h0;               // the caller's h0 under resets, when it requires grad
  torch::Tensor targets;  // the caller's targets, when they require grad
  torch::Tensor inputs;   // the caller's inputs, when they require grad and have a graph

  // Puts leaves in `checked` in place of those tensors, and keeps the caller's.
  static CallerGraphs cut_from(Workload& checked) {
    CallerGraphs caller;
    // A method enters x's graph once, at its end; but x and y (or h0) may share one, as
    // next-step prediction in an encoder's space does (x = e[:-1], y = e[1:]), and two
    // backwards would pass the encoder twice. A leaf x needs no cut: its backward is its
    // accumulation.
    if (checked.batch.inputs.requires_grad() && !checked.batch.inputs.is_leaf()) {
      caller.inputs = checked.batch.inputs;
      checked.batch.inputs = caller.inputs.detach().requires_grad_(true);
    }
    if (checked.batch.has_resets() && checked.h0.requires_grad()) {
      caller.h0 = checked.h0;
      checked.h0 = caller.h0.detached_leaves();
    }
    if (checked.batch.targets.requires_grad()) {
      caller.targets = checked.batch.targets;
      checked.batch.targets = caller.targets.detach().requires_grad_(true);
    }
    return caller;
  }

  // One backward into the caller's graphs, with what the method gathered in the leaves of
  // `checked`, however many blocks reached them.
  void backward_from(const Workload& checked) const {
    std::vector<torch::Tensor> roots, grads;
    for (size_t i = 0; i < h0.size(); ++i) {
      if (h0[i].requires_grad() && checked.h0[i].grad().defined()) {
        roots.push_back(h0[i]);
        grads.push_back(checked.h0[i].grad());
      }
    }
    if (targets.defined() && checked.batch.targets.grad().defined()) {
      roots.push_back(targets);
      grads.push_back(checked.batch.targets.grad());
    }
    if (inputs.defined() && checked.batch.inputs.grad().defined()) {
      roots.push_back(inputs);
      grads.push_back(checked.batch.inputs.grad());
    }
    if (!roots.empty()) torch::autograd::backward(roots, grads);
  }
};

}  // namespace

void GradientMethod::prepare(const Workload& workload) {
  Workload checked = validated(workload);
  // Preparing runs gradient steps of its own (the planner's calibration and plan check):
  // they must not enter the caller's graphs, which the real step enters once.
  CallerGraphs::cut_from(checked);
  const OneDnnLstmGuard exact_lstm(checked.batch.inputs);  // NOTE [ oneDNN's LSTM inference, checked ]
  const RngCopy on_entry = RngCopy::take(checked.batch.inputs.device());
  prepare_impl(checked);
  on_entry.restore();  // preparing draws nothing a iteration would see
}

GradientResult GradientMethod::compute(const Workload& workload) {
  Workload checked = validated(workload);
  const OneDnnLstmGuard exact_lstm(checked.batch.inputs);  // NOTE [ oneDNN's LSTM inference, checked ]
  // NOTE [ Resets ]: h0 starts every segment, so with resets the blocks reach it many times,
  // and a caller's h0 computed from parameters (a learned initial state) would see its graph
  // back-propagated once per block. The method gets leaves in its place instead; their
  // gradient, summed over the segments, goes back into the caller's h0 once at the end. The
  // same for targets, and inputs with a graph (NOTE [ Targets with a graph ] in
  // gradient_method.h).
  const CallerGraphs caller = CallerGraphs::cut_from(checked);
  // NOTE [ Generators on failure ]: a method that throws midway (a model error in its third
  // block, an out-of-memory) has drawn or restored generator states partway through; put
  // them back where the call found them, so a caller that catches the error and goes on
  // draws what it would have drawn.
  const RngCopy on_entry = RngCopy::take(checked.batch.inputs.device());
  GradientResult result;
  try {
    result = compute_impl(checked);
  } catch (...) {
    on_entry.restore();
    throw;
  }
  caller.backward_from(checked);
  if (checked.batch.from_packed) {
    result.packed_step_losses = torch::nn::utils::rnn::pack_padded_sequence(
        result.step_losses, checked.batch.lengths, /*batch_first=*/false,
        /*enforce_sorted=*/false);
  }
  return result;
}

}  // namespace vlrnn
