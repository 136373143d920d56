#include "vlrnn/schedule/cost_measurement.h"

#include "vlrnn/core/rng.h"
#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"
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
      measure::IterationMemoryScope scope(device);
      timer.start();
      auto exit = forward_no_grad(sub, 0, n, sub.h0);
      const double s = timer.stop();
      exit = State();
      if (r > 0) adv.push_back(s);
      p.advance_peak = scope.finish().iteration_peak_bytes;
    }
    {
      const State entry = sub.h0.detached_leaves();
      measure::IterationMemoryScope scope(device);
      timer.start();
      auto block = forward_block(sub, batch.inputs, 0, n, entry);
      const double s_fwd = timer.stop();
      const auto taped = scope.finish();
      p.tape = taped.end_bytes - taped.start_bytes;
      std::vector<torch::Tensor> seeds;
      for (const auto& h : block.exit) seeds.push_back(torch::ones_like(h));
      const State exit_grad(std::move(seeds));
      measure::IterationMemoryScope back(device);
      timer.start();
      backward_block(block, exit_grad);
      const double s_bwd = timer.stop();
      block = BlockForward();
      p.backward_peak = back.finish().iteration_peak_bytes;
      if (r > 0) {
        fwd.push_back(s_fwd);
        bwd.push_back(s_bwd);
      }
    }
    {
      // The head alone on outputs z [n, B, Z].
      const auto z = torch::randn({n, batch.batch_size(), workload.model.output_size()},
                                  batch.inputs.options()).requires_grad_(true);
      measure::IterationMemoryScope scope(device);
      timer.start();
      auto head = head_loss(sub, z, 0, n);
      const double s_fwd = timer.stop();
      const auto taped = scope.finish();
      p.head_tape = taped.end_bytes - taped.start_bytes;
      measure::IterationMemoryScope back(device);
      timer.start();
      head.loss.backward();
      const double s_bwd = timer.stop();
      head = HeadLoss();
      p.head_backward_peak = back.finish().iteration_peak_bytes;
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

// Bytes a tape of n steps keeps when half of the sequences end halfway through it: the
// packed path a variable-length batch takes in blocks where a sequence ends.
int64_t packed_tape_bytes(const Workload& workload, int64_t n) {
  const int64_t B = workload.batch.batch_size();
  SequenceBatch batch;
  batch.inputs = workload.batch.inputs.narrow(0, 0, n).detach();  // [n, B, F]
  batch.targets = workload.batch.targets.narrow(0, 0, n);
  auto lengths = torch::full({B}, n, torch::kLong);  // [B]
  for (int64_t b = 1; b < B; b += 2) lengths[b] = std::max<int64_t>(1, n / 2);
  batch.lengths = lengths;
  const Workload sub{workload.model, workload.head, batch, workload.h0.detached(),
                     workload.reduction};
  const State entry = sub.h0.detached_leaves();
  measure::IterationMemoryScope scope(workload.batch.inputs.device());
  auto block = forward_block(sub, batch.inputs, 0, n, entry);
  const auto mem = scope.finish();
  return mem.end_bytes - mem.start_bytes;
}

// The iteration peak of the executor running uniform_schedule(n, k) on the first n steps, every
// sequence active, measured as measure_iteration measures a method (gradients cleared first).
measure::IterationMeasurement executor_step(const Workload& workload, int64_t n, int64_t k) {
  const auto& x = workload.batch.inputs;
  SequenceBatch batch;
  batch.inputs = x.narrow(0, 0, n).detach().requires_grad_(x.requires_grad());  // [n, B, F]
  batch.targets = workload.batch.targets.narrow(0, 0, n);
  std::vector<torch::Tensor> h0;
  for (const auto& h : workload.h0) h0.push_back(h.detach().requires_grad_(h.requires_grad()));
  const Workload sub{workload.model, workload.head, batch, State(std::move(h0)),
                     workload.reduction};
  ScheduleMethod method("calibration", "calibration",
                        [n, k](const Workload&) { return uniform_schedule(n, k); });
  return measure::measure_iteration(method, sub, x.device());
}

int64_t executor_peak(const Workload& workload, int64_t n, int64_t k) {
  return executor_step(workload, n, k).memory.iteration_peak_bytes;
}

// Median seconds per step of the executor reversing one tape of n steps.
double tape_step_seconds(const Workload& workload, int64_t n, int64_t repeats) {
  std::vector<double> seconds;
  executor_step(workload, n, n);  // warm-up
  for (int64_t r = 0; r < repeats; ++r) seconds.push_back(executor_step(workload, n, n).seconds);
  return median(seconds) / double(n);
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
  double tape_step = tape_b;  // bytes per taped step
  if (workload.batch.has_lengths() && B >= 2 && n2 > n1) {
    // Blocks where a sequence ends take the packed path, which copies more than it saves.
    const auto [packed_step, packed_call] =
        fit(double(packed_tape_bytes(workload, n1)), double(packed_tape_bytes(workload, n2)), n1, n2);
    tape_step = std::max(tape_step, packed_step);
    m.tape_op_bytes = std::max(m.tape_op_bytes, int64_t(packed_call));
  }
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
  // A stored state: what an advance's exit keeps alive (its storages, which may be larger
  // than the state's own bytes) plus a generator snapshot — but only for a model that draws
  // random numbers: otherwise every snapshot shares one tensor (NOTE [ Shared RNG snapshots ]).
  int64_t state = 0, rng_bytes = 0;
  bool draws_random_numbers = false;
  {
    const auto before = RngState::capture(device);
    measure::IterationMemoryScope scope(device);
    auto exit = forward_no_grad(workload, 0, 1, workload.h0.detached());
    const auto mem = scope.finish();
    state = std::max(bytes_of(exit), mem.end_bytes - mem.start_bytes);
    draws_random_numbers = !RngState::capture(device).shares_storage_with(before);
  }
  const int64_t snapshot_bytes = RngState::capture(device).bytes();
  if (draws_random_numbers) rng_bytes = snapshot_bytes;
  const auto elt = int64_t(x.element_size());
  // Bytes per step live for the whole step: per-step losses [T, B], and with dL/dx the
  // buffer [T, B, F] and x.grad.
  const int64_t fixed_per_step = B * elt + (x.requires_grad() ? 2 * bytes_of(x) / T : 0);

  // NOTE [ Calibrating the peak end to end ]: the parameter gradients, autograd's buffers
  // that sum a weight's gradient over the steps of a tape, the generator snapshots and
  // whatever else a iteration allocates are not worth modelling one by one: the
  // executor's own iteration peak on sub-chains fixes them. A one-step tape (n = 1, no sums)
  // gives the fixed bytes F0; full tapes of n1 and n2 steps give the per-call and per-step
  // backward transient on top of the tape.
  const int64_t e1 = executor_peak(workload, 1, 1);
  int64_t f0 = std::max<int64_t>(0, e1 - int64_t(tape_b) - int64_t(tape_op_b) -
                                        fixed_per_step);
  double bwd_step = 0.0, bwd_call = 0.0;
  if (T >= 2) {
    // The transient grows a little faster than linearly in n: a chord between 8 and 128
    // steps over-predicts tapes between them (safe) and under-predicts longer ones by a few
    // percent (kPlanningMargin).
    const int64_t c2 = std::min<int64_t>(T, 128), c1 = std::max<int64_t>(2, std::min<int64_t>(8, c2 - 1));
    const auto residual = [&](int64_t n) {
      return double(executor_peak(workload, n, n) - f0 - fixed_per_step * n) -
             tape_b * double(n) - tape_op_b;
    };
    const double r1 = residual(c1), r2 = c2 > c1 ? residual(c2) : r1;
    std::tie(bwd_step, bwd_call) =
        c2 > c1 ? fit(r1, r2, c1, c2) : std::pair<double, double>{0.0, std::max(0.0, r1)};
  }
  m.backward_op_bytes = int64_t(bwd_call);
  // Backward calls after the first (NOTE [ Calibrating the peak end to end ]): two one-step
  // tapes (the second's peak: F0 + a step's tape + the sums) and two tapes of c steps.
  if (T >= 2) {
    const double tape1 = tape_b + tape_op_b;
    m.accumulate_single_bytes = int64_t(std::max(
        0.0, double(executor_peak(workload, 2, 1) - f0 - 2 * fixed_per_step) - tape1));
  }
  if (T >= 4) {
    const int64_t c = std::min<int64_t>(16, T / 2);
    const double tape_c = tape_b * double(c) + tape_op_b;
    m.accumulate_bytes = int64_t(std::max(
        0.0, double(executor_peak(workload, 2 * c, c) - f0 - 2 * c * fixed_per_step) - tape_c -
                 bwd_call - bwd_step * double(c)));
  }
  for (int64_t t = 0; t < T; ++t) {
    const double f = active[size_t(t)];
    m.forward_seconds.push_back(adv_s * f);
    m.forward_grad_seconds.push_back(split(fwd_s, hf_s, f));
    m.backward_seconds.push_back(split(bwd_s, hb_s, f));
    // Bytes are not scaled by the active fraction: a partly active step runs the packed path,
    // whose copies (inputs and states of the active sequences, outputs padded back to B)
    // cost about what the missing sequences save — full-batch bytes are the safe bound.
    m.tape_bytes.push_back(int64_t(tape_step));
    m.backward_transient_bytes.push_back(int64_t(bwd_step));
    m.advance_transient_bytes.push_back(int64_t(adv_b));
  }
  // Long tapes (cost_model.h): per-step seconds of one tape of 64 and of 512 steps.
  if (T >= 128) {
    const int64_t l1 = 64, l2 = std::min<int64_t>(T, 512);
    const double t1 = tape_step_seconds(workload, l1, options.repeats);
    const double t2 = tape_step_seconds(workload, l2, options.repeats);
    m.tape_growth_seconds = std::max(0.0, (t2 - t1) / double(l2 - l1));
  }
  m.state_bytes.assign(size_t(T + 1), state + rng_bytes);
  m.state_bytes[0] = 0;
  (void)bwd_b;
  (void)hbwd_b;
  (void)bwd_op_b;

  int64_t param_bytes = 0;
  for (const auto& p : params) {
    if (p.requires_grad()) param_bytes += bytes_of(p);
  }
  m.gradient_bytes = std::min(param_bytes, f0);
  int64_t fixed = f0 - m.gradient_bytes + fixed_per_step * T;
  if (!workload.h0.requires_grad()) fixed += bytes_of(workload.h0);  // h0's zeros when absent
  // The calibration runs found the generator where the previous capture left it, so their
  // snapshots were shared; a step after other draws (new data, say) makes one anew.
  fixed += snapshot_bytes;
  if (workload.batch.has_lengths()) fixed += bytes_of(workload.batch.targets);  // validated copy
  m.fixed_bytes = fixed;
  m.source = fmt::format("measured on {} (n = {} and {} steps, {} repeats)", device.str(), n1, n2,
                         options.repeats);

  for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = saved_grads[i];
  rng.restore();
  m.check();
  return m;
}

}  // namespace vlrnn::schedule
