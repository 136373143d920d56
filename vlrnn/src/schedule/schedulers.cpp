#include "vlrnn/schedule/schedulers.h"

#include "vlrnn/methods/block.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace vlrnn::schedule {

Schedule uniform_schedule(int64_t time_steps, int64_t block_length) {
  TORCH_CHECK(time_steps >= 1, "uniform schedule: expected T >= 1, got ", time_steps);
  TORCH_CHECK(block_length >= 1, "uniform schedule: expected a block length K >= 1, got ",
              block_length);
  const int64_t K = std::min(block_length, time_steps);
  const int64_t blocks = (time_steps + K - 1) / K;  // N
  Schedule s;
  s.time_steps = time_steps;
  s.name = fmt::format("uniform(K={})", K);
  // Pass 1 without grad: the entry of every block but the first (h0) and the last's exit.
  for (int64_t b = 1; b < blocks; ++b) s.ops.push_back(Op::forward_no_grad((b - 1) * K, b * K));
  // Pass 2, last block to first; a block's entry is dropped once it is back-propagated.
  for (int64_t b = blocks - 1; b >= 0; --b) {
    const int64_t t0 = b * K, t1 = std::min(time_steps, t0 + K);
    s.ops.push_back(Op::forward_grad(t0, t1));
    s.ops.push_back(Op::backward(t0, t1));
    if (b > 0) s.ops.push_back(Op::free(t0));
  }
  return s;
}

Schedule sqrt_checkpoint_schedule(int64_t time_steps) {
  TORCH_CHECK(time_steps >= 1, "sqrt schedule: expected T >= 1, got ", time_steps);
  const auto segments = sqrt_steps(time_steps);
  auto s = uniform_schedule(time_steps, (time_steps + segments - 1) / segments);
  s.name = fmt::format("sqrt(S={})", segments);
  return s;
}

int64_t binomial_beta(int64_t slots, int64_t repetitions) {
  if (slots < 0 || repetitions < 0) return 0;
  // C(s + t, s) = prod_{i=1..min} (max + i) / i, exact at every step of the product.
  const int64_t k = std::min(slots, repetitions), n = slots + repetitions;
  __int128 value = 1;
  for (int64_t i = 1; i <= k; ++i) {
    value = value * (n - k + i) / i;
    if (value > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  }
  return int64_t(value);
}

int64_t binomial_repetitions(int64_t time_steps, int64_t slots) {
  TORCH_CHECK(slots >= 1, "revolve slots: expected s >= 1, got ", slots);
  if (slots == 1) return std::max<int64_t>(time_steps - 1, 0);  // β(1, t) = t + 1, in O(1)
  int64_t t = 0;
  while (binomial_beta(slots, t) < time_steps) ++t;
  return t;
}

int64_t binomial_forward_steps(int64_t time_steps, int64_t slots) {
  TORCH_CHECK(slots >= 1, "revolve slots: expected s >= 1, got ", slots);
  if (time_steps <= 1) return 0;
  if (slots == 1) return time_steps * (time_steps - 1) / 2;
  const int64_t t = binomial_repetitions(time_steps, slots);
  return t * time_steps - binomial_beta(slots + 1, t - 1);
}

std::vector<int64_t> revolve_slot_counts(int64_t time_steps) {
  TORCH_CHECK(time_steps >= 1, "revolve slot counts: expected T >= 1, got ", time_steps);
  std::vector<int64_t> counts;
  for (int64_t slots = 2; slots <= kRevolveMaxSlots; ++slots) {
    if (binomial_forward_steps(time_steps, slots) > kRevolveMaxRecomputation * time_steps) {
      continue;
    }
    counts.push_back(slots);
    if (binomial_repetitions(time_steps, slots) <= 1) break;
  }
  return counts;
}

namespace {

// Reverses steps [a, b) with state a stored, δh at b and `slots` slots (a's included).
void revolve(int64_t a, int64_t b, int64_t slots, std::vector<Op>& ops) {
  const int64_t l = b - a;
  if (l == 1) {
    ops.push_back(Op::forward_grad(a, b));
    ops.push_back(Op::backward(a, b));
    return;
  }
  if (slots == 1) {
    // One slot (a's): every step is recomputed from a, last to first.
    for (int64_t t = b - 1; t >= a; --t) {
      if (t > a) ops.push_back(Op::forward_no_grad(a, t));
      ops.push_back(Op::forward_grad(t, t + 1));
      ops.push_back(Op::backward(t, t + 1));
      if (t > a) ops.push_back(Op::free(t));
    }
    return;
  }
  // NOTE [ Binomial split ]: advance m steps to a new checkpoint, reverse [a + m, b) with one
  // slot fewer, then [a, a + m) with all of them. With t = binomial_repetitions(l, s), any m
  // in [max(l − β(s−1, t), β(s, t−2)), min(β(s, t−1), l − β(s−1, t−1))] reaches Griewank's
  // minimum (checked against the exhaustive recursion for s <= 7, l < 400).
  const int64_t t = binomial_repetitions(l, slots);
  const int64_t lo = std::max(l - binomial_beta(slots - 1, t), binomial_beta(slots, t - 2));
  const int64_t hi = std::min(binomial_beta(slots, t - 1), l - binomial_beta(slots - 1, t - 1));
  const int64_t m = std::clamp(std::max<int64_t>(lo, 1), int64_t(1), std::max<int64_t>(1, std::min(hi, l - 1)));
  ops.push_back(Op::forward_no_grad(a, a + m));
  revolve(a + m, b, slots - 1, ops);
  ops.push_back(Op::free(a + m));
  revolve(a, a + m, slots, ops);
}

}  // namespace

Schedule revolve_schedule(int64_t time_steps, int64_t slots) {
  TORCH_CHECK(time_steps >= 1, "revolve schedule: expected T >= 1, got ", time_steps);
  TORCH_CHECK(slots >= 1, "revolve slots: expected s >= 1 state slots (h0's included), got ",
              slots);
  Schedule s;
  s.time_steps = time_steps;
  s.name = fmt::format("revolve(s={})", slots);
  revolve(0, time_steps, slots, s.ops);
  return s;
}

}  // namespace vlrnn::schedule
