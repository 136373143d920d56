#pragma once
// Measures a cost model (cost_model.h) on a workload, on its own device, from a few short
// runs: exact bytes from IterationMemoryScope, times from the device timer (median of repeats).
//
// NOTE [ Fitting the cost model ]
// Each phase (advance without grad, forward with grad, backward, and the head alone) runs on
// the first n1 and n2 steps of the batch, every sequence active. Per-step costs are the
// slopes between the two lengths; the intercepts are per-call costs (op_seconds,
// tape_op_bytes, backward_op_bytes). A step with A of B sequences active (variable lengths)
// takes head + cell · A / B seconds: the built-in models run only the active sequences, while
// the head runs on the padded batch. Its bytes stay those of a full step (the packed path's
// copies eat the saving; see the .cpp). Bytes that live for the whole step and the
// backward's per-call buffers are calibrated end to end on the executor itself
// (NOTE [ Calibrating the peak end to end ] in the .cpp).

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/cost_model.h"

namespace vlrnn::schedule {

struct CostMeasureOptions {
  int64_t short_steps = 4;  // n1
  int64_t long_steps = 12;  // n2 (> n1)
  int64_t repeats = 3;      // timed runs per phase (median)
};

// `workload` as GradientMethod::compute_impl sees it (validated, h0 filled in). Leaves the
// parameters' gradients as they were and the generators where they were.
CostModel measure_cost_model(const Workload& workload, const CostMeasureOptions& options = {});

}  // namespace vlrnn::schedule
