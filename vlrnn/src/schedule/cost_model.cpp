#include "vlrnn/schedule/cost_model.h"

#include "vlrnn/schedule/line_fit.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>

namespace vlrnn::schedule {
namespace {

// A value a cost model may hold: finite and >= 0 (`at`: the entry's index, or -1).
void check_value(const char* field, int64_t at, double value) {
  TORCH_CHECK(std::isfinite(value) && value >= 0, "cost model ", field,
              at >= 0 ? "[" + std::to_string(at) + "]" : std::string(),
              ": expected a finite value >= 0, got ", value);
}

}  // namespace

void CostModel::check() const {
  const size_t T = step.forward_seconds.size();
  TORCH_CHECK(T >= 1, "cost model step.forward_seconds: expected T >= 1 entries, got 0");
  const auto entries = [&](const std::string& field) {
    if (field == "step.state_bytes") return T + 1;
    if (field == "active_sequences") return active_sequences.empty() ? size_t(0) : T;
    return T;
  };
  for_each_field(*this, [&](const char* field, const auto& value) {
    using V = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<V>) {
      // Signed: the head's tape, freed first, may outweigh its output gradient.
      if (std::string(field) != "backward.head_step_bytes") check_value(field, -1, double(value));
    } else if constexpr (!std::is_same_v<V, std::string>) {
      TORCH_CHECK(value.size() == entries(field), "cost model ", field, ": expected ",
                  entries(field), " entries, got ", value.size());
      for (size_t t = 0; t < value.size(); ++t) check_value(field, int64_t(t), double(value[t]));
    }
  });
  for (size_t t = 1; t < active_sequences.size(); ++t) {
    TORCH_CHECK(active_sequences[t] <= active_sequences[t - 1], "cost model active_sequences[",
                t, "]: expected at most the step before's ", active_sequences[t - 1],
                " (a sequence that ended does not run again), got ", active_sequences[t]);
  }
  const int64_t fixed = iteration.fixed_bytes;
  TORCH_CHECK(iteration.fixed_step_bytes <= fixed / int64_t(T), "cost model "
              "iteration.fixed_step_bytes: expected at most iteration.fixed_bytes / T = ",
              fixed / int64_t(T), " (a part of fixed_bytes per step), got ",
              iteration.fixed_step_bytes);
  TORCH_CHECK(iteration.reversal_bytes <= fixed, "cost model iteration.reversal_bytes: expected "
              "at most iteration.fixed_bytes = ", fixed, " (a part of it), got ",
              iteration.reversal_bytes);
  TORCH_CHECK(backward.window_step_bytes == 0 || backward.window_steps > 0, "cost model "
              "backward.window_step_bytes: expected 0 without backward.window_steps, got ",
              backward.window_step_bytes);
}

double CostModel::calls_seconds(int64_t a, int64_t b, int64_t call_steps) const {
  if (b <= a) return 0.0;
  const int64_t calls = (b - a + call_steps - 1) / call_steps;
  // The calls that end by the first end take the fused path; the rest, the lengths path.
  const int64_t end = first_end();
  const int64_t fused_calls = b <= end ? calls : std::max<int64_t>(0, end - a) / call_steps;
  return double(calls) * call.op_seconds + double(calls - fused_calls) * call.ended_seconds;
}

int64_t CostModel::advance_transient(int64_t a, int64_t b, int64_t chunk_steps) const {
  if (b <= a) return 0;
  int64_t largest = 0;
  for (int64_t t0 = a; t0 < b; t0 += chunk_steps) {
    int64_t chunk = 0;
    for (int64_t t = t0; t < std::min(b, t0 + chunk_steps); ++t) {
      chunk += step.advance_transient_bytes[size_t(t)];
    }
    largest = std::max(largest, chunk);
  }
  return largest + call.advance_op_bytes;
}

// NOTE [ Other batches of the workload ]: what a step of a variable-length batch costs depends
// on the lengths only through how many sequences still run at that step (the fused path before
// the first end, the running rows after it), and not on how many steps the batch has. So one
// model, measured on one batch, prices every batch of the workload's shapes but T: each
// per-step vector is, before the other batch's first end, the measured mean over the steps where
// every sequence ran, and from it on a least-squares line in the active count, fitted over the
// measured batch's steps from its own first end. What is priced per call or per tape depends on
// neither; the whole-iteration bytes change by fixed_step_bytes per step. A measurement learns
// from kLongestMeasuredTape steps at most, so a model measured on as many prices longer batches
// too, one measured on fewer shorter ones only. So a training run over shuffled or padded
// batches measures once (planner_method.cpp).
namespace {

// The first step with fewer sequences than step 0 (the counts never grow); T when none ends.
int64_t first_end_of(const std::vector<int64_t>& active) {
  if (active.empty()) return 0;
  const auto first =
      std::upper_bound(active.begin(), active.end(), active[0], std::greater<int64_t>());
  return int64_t(first - active.begin());
}

// `costs` [T], measured on steps with `measured` sequences (first end measured_end; empty
// counts: every step full), for `time_steps` steps with `active` sequences (first end `end`):
// NOTE [ Other batches of the workload ].
template <typename V>
V priced_through_active_counts(const V& costs, const std::vector<int64_t>& measured,
                               int64_t measured_end, int64_t time_steps,
                               const std::vector<int64_t>& active, int64_t end) {
  const int64_t T = int64_t(costs.size());
  double all_active = 0.0;
  for (int64_t t = 0; t < measured_end; ++t) all_active += double(costs[size_t(t)]);
  all_active /= double(std::max<int64_t>(1, measured_end));
  // The line through (active count, cost) over the measured steps from the first end.
  LineFit line;
  for (int64_t t = measured_end; t < T; ++t) {
    line.add(double(measured[size_t(t)]), double(costs[size_t(t)]));
  }
  const double slope = line.slope(), intercept = line.intercept(all_active);
  V out(static_cast<size_t>(time_steps));
  for (int64_t t = 0; t < time_steps; ++t) {
    const double cost =
        t < end ? all_active : std::max(0.0, intercept + slope * double(active[size_t(t)]));
    if constexpr (std::is_integral_v<typename V::value_type>) {
      out[size_t(t)] = std::llround(cost);
    } else {
      out[size_t(t)] = cost;
    }
  }
  return out;
}

}  // namespace

int64_t CostModel::first_end() const {
  return active_sequences.empty() ? time_steps() : first_end_of(active_sequences);
}

bool CostModel::prices_batch(int64_t steps, const std::vector<int64_t>& active) const {
  const int64_t T = time_steps();
  if (steps < 1 || active.empty() != active_sequences.empty()) return false;
  if (!active.empty() && int64_t(active.size()) != steps) return false;
  if (steps > T && T < kLongestMeasuredTape) return false;
  return active.empty() || first_end_of(active) == steps || first_end() < T;
}

CostModel CostModel::for_batch(int64_t steps, const std::vector<int64_t>& active) const {
  const int64_t T = time_steps();
  TORCH_CHECK(steps >= 1, "cost model for_batch: expected T >= 1 steps, got ", steps);
  TORCH_CHECK(active.empty() == active_sequences.empty(), "cost model for_batch: this model "
              "was measured on a batch ", active_sequences.empty() ? "without" : "with",
              " lengths and cannot price one ", active.empty() ? "without" : "with", " them");
  TORCH_CHECK(active.empty() || int64_t(active.size()) == steps, "cost model for_batch: "
              "expected active counts for T = ", steps, " steps, got ", active.size());
  TORCH_CHECK(steps <= T || T >= kLongestMeasuredTape, "cost model for_batch: this model was "
              "measured on T = ", T, " steps and prices at most that many (or any number, once "
              "measured on ", kLongestMeasuredTape, " or more), got T = ", steps);
  TORCH_CHECK(prices_batch(steps, active), "cost model for_batch: this model was measured "
              "on a batch where no sequence ends, and cannot price one where some do; measure "
              "one on such a batch");
  if (steps == T && active == active_sequences) return *this;
  return through_active_counts(steps, active);
}

CostModel CostModel::through_active_counts(int64_t steps,
                                           const std::vector<int64_t>& active) const {
  const int64_t T = time_steps();
  const int64_t end = active.empty() ? steps : first_end_of(active), measured_end = first_end();
  CostModel m = *this;
  const auto derive = [&](auto& costs) {
    costs = priced_through_active_counts(costs, active_sequences, measured_end, steps, active,
                                         end);
  };
  derive(m.step.forward_seconds);
  derive(m.step.forward_grad_seconds);
  derive(m.step.backward_seconds);
  derive(m.step.tape_bytes);
  derive(m.step.backward_transient_bytes);
  derive(m.step.advance_transient_bytes);
  // Stored states cost the same at every step but the caller's h0.
  m.step.state_bytes.assign(size_t(steps + 1), step.state_bytes.back());
  m.step.state_bytes[0] = step.state_bytes[0];
  m.iteration.fixed_bytes = iteration.fixed_bytes + (steps - T) * iteration.fixed_step_bytes;
  m.active_sequences = active;  // and so the first end, the new batch's
  m.source = source + fmt::format(", priced for a batch of T = {}{}", steps,
                                  active.empty() ? "" : " through its active counts");
  m.check();
  return m;
}

CostModel CostModel::uniform(int64_t time_steps, double forward_s, double forward_grad_s,
                             double backward_s, int64_t tape_b, int64_t state_b,
                             int64_t fixed_b) {
  TORCH_CHECK(time_steps >= 1, "cost model: expected T >= 1, got ", time_steps);
  CostModel m;
  const auto T = size_t(time_steps);
  m.step.forward_seconds.assign(T, forward_s);
  m.step.forward_grad_seconds.assign(T, forward_grad_s);
  m.step.backward_seconds.assign(T, backward_s);
  m.step.tape_bytes.assign(T, tape_b);
  m.step.backward_transient_bytes.assign(T, 0);
  m.step.advance_transient_bytes.assign(T, 0);
  m.step.state_bytes.assign(T + 1, state_b);
  m.step.state_bytes[0] = 0;
  m.iteration.fixed_bytes = fixed_b;
  m.source = "synthetic (uniform)";
  m.check();
  return m;
}

CostPrefix::CostPrefix(const CostModel& m) : model(m) {
  const size_t T = m.step.forward_seconds.size();
  forward.assign(T + 1, 0.0);
  forward_grad.assign(T + 1, 0.0);
  backward.assign(T + 1, 0.0);
  tape.assign(T + 1, 0);
  backward_transient.assign(T + 1, 0);
  for (size_t t = 0; t < T; ++t) {
    forward[t + 1] = forward[t] + m.step.forward_seconds[t];
    forward_grad[t + 1] = forward_grad[t] + m.step.forward_grad_seconds[t];
    backward[t + 1] = backward[t] + m.step.backward_seconds[t];
    tape[t + 1] = tape[t] + m.step.tape_bytes[t];
    backward_transient[t + 1] = backward_transient[t] + m.step.backward_transient_bytes[t];
    if (m.backward.splits_at_ends && t > 0 && m.active_sequences[t] < m.active_sequences[t - 1]) {
      ends.push_back(int64_t(t));
    }
  }
}

int64_t CostPrefix::tape_transient_b(int64_t a, int64_t b) const {
  const auto& backward = model.backward;
  const int64_t window = std::min(b - a, backward.window_steps) * backward.window_step_bytes;
  const int64_t head = backward.head_step_bytes * (b - a);
  // What a run [s, e) needs of its own: its steps.
  const auto own = [&](int64_t s, int64_t e) {
    return backward_transient[e] - backward_transient[s];
  };
  // The runs of [a, b), last first: from the last end before b down to a.
  auto end = std::lower_bound(ends.begin(), ends.end(), b);
  // Never below 0: the backward starts with the whole tape live (a negative head frees some).
  if (end == ends.begin() || *(end - 1) <= a) return std::max<int64_t>(0, head + own(a, b) + window);
  // Every run but the first reversed holds the earlier runs' weight gradients, a whole
  // gradient's worth, of which the per-call sums (backward.sums_bytes) are part already.
  const int64_t held =
      std::max<int64_t>(0, model.iteration.gradient_bytes - model.backward.sums_bytes);
  const int64_t largest = own(a, b) + held;
  int64_t most = 0, run_end = b, sums = 0;
  while (run_end > a) {
    const int64_t run_start = (end != ends.begin() && *(end - 1) > a) ? *--end : a;
    const int64_t freed = tape[b] - tape[run_end];
    if (freed >= largest) break;  // no run needs more than that
    most = std::max(most, sums + own(run_start, run_end) - freed);
    sums = held;
    run_end = run_start;
  }
  return std::max<int64_t>(0, head + most + window);
}

}  // namespace vlrnn::schedule
