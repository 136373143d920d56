#pragma once
// Running a stretch of steps whose sequences may restart inside it (NOTE [ Resets ] in
// core/sequence.h): the one mechanism run_model() and both directions of a bidirectional
// model use. Shapes: n = steps in the stretch, B = batch.

#include "vlrnn/core/state.h"

#include <functional>
#include <utility>
#include <vector>

namespace vlrnn {

// Where a stretch restarts: `at` [n, B] bool, true where the state entering step i of the
// stretch (in the order the steps run) is the sequence's initial state; `initial` holds it
// (shaped as the state, batch at each spec's batch_dim). Undefined `at`: no restart.
struct Restarts {
  torch::Tensor at;
  State initial;
  bool any() const { return at.defined(); }
};

// `state` with the sequences of `rows` ([B] bool) replaced by `initial`'s: a select, so no
// gradient flows back across the restart, and `initial` gets it instead.
State restarted(const State& state, const torch::Tensor& rows, const State& initial,
                const std::vector<StateSpec>& specs);

// Runs steps [a, a + m) from an entry state: (z [m, B, Z], exit).
using StretchRunner = std::function<std::pair<torch::Tensor, State>(int64_t a, int64_t m,
                                                                    const State& entry)>;

// Steps [0, n) from `entry`, by `run`, in pieces cut at the steps where some sequence
// restarts, each such sequence's state restarted before its step: (z [n, B, Z] in the
// order the steps ran, exit).
std::pair<torch::Tensor, State> run_with_restarts(int64_t n, const Restarts& restarts,
                                                  const std::vector<StateSpec>& specs,
                                                  const State& entry, const StretchRunner& run);

}  // namespace vlrnn
