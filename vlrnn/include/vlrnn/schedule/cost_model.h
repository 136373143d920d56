#pragma once
// The cost model the simulator and the planner read: plain data, per step so that a chain
// may be heterogeneous (variable-length batches: later steps have fewer active sequences and
// cost less; a head whose cost differs from the cell's), and checking itself.
// Shapes: T steps; per-step vectors have T entries, state_bytes has T + 1 (state 0 = h0 is
// the caller's and costs nothing to store).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace vlrnn::schedule {

struct CostModel {
  // Seconds per step.
  std::vector<double> forward_seconds;       // [T] model only, no autograd (a recomputation)
  std::vector<double> forward_grad_seconds;  // [T] model + head with autograd (taping)
  std::vector<double> backward_seconds;      // [T] back-propagating the step's tape
  double op_seconds = 0.0;                   // fixed cost of one forward / backward call
  // Long tapes run slower per step (memory traffic: their activations leave the caches and
  // are freshly allocated): a tape of n steps costs tape_growth_seconds · n² on top of its
  // per-step seconds. That is tape_growth_seconds per step taped or back-propagated, per
  // step of tape alive at that moment, the count by which a kept tape is priced too: it
  // slows every step taped and back-propagated while it lives (NOTE [ Kept tapes ]).
  double tape_growth_seconds = 0.0;

  // Bytes.
  std::vector<int64_t> tape_bytes;                // [T] activations a taped step keeps
  std::vector<int64_t> backward_transient_bytes;  // [T] extra live while its tape is reversed
  std::vector<int64_t> advance_transient_bytes;   // [T] extra live per step of an advance chunk
  std::vector<int64_t> state_bytes;               // [T + 1] a stored state (tensors + RNG)
  int64_t tape_op_bytes = 0;      // per tape whatever its length (loss, exit state, ...)
  // Per backward call of a tape of two or more steps, whatever its length: autograd sums a
  // weight's per-step gradients in buffers; a one-step tape has no sums and no such bytes.
  int64_t backward_op_bytes = 0;
  // Extra bytes of every backward call after the first: parameter gradients exist by then,
  // so autograd computes the new ones in buffers and adds them in (the first call hands its
  // buffers over as the gradients). For one-step tapes and for longer ones.
  int64_t accumulate_single_bytes = 0;
  int64_t accumulate_bytes = 0;
  // Live for the whole iteration: parameter gradients, per-step losses, the dL/dx
  // buffer, δh, h0's zeros when absent, the validated targets' copy, generator snapshots.
  int64_t fixed_bytes = 0;
  // Parameter gradients: allocated by the first backward call, live from then on.
  int64_t gradient_bytes = 0;
  // NOTE [ Backward windows ]: 0 = a tape's backward transient is the sum of its steps'.
  // n > 0 = a model that runs a long tape in chunks (the built-in LibTorch modules on a
  // variable-length batch: NOTE [ Packed chunks ]) frees one chunk's transient before the
  // next: a tape longer than n steps needs the largest sum over n consecutive steps of it.
  int64_t backward_window_steps = 0;
  // The steps were measured on a variable-length batch (NOTE [ Variable lengths are measured
  // on the batch ] in cost_measurement.cpp), not fitted on full ones.
  bool lengths_profiled = false;

  std::string source;  // how it was obtained ("measured on ...", "synthetic")

  int64_t time_steps() const { return int64_t(forward_seconds.size()); }
  // Throws naming the field when sizes disagree or a value is negative or not finite.
  void check() const;

  // Per-step sums over [a, b) (prefix sums built on first use would be faster; callers in
  // hot loops use CostPrefix).
  static CostModel uniform(int64_t time_steps, double forward_s, double forward_grad_s,
                           double backward_s, int64_t tape_b, int64_t state_b,
                           int64_t fixed_b = 0);
};

// Prefix sums of a cost model: O(1) sums over any range of steps.
struct CostPrefix {
  explicit CostPrefix(const CostModel& model);
  std::vector<double> forward, forward_grad, backward;  // [T + 1]
  std::vector<int64_t> tape, backward_transient;         // [T + 1]
  double forward_s(int64_t a, int64_t b) const { return forward[b] - forward[a]; }
  double forward_grad_s(int64_t a, int64_t b) const { return forward_grad[b] - forward_grad[a]; }
  double backward_s(int64_t a, int64_t b) const { return backward[b] - backward[a]; }
  int64_t tape_b(int64_t a, int64_t b) const { return tape[b] - tape[a]; }
  int64_t backward_transient_b(int64_t a, int64_t b) const {
    return backward_transient[b] - backward_transient[a];
  }
  // The backward transient of a tape [a, b) (NOTE [ Backward windows ]), exact: O(b - a).
  int64_t tape_transient_b(int64_t a, int64_t b) const;
  // An upper bound of it in O(1), for the planner's inner loops: beyond a window, the
  // largest window sum anywhere in the chain.
  int64_t tape_transient_bound(int64_t a, int64_t b) const {
    const int64_t sum = backward_transient_b(a, b);
    return window <= 0 || b - a <= window ? sum : std::min(sum, max_window_transient);
  }
  int64_t window = 0;                // backward_window_steps
  int64_t max_window_transient = 0;  // the largest sum over `window` consecutive steps
};

}  // namespace vlrnn::schedule
