#pragma once
// One measured gradient step: its time, its memory and the method's counters.

#include "vlrnn/measure/step_memory.h"
#include "vlrnn/methods/gradient_method.h"

#include <torch/torch.h>

namespace vlrnn::measure {

struct StepMeasurement {
  double seconds = 0.0;  // wall clock of compute(), device synchronized at both ends
  StepMemory memory;
  StepCounters counters;
};

// Drops every gradient the workload's tensors hold (parameters, h0, inputs), so that the
// next step allocates them afresh and their memory counts in its peak, for every method
// alike.
void clear_gradients(const Workload& workload);

// GradientMethod::prepare() (outside the measurement: NOTE [ Preparing is not the step ]),
// clear_gradients(), then one GradientMethod::compute() inside a memory scope and a timer.
// The result tensors are released before the memory scope closes their accounting: the
// step's peak already saw them.
StepMeasurement measure_step(GradientMethod& method, const Workload& workload,
                             torch::Device device);

}  // namespace vlrnn::measure
