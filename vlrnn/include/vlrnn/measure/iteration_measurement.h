#pragma once
// One measured iteration: its time, its memory and the method's counters.

#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/methods/gradient_method.h"

#include <torch/torch.h>

namespace vlrnn::measure {

struct IterationMeasurement {
  double seconds = 0.0;  // wall clock of compute(), device synchronized at both ends
  IterationMemory memory;
  StepCounters counters;
  torch::Tensor loss;  // the iteration's loss (GradientResult::loss): a detached scalar
};

// Drops every gradient the workload's tensors hold (parameters, h0, inputs), so that the
// next step allocates them afresh and their memory counts in its peak, for every method
// alike.
void clear_gradients(const Workload& workload);

// GradientMethod::prepare() (outside the measurement: NOTE [ Preparing is not the step ]),
// clear_gradients(), then one GradientMethod::compute() inside a memory scope and a timer.
// The result tensors are released before the memory scope closes their accounting: the
// iteration's peak already saw them.
IterationMeasurement measure_iteration(GradientMethod& method, const Workload& workload,
                             torch::Device device);

}  // namespace vlrnn::measure
