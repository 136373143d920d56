#pragma once
// One verification case: a model, head and batch built from a seed, a gradient method, and
// its comparison with full BPTT on the same weights, data and generator state. The matrix
// (matrix.h), the random set (random_cases.h), `vlrnn verify` and the verifier's own
// mutation tests all run cases through run_case(); a user's own model goes through
// verify_against_full() (verify_model.h).

#include "vlrnn/verify/compare.h"
#include "vlrnn/verify/cut_dependence.h"

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace vlrnn::verify {

struct VerifyCase {
  std::string model = "lstm";  // a model kind (make_model)
  std::string model_label;     // the model's part of name() (empty: kind x layers)
  int64_t num_layers = 1;
  double dropout = 0.0;        // between stacked layers (models with several layers)
  std::string head = "ce";     // "ce" or "mse"
  std::string method = "vlrnn:block_length=7";  // a method spec (vlrnn/registry/methods.h)
  std::string reduction = "mean";
  torch::ScalarType dtype = torch::kFloat64;
  // true: a call inside a stream: h0 requires grad, and a random dL/d(final state) seeds
  // the call (Workload::final_state_grad); false: h0 absent (zeros, no grad), no seed.
  bool h0_with_grad = true;
  bool inputs_with_grad = true;  // false: no dL/dx is asked for
  // Empty: every sequence has all T steps. Otherwise one length per sequence (B of them,
  // 1 <= len <= T), the padding filled with nan (-1 for class targets) so that any leak into
  // a valid step fails the case.
  std::vector<int64_t> lengths;
  // Empty: no resets. Otherwise, per sequence, the steps where a new segment starts
  // (NOTE [ Resets ] in vlrnn/core/sequence.h; resets_from_segment_starts()).
  std::vector<std::vector<int64_t>> segment_starts;
  int64_t time_steps = 28, batch = 3, input_size = 4, hidden_size = 5;
  uint64_t seed = 1234;
  // Where both runs happen. The weights, data and h0 are drawn on the CPU from `seed`, then
  // moved, so a case is the same problem on every device.
  torch::Device device = torch::kCPU;

  // "lstmx3+drop0.3/ce/mean/f64/h0=grad/T=28/var": model, head, reduction, dtype, h0 mode,
  // "/x=none" when no dL/dx is asked for, T and the lengths mode ("/var" lengths reaching T,
  // "/tail" all ending before T), "/resets" with resets, and "/cuda:0" off the CPU.
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
  std::string error;      // set when the case threw
  std::string diagnosis;  // on a failure: a likely cause in plain words, when one is found
  std::string rerun;      // a command line that reruns just this case (random cases)
};

// What a case may run instead of what its spec names: the verifier's own tests inject
// deliberately broken methods and models through the same path `vlrnn verify` uses.
struct CaseInjection {
  // Makes the method under test (spec.method still labels the row).
  std::function<std::unique_ptr<GradientMethod>(const VerifyCase&)> make_method;
  // Wraps the model built from the spec; full BPTT and the method both run the wrapped one.
  std::function<std::shared_ptr<RecurrentModule>(std::shared_ptr<RecurrentModule>)> wrap_model;
};

// Runs full BPTT and `method` on `workload` from the same generator state (seeded with
// `seed`) and compares loss, per-step losses, every gradient and the final state. Fills
// diff, tolerance, exact, passed and, on a failure, diagnosis. Throws what the methods throw.
VerifyOutcome verify_against_full(GradientMethod& method, const Workload& workload,
                                  uint64_t seed);

// Builds the model, head and data from `spec.seed` and verifies spec.method (or what
// `injection` supplies) against full BPTT. Never throws: errors land in `error`.
VerifyOutcome run_case(const VerifyCase& spec, const CaseInjection& injection = {});

// The case's model, data and h0 checked for cut dependence (cut_dependence.h) from the
// generator state its methods start from: once per model is enough for the warning that a
// pass here does not carry over (`vlrnn verify --model` runs it on its first case). Throws
// what building the case or the model's forward throws.
CutDependence case_cut_dependence(const VerifyCase& spec, const CaseInjection& injection = {});

}  // namespace vlrnn::verify
