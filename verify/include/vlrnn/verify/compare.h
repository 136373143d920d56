#pragma once
// Snapshots of what a gradient method produced, and their comparison with a reference.
// Relative differences are per tensor: max |got - ref| / max |ref| (so a tensor of tiny
// entries is not judged by its noise), and the worst tensor is named.

#include "vlrnn/methods/gradient_method.h"

#include <string>
#include <utility>
#include <vector>

namespace vlrnn::verify {

struct GradientSnapshot {
  // ("loss", ...), ("grad model.lstm.weight_ih_l0", ...), ("grad h0[0]", ...),
  // ("grad inputs", ...), ("final_state[0]", ...), all detached copies.
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  StepCounters counters;
};

// Zeros every gradient, runs `method` on `workload`, and copies out everything it produced.
GradientSnapshot run_and_snapshot(GradientMethod& method, const Workload& workload);

struct Difference {
  double max_abs = 0.0;          // over every tensor
  double max_rel = 0.0;          // over every tensor, each relative to its own max |ref|
  std::string worst;             // the tensor with the largest max_rel
  double grad_rel_error = 0.0;   // ||g - g_ref|| / ||g_ref|| over all parameter gradients
  double grad_cosine = 1.0;      // cosine similarity of the same two vectors
};

// Throws when the two snapshots do not hold the same tensors with the same shapes.
Difference compare(const GradientSnapshot& got, const GradientSnapshot& reference);

// The relative tolerance for exact methods: 1e-10 in float64, 1e-5 in float32; in bfloat16
// and float16, where one rounding moves a result by more than that (a bfloat16 nn.GRU's
// gradients: 1.2e-2 between VLRNN and full BPTT), 4 ε of the dtype: 3.1e-2 and 3.9e-3.
double tolerance_for(torch::ScalarType dtype);

// "float64", "float32", "bfloat16", "float16"; c10's name for another dtype.
std::string dtype_name(torch::ScalarType dtype);

}  // namespace vlrnn::verify
