#pragma once
// The verification matrix: every exact method against full BPTT over models × block
// lengths × reductions × dtypes × initial-state modes.

#include "vlrnn/verify/compare.h"

#include <ostream>
#include <string>
#include <vector>

namespace vlrnn::verify {

struct VerifyCase {
  std::string model = "lstm";  // a model kind (vlrnn/core/models.h)
  int64_t num_layers = 1;
  double dropout = 0.0;        // between stacked layers (models with several layers)
  std::string head = "ce";     // "ce" or "mse"
  std::string method = "vlrnn:block=7";  // a method spec (vlrnn/registry/methods.h)
  std::string reduction = "mean";
  torch::ScalarType dtype = torch::kFloat64;
  bool h0_with_grad = true;    // false: h0 absent (zeros, no grad)
  // A batch of B = 4 sequences of lengths {17, T, 1, 4} (in that order: unsorted, one of
  // length 1, one shorter than most blocks, one of length T), padded with nan.
  bool variable_lengths = false;
  int64_t time_steps = 28, batch = 3, input_size = 4, hidden_size = 5;
  uint64_t seed = 1234;

  std::string name() const;
};

// For GoogleTest's parameter printing: the case's name and method.
inline void PrintTo(const VerifyCase& c, std::ostream* out) { *out << c.name() << " " << c.method; }

struct VerifyOutcome {
  VerifyCase spec;
  Difference diff;
  double tolerance = 0.0;
  bool exact = true;  // false: an approximate method, reported and never failed
  bool passed = false;
  std::string error;  // set when the case threw
};

// The default matrix: every method in the registry other than "full" (the reference), each
// with its option variants (vlrnn: K ∈ {1, 2, 7, 5, T, T + 12}; checkpoint: S ∈ {1, 2,
// sqrt(T), T} with the head inside, and sqrt(T) with it outside; tbptt: k ∈ {1, 7, T} and
// (k1, k2) = (4, 10); uniform: K = 5; revolve: s = 3; planner: 1% of full's peak, raised to
// the minimum; sqrt: its default) × models {rnn, gru, lstm x1, lstm x3, gru_lstm, and lstm x3 and
// gru_lstm with dropout} × {sum, mean} × {float64, float32} × {h0 with grad, h0 absent} ×
// {fixed lengths, variable lengths}.
// Plus the GRU variants gru_v1 .. gru_v4 on a reduced grid: the option variants whose last
// value is 1, 7 or T (e.g. K ∈ {1, 7, T}), with the same other axes.
std::vector<VerifyCase> default_matrix();

// Builds the model, head and data from `spec.seed`, runs full BPTT and `spec.method` on the
// same weights and data, and compares them. Never throws: errors land in `error`.
VerifyOutcome run_case(const VerifyCase& spec);

}  // namespace vlrnn::verify
