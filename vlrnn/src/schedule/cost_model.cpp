#include "vlrnn/schedule/cost_model.h"

#include <torch/torch.h>

#include <cmath>

namespace vlrnn::schedule {
namespace {

template <typename V>
void check_vector(const char* field, const std::vector<V>& values, size_t expected) {
  TORCH_CHECK(values.size() == expected, "cost model ", field, ": expected ", expected,
              " entries, got ", values.size());
  for (size_t t = 0; t < values.size(); ++t) {
    TORCH_CHECK(std::isfinite(double(values[t])) && values[t] >= 0, "cost model ", field, "[",
                t, "]: expected a finite value >= 0, got ", values[t]);
  }
}

}  // namespace

void CostModel::check() const {
  const size_t T = forward_seconds.size();
  TORCH_CHECK(T >= 1, "cost model forward_seconds: expected T >= 1 entries, got 0");
  check_vector("forward_seconds", forward_seconds, T);
  check_vector("forward_grad_seconds", forward_grad_seconds, T);
  check_vector("backward_seconds", backward_seconds, T);
  check_vector("tape_bytes", tape_bytes, T);
  check_vector("backward_transient_bytes", backward_transient_bytes, T);
  check_vector("advance_transient_bytes", advance_transient_bytes, T);
  check_vector("state_bytes", state_bytes, T + 1);
  check_vector("chunk_transient_bytes", chunk_transient_bytes, chunk_steps > 0 ? T : 0);
  const std::initializer_list<std::pair<const char*, double>> scalars = {
      {"op_seconds", op_seconds},
      {"tape_growth_seconds", tape_growth_seconds},
      {"ended_call_seconds", ended_call_seconds},
      {"first_end_step", double(first_end_step)},
      {"tape_op_bytes", double(tape_op_bytes)},
      {"backward_op_bytes", double(backward_op_bytes)},
      {"accumulate_single_bytes", double(accumulate_single_bytes)},
      {"accumulate_bytes", double(accumulate_bytes)},
      {"fixed_bytes", double(fixed_bytes)},
      {"gradient_bytes", double(gradient_bytes)},
      {"backward_window_steps", double(backward_window_steps)},
      {"chunk_steps", double(chunk_steps)},
      {"head_backward_step_bytes", double(head_backward_step_bytes)},
      {"whole_call_steps", double(whole_call_steps)},
      {"packed_step_bytes", double(packed_step_bytes)},
      {"chunk_step_context_bytes", double(chunk_step_context_bytes)},
      {"chunk_call_bytes", double(chunk_call_bytes)}};
  for (const auto& [field, value] : scalars) {
    TORCH_CHECK(std::isfinite(value) && value >= 0, "cost model ", field,
                ": expected a finite value >= 0, got ", value);
  }
  TORCH_CHECK(packed_step_bytes == 0 || (chunk_steps > 0 && whole_call_steps > 0),
              "cost model packed_step_bytes: expected 0 without chunk_steps and "
              "whole_call_steps, got ", packed_step_bytes);
}

double CostModel::calls_seconds(int64_t a, int64_t b, int64_t call_steps) const {
  if (b <= a) return 0.0;
  const int64_t calls = (b - a + call_steps - 1) / call_steps;
  // The calls that end by the first end take the fused path; the rest, the lengths path.
  const int64_t fused_calls =
      b <= first_end_step ? calls : std::max<int64_t>(0, first_end_step - a) / call_steps;
  return double(calls) * op_seconds + double(calls - fused_calls) * ended_call_seconds;
}

CostModel CostModel::uniform(int64_t time_steps, double forward_s, double forward_grad_s,
                             double backward_s, int64_t tape_b, int64_t state_b,
                             int64_t fixed_b) {
  TORCH_CHECK(time_steps >= 1, "cost model: expected T >= 1, got ", time_steps);
  CostModel m;
  const auto T = size_t(time_steps);
  m.forward_seconds.assign(T, forward_s);
  m.forward_grad_seconds.assign(T, forward_grad_s);
  m.backward_seconds.assign(T, backward_s);
  m.tape_bytes.assign(T, tape_b);
  m.backward_transient_bytes.assign(T, 0);
  m.advance_transient_bytes.assign(T, 0);
  m.state_bytes.assign(T + 1, state_b);
  m.state_bytes[0] = 0;
  m.fixed_bytes = fixed_b;
  m.source = "synthetic (uniform)";
  m.check();
  return m;
}

CostPrefix::CostPrefix(const CostModel& m) {
  const size_t T = m.forward_seconds.size();
  forward.assign(T + 1, 0.0);
  forward_grad.assign(T + 1, 0.0);
  backward.assign(T + 1, 0.0);
  tape.assign(T + 1, 0);
  backward_transient.assign(T + 1, 0);
  chunk.assign(T + 1, 0);
  for (size_t t = 0; t < T; ++t) {
    chunk[t + 1] = chunk[t] + (m.chunk_steps > 0 ? m.chunk_transient_bytes[t] : 0);
    forward[t + 1] = forward[t] + m.forward_seconds[t];
    forward_grad[t + 1] = forward_grad[t] + m.forward_grad_seconds[t];
    backward[t + 1] = backward[t] + m.backward_seconds[t];
    tape[t + 1] = tape[t] + m.tape_bytes[t];
    backward_transient[t + 1] = backward_transient[t] + m.backward_transient_bytes[t];
  }
  window = m.backward_window_steps;
  if (window > 0) {
    for (int64_t t = 0; t + window <= int64_t(T); ++t) {
      max_window_transient = std::max(max_window_transient, backward_transient_b(t, t + window));
    }
    if (window > int64_t(T)) max_window_transient = backward_transient_b(0, int64_t(T));
  }
  chunk_steps = m.chunk_steps;
  whole_call_steps = m.whole_call_steps;
  head_step = m.head_backward_step_bytes;
  chunk_call = m.chunk_call_bytes;
  packed_step = m.packed_step_bytes;
  chunk_context = m.chunk_step_context_bytes;
  if (chunk_steps > 0) {
    const int64_t W = std::min<int64_t>(chunk_steps, int64_t(T));
    for (int64_t t = 0; t + W <= int64_t(T); ++t) {
      max_chunk_transient = std::max(max_chunk_transient, chunk[size_t(t + W)] - chunk[size_t(t)]);
    }
  }
}

int64_t CostPrefix::tape_transient_b(int64_t a, int64_t b) const {
  if (chunked(b)) {  // NOTE [ Chunked backward of a variable-length batch ]
    // A one-step tape has no per-step weight gradients to sum: no chunk_call.
    const int64_t call = b - a >= 2 ? chunk_call : 0;
    int64_t best = std::max(head_step * (b - a), call);
    const int64_t largest = std::max(max_chunk_transient + chunk_context, call);
    for (int64_t c = b; c > a; --c) {
      const int64_t freed = tape[size_t(b)] - tape[size_t(c)];
      if (freed >= largest) break;  // no chunk needs more than what is freed by now
      const int64_t needs = std::max(
          call, chunk_context + chunk[size_t(c)] - chunk[size_t(std::max(a, c - chunk_steps))]);
      best = std::max(best, needs - freed);
    }
    return best;
  }
  if (window <= 0 || b - a <= window) return backward_transient_b(a, b);
  int64_t best = 0;
  for (int64_t t = a; t + window <= b; ++t) {
    best = std::max(best, backward_transient_b(t, t + window));
  }
  return best;
}

}  // namespace vlrnn::schedule
