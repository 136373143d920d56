#pragma once
// Measures a cost model (cost_model.h) on a workload, on its own device, from a few short
// runs: exact bytes from IterationMemoryScope, times from the device timer (median of repeats).
//
// NOTE [ Fitting the cost model ]
// Each phase (advance without grad, forward with grad, backward, and the head alone) runs on
// the first n1 and n2 steps of the batch, every sequence active. Per-step costs are the
// slopes between the two lengths; the intercepts are per-call bytes (a tape's own bytes, in
// the fixed bytes; backward_op_bytes). Per-call seconds are timed in the executor (NOTE [ What a call
// costs ] in the .cpp): as intercepts they were noise. Bytes that live for the whole step
// and the backward's per-call buffers are calibrated end to end on the executor itself
// (NOTE [ Calibrating the peak end to end ] in the .cpp). A variable-length batch's steps
// are not fitted but measured on the batch itself, 32 steps at a time (NOTE [ Variable
// lengths are measured on the batch ] in the .cpp): what a step with some sequences ended
// costs depends on how the model handles lengths (packed, masked, ...), in time and in
// bytes.

#include "vlrnn/core/rng.h"
#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/cost_model.h"

namespace vlrnn::schedule {

struct CostMeasureOptions {
  int64_t short_steps = 4;  // n1
  int64_t long_steps = 12;  // n2 (> n1)
  int64_t repeats = 3;      // timed runs per phase (median)
};

// Leaves the gradients of the workload's leaves (parameters, h0, inputs, targets) and the
// generators as they were when it was made: calibration and plan checks run gradient steps of
// their own inside a caller's (NOTE [ Preparing is not the step ]).
class SideEffectGuard {
 public:
  explicit SideEffectGuard(const Workload& workload);
  ~SideEffectGuard();
  SideEffectGuard(const SideEffectGuard&) = delete;
  SideEffectGuard& operator=(const SideEffectGuard&) = delete;

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved_;  // (leaf, its .grad() copy)
  RngState rng_;
};

// The measured iteration peak of `method` on `workload`, measured as measure_iteration measures
// a method (gradients cleared first), leaving gradients and generators as they were. The
// caller's step does what this one would not on an already validated workload: it makes
// h0's zeros when h0 was absent (so h0 goes absent here too), and the generator snapshot
// at its start may be new where this one's shares the last capture's storage (counted).
// Inputs and h0 that come out of the caller's graph (an embedding, an encoder) are cut
// from it: the check must not back-propagate into it, nor free it before the real step.
int64_t measured_iteration_peak(GradientMethod& method, const Workload& workload);

// [T] how many of the batch's sequences run at each step; empty when it has no lengths
// (NOTE [ Other batches of the workload ] in cost_model.cpp).
std::vector<int64_t> active_sequences_of(const SequenceBatch& batch);

// `workload` as GradientMethod::compute_impl sees it (validated, h0 filled in). Leaves the
// parameters' gradients as they were and the generators where they were.
CostModel measure_cost_model(const Workload& workload, const CostMeasureOptions& options = {});

}  // namespace vlrnn::schedule
