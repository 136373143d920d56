#pragma once
// Peak memory of one gradient step. On CPU: exact bytes of live tensors from the tracking
// allocator (vlrnn/measure/cpu_memory_tracker.h, installed on first use). On CUDA (builds
// with VLRNN_WITH_CUDA): the caching allocator's allocated-bytes statistics, peak reset
// before the step. Either way the process's peak RSS comes along as a second figure.
//
//   start_bytes ──step──> peak_bytes;  step_peak_bytes = peak_bytes - start_bytes
//
// The step peak is what the step needs on top of what was live before it (parameters,
// inputs, ...), so it does not depend on what else the process holds.

#include "vlrnn/methods/gradient_method.h"

#include <torch/torch.h>

namespace vlrnn::measure {

struct StepMemory {
  int64_t start_bytes = 0;      // tensor bytes live when the step began
  int64_t peak_bytes = 0;       // the most tensor bytes live at any moment of the step
  int64_t end_bytes = 0;        // tensor bytes live when it ended
  int64_t step_peak_bytes = 0;  // peak_bytes - start_bytes
  int64_t peak_rss_bytes = -1;  // process VmHWM at the end (-1: unavailable)
  bool rss_peak_reset = false;  // false: peak_rss_bytes is the process's lifetime peak
};

// Opens a step: resets the peaks and notes the bytes live. finish() closes it.
// One scope at a time per device (the peaks are process-wide).
class StepMemoryScope {
 public:
  explicit StepMemoryScope(torch::Device device);
  StepMemory finish();

 private:
  torch::Device device_;
  StepMemory memory_;
};

// Bytes of the workload's own tensors — parameters of model and head, inputs, targets,
// lengths and h0 — each storage counted once: the baseline a step starts from.
int64_t workload_bytes(const Workload& workload);

}  // namespace vlrnn::measure
