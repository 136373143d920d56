#pragma once
// The verification matrix: every exact method against full BPTT over models × block
// lengths × reductions × dtypes × initial-state modes.

#include "vlrnn/verify/case.h"

#include <string>
#include <vector>

namespace vlrnn::verify {

// The default matrix: every method in the registry other than "full" (the reference), each
// with its option variants (vlrnn: K ∈ {1, 2, 7, 5, T, T + 12}; checkpoint: S ∈ {1, 2,
// sqrt(T), T} with the head inside, and sqrt(T) with it outside; tbptt: k ∈ {1, 7, T} and
// (k1, k2) = (4, 10); revolve: s = 3; online: s = 3; planner: 1% of full's peak, raised to
// the minimum)
// × models {rnn, gru, lstm x1, lstm x3, gru_lstm, and lstm x3 and gru_lstm with dropout}
// × {sum, mean} × {float64, float32} × {h0 with grad, h0 absent} × lengths {all T; B = 4
// of lengths {17, T, 1, 4}; B = 4 of lengths {17, 9, 1, 4}, a padded tail no sequence
// reaches}. Plus the hand-written cells (gru_v1 .. gru_v4, gru_v4 x2 with dropout, lstm_block
// x1 and x3 with dropout) and the linear recurrences (mingru, minlstm x2 with dropout, lru,
// ssm; vlrnn/cells/linear_recurrence.h) on a reduced grid: the option variants
// whose last value is 1, 7 or T (e.g. K ∈ {1, 7, T}), with the same other axes.
std::vector<VerifyCase> default_matrix();

// The shapes and axes of model_matrix(), at a user's sizes. The defaults give the reduced
// grid at T = 28 described there.
struct ModelGrid {
  int64_t time_steps = 28;  // T
  // B; 0: 3 sequences of all T steps, and 4 in the variable-length sets ({17, T, 1, 4} and
  // {17, 9, 1, 4} at T = 28). Set: every set has B sequences, its lengths the same pattern
  // scaled to T ({ceil(0.6 T), T, 1, ceil(T / 7)} and {ceil(0.6 T), T / 3, 1, ceil(T / 7)},
  // repeated over B), the second left out where it would not end before T.
  int64_t batch = 0;
  // > 0 (at most 1): instead of the three length sets, one batch whose lengths are drawn
  // uniformly from [ceil(f T), T], one of them T (f = 1: every sequence T long).
  double min_length = 0.0;
  std::vector<torch::ScalarType> dtypes = {torch::kFloat64, torch::kFloat32};
  // Method specs to verify, as given ("full", the reference, is left out); empty: every
  // method but "full" with the reduced grid's option variants.
  std::vector<std::string> methods;
  // The rows' name for the model (e.g. a model file's name, not its whole path); empty: the
  // kind.
  std::string label;
  std::string head = "ce";  // a head kind: "ce", or a user's (e.g. a head file's)
};

// One model kind (a built-in, one added with add_model(), a plugin's or a TorchScript
// file's) on the hand-written cells' reduced grid: every method but "full" × {sum, mean}
// × {float64, float32} × {h0 with grad, h0 absent} × the three length sets, one layer;
// `grid` sets T, B, the lengths, the dtypes, the methods and the head (a head kind: "ce",
// or a user's, e.g. a head file's). The cases take F from the model (a model file fixes
// its own) and H from the head when it reads a fixed Z (a head file); a model whose H
// differs from that Z is an error naming both. `vlrnn verify --model KIND`, `--model-file
// PATH` and `--head-file PATH` run it. Throws naming the field on a bad grid (T or B < 1,
// min_length outside (0, 1], no dtype).
std::vector<VerifyCase> model_matrix(const std::string& kind, const ModelGrid& grid = {});

}  // namespace vlrnn::verify
