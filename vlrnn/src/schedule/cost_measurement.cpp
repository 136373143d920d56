#include "vlrnn/schedule/cost_measurement.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/measure/step_memory.h"
#include "vlrnn/measure/timer.h"
#include "vlrnn/methods/block.h"

#include <fmt/format.h>

#include <algorithm>

namespace vlrnn::schedule {
namespace {

int64_t bytes_of(const torch::Tensor& t) {
  return t.defined() ? int64_t(t.numel()) * int64_t(t.element_size()) : 0;
}

int64_t bytes_of(const State& s) {
  int64_t bytes = 0;
  for (const auto& t : s) bytes += bytes_of(t);
  return bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One length's measurements: seconds and bytes of each phase.
struct Phase {
  double advance_s = 0, forward_grad_s = 0, backward_s = 0, head_forward_s = 0, head_backward_s = 0;
  int64_t advance_peak = 0, tape = 0, backward_peak = 0, head_tape = 0, head_backward_peak = 0;
};

Phase measure_length(const Workload& workload, int64_t n, int64_t repeats) {
  const auto device = workload.batch.inputs.device();
  // The first n steps, every sequence active, inputs without grad: a block in the middle of
  // a chain (its entry is a leaf that requires grad, as in every method's later blocks).
  SequenceBatch batch;
  batch.inputs = workload.batch.inputs.narrow(0, 0, n).detach();    // [n, B, F]
  batch.targets = workload.batch.targets.narrow(0, 0, n);           // [n, B, ...]
  const Workload sub{workload.model, workload.head, batch, workload.h0.detached(),
                     workload.reduction};
  Phase p;
  std::vector<double> adv, fwd, bwd, hf, hb;
  measure::DeviceTimer timer(device);
  for (int64_t r = 0; r < repeats + 1; ++r) {  // the first round warms up, untimed
    {
      measure::StepMemoryScope scope(device);
      timer.start();
      auto exit = advance_without_grad(sub, 0, n, sub.h0);
      const double s = timer.stop();
      exit = State();
      if (r > 0) adv.push_back(s);
      p.advance_peak = scope.finish().step_peak_bytes;
    }
    {
      const State entry = sub.h0.detached_leaves();
      measure::StepMemoryScope scope(device);
      timer.start();
      auto block = forward_block(sub, batch.inputs, 0, n, entry);
      const double s_fwd = timer.stop();
      const auto taped = scope.finish();
      p.tape = taped.end_bytes - taped.start_bytes;
      std::vector<torch::Tensor> seeds;
      for (const auto& h : block.exit) seeds.push_back(torch::ones_like(h));
      const State exit_grad(std::move(seeds));
      measure::StepMemoryScope back(device);
      timer.start();
      backward_block(block, exit_grad);
      const double s_bwd = timer.stop();
      block = BlockForward();
      p.backward_peak = back.finish().step_peak_bytes;
      if (r > 0) {
        fwd.push_back(s_fwd);
        bwd.push_back(s_bwd);
      }
    }
    {
      // The head alone on outputs z [n, B, Z].
      const auto z = torch::randn({n, batch.batch_size(), workload.model.output_size()},
                                  batch.inputs.options()).requires_grad_(true);
      measure::StepMemoryScope scope(device);
      timer.start();
      auto head = head_loss(sub, z, 0, n);
      const double s_fwd = timer.stop();
      const auto taped = scope.finish();
      p.head_tape = taped.end_bytes - taped.start_bytes;
      measure::StepMemoryScope back(device);
      timer.start();
      head.loss.backward();
      const double s_bwd = timer.stop();
      head = HeadLoss();
      p.head_backward_peak = back.finish().step_peak_bytes;
      if (r > 0) {
        hf.push_back(s_fwd);
        hb.push_back(s_bwd);
      }
    }
  }
  p.advance_s = median(adv);
  p.forward_grad_s = median(fwd);
  p.backward_s = median(bwd);
  p.head_forward_s = median(hf);
  p.head_backward_s = median(hb);
  return p;
}

// Slope and intercept of a line through (n1, v1) and (n2, v2), both clamped at >= 0.
std::pair<double, double> fit(double v1, double v2, int64_t n1, int64_t n2) {
  const double slope = std::max(0.0, (v2 - v1) / double(n2 - n1));
  return {slope, std::max(0.0, v1 - slope * double(n1))};
}

}  // namespace

CostModel measure_cost_model(const Workload& workload, const CostMeasureOptions& options) {
  const int64_t T = workload.batch.time_steps(), B = workload.batch.batch_size();
  const int64_t n2 = std::min(options.long_steps, T);
  const int64_t n1 = std::min(options.short_steps, std::max<int64_t>(1, n2 - 1));
  TORCH_CHECK(options.repeats >= 1, "cost measurement repeats: expected >= 1, got ",
              options.repeats);
  const auto device = workload.batch.inputs.device();
  const auto& x = workload.batch.inputs;

  // Parameter gradients as they were; the generators where they were.
  std::vector<torch::Tensor> params;
  for (const auto& p : workload.model.parameters()) params.push_back(p);
  for (const auto& p : workload.head.parameters()) params.push_back(p);
  std::vector<torch::Tensor> saved_grads;
  for (auto& p : params) saved_grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  const auto rng = RngState::capture(device);

  CostModel m;
  const auto cell = [&](int64_t n) { return measure_length(workload, n, options.repeats); };
  Phase p1, p2;
  if (n2 > n1) {
    p1 = cell(n1);
    p2 = cell(n2);
  } else {  // T = 1: one length; everything is per step
    p2 = cell(n2);
  }
  const int64_t a1 = n2 > n1 ? n1 : 0;
  const auto line = [&](double v1, double v2) {
    return n2 > n1 ? fit(v1, v2, a1, n2) : std::pair<double, double>{v2, 0.0};
  };
  const auto [adv_s, adv_op] = line(p1.advance_s, p2.advance_s);
  const auto [fwd_s, fwd_op] = line(p1.forward_grad_s, p2.forward_grad_s);
  const auto [bwd_s, bwd_op] = line(p1.backward_s, p2.backward_s);
  const auto [hf_s, hf_op] = line(p1.head_forward_s, p2.head_forward_s);
  const auto [hb_s, hb_op] = line(p1.head_backward_s, p2.head_backward_s);
  const auto [adv_b, adv_op_b] = line(double(p1.advance_peak), double(p2.advance_peak));
  const auto [tape_b, tape_op_b] = line(double(p1.tape), double(p2.tape));
  const auto [bwd_b, bwd_op_b] = line(double(p1.backward_peak), double(p2.backward_peak));
  const auto [htape_b, htape_op_b] = line(double(p1.head_tape), double(p2.head_tape));
  const auto [hbwd_b, hbwd_op_b] = line(double(p1.head_backward_peak), double(p2.head_backward_peak));
  m.op_seconds = (adv_op + fwd_op + bwd_op) / 3.0;
  m.tape_op_bytes = int64_t(tape_op_b);
  // The advance's exit state is counted as the stored state, not as transient.
  m.backward_op_bytes = int64_t(bwd_op_b);
  (void)adv_op_b;
  (void)htape_op_b;
  (void)hbwd_op_b;
  (void)hf_op;
  (void)hb_op;

  // Active sequences per step (NOTE [ Fitting the cost model ]).
  std::vector<double> active(size_t(T), 1.0);
  if (workload.batch.has_lengths()) {
    auto lengths = workload.batch.lengths.to(torch::kCPU, torch::kLong);
    auto counts = (torch::arange(T, torch::kLong).unsqueeze(1) < lengths.unsqueeze(0))
                      .sum(1).to(torch::kDouble);  // [T]
    auto acc = counts.accessor<double, 1>();
    for (int64_t t = 0; t < T; ++t) active[size_t(t)] = acc[t] / double(B);
  }
  const auto split = [&](double total, double head, double frac) {
    const double h = std::min(head, total);
    return h + (total - h) * frac;
  };
  const int64_t state = bytes_of(workload.h0);
  int64_t rng_bytes = 0;
  {
    measure::StepMemoryScope scope(device);
    auto snapshot = RngState::capture(device);
    const auto mem = scope.finish();
    rng_bytes = mem.end_bytes - mem.start_bytes;
  }
  for (int64_t t = 0; t < T; ++t) {
    const double f = active[size_t(t)];
    m.forward_seconds.push_back(adv_s * f);
    m.forward_grad_seconds.push_back(split(fwd_s, hf_s, f));
    m.backward_seconds.push_back(split(bwd_s, hb_s, f));
    m.tape_bytes.push_back(int64_t(split(tape_b, htape_b, f)));
    m.backward_transient_bytes.push_back(int64_t(split(bwd_b, hbwd_b, f)));
    m.advance_transient_bytes.push_back(int64_t(adv_b * f));
  }
  m.state_bytes.assign(size_t(T + 1), state + rng_bytes);
  m.state_bytes[0] = 0;

  // Live for the whole step (counted from sizes).
  int64_t fixed = 0;
  for (const auto& p : params) {
    if (p.requires_grad()) fixed += bytes_of(p);  // dL/dθ
  }
  const auto elt = int64_t(x.element_size());
  fixed += T * B * elt + elt;                  // per-step losses [T, B], the loss
  if (x.requires_grad()) fixed += 2 * bytes_of(x);  // the dL/dx buffer and x.grad
  if (workload.batch.has_lengths()) fixed += bytes_of(workload.batch.targets);  // validated copy
  fixed += 2 * state;                          // δh, and h0's zeros or its gradient
  fixed += 2 * rng_bytes;                      // generators at state 0 and after the pass
  m.fixed_bytes = fixed;
  m.source = fmt::format("measured on {} (n = {} and {} steps, {} repeats)", device.str(), n1, n2,
                         options.repeats);

  for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = saved_grads[i];
  rng.restore();
  m.check();
  return m;
}

}  // namespace vlrnn::schedule
