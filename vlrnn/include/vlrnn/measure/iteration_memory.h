#pragma once
// Peak memory of one iteration. On CPU: exact bytes of live tensors from the tracking
// allocator (vlrnn/measure/cpu_memory_tracker.h, installed on first use). On CUDA (builds
// with VLRNN_WITH_CUDA): the caching allocator's allocated-bytes statistics, peak reset
// before the step. Either way the process's peak RSS comes along as a second figure.
//
//   start_bytes ──step──> peak_bytes;  iteration_peak_bytes = peak_bytes - start_bytes
//
// The iteration peak is what the step needs on top of what was live before it (parameters,
// inputs, ...), so it does not depend on what else the process holds.
//
// NOTE [ Nested iteration scopes ]
// The peak counters (tracked bytes, the CUDA allocator's peak, VmHWM) are process-wide, and
// opening a scope resets them. A scope opened while another is open (the planner measuring
// its cost model inside a measured step) is a measurement of its own, not part of the
// enclosing step: the enclosing scope keeps the peak it had seen before the nested one
// opened, and after the nested one closes it sees only what the nested region left live.
// So the enclosing iteration's peak is the same whether or not a nested measurement ran inside
// it (a cold planner reports the same iteration peak as a warm one), and no scope resets another's
// peak. A scope leaves the CPU tracker installed only if it was installed before it opened.

#include "vlrnn/methods/gradient_method.h"

#include <torch/torch.h>

namespace vlrnn::measure {

struct IterationMemory {
  int64_t start_bytes = 0;      // tensor bytes live when the step began
  int64_t peak_bytes = 0;       // the most tensor bytes live at any moment of the step
  int64_t end_bytes = 0;        // tensor bytes live when it ended
  int64_t iteration_peak_bytes = 0;  // peak_bytes - start_bytes
  int64_t peak_rss_bytes = -1;  // process VmHWM at the end (-1: unavailable)
  bool rss_peak_reset = false;  // false: peak_rss_bytes is the process's lifetime peak
};

// Opens a step: resets the peaks and notes the bytes live. finish() closes it (so does
// the destructor, when an exception skipped finish()). Scopes nest (NOTE [ Nested
// iteration scopes ]); they are not meant to be opened from two threads at once.
class IterationMemoryScope {
 public:
  explicit IterationMemoryScope(torch::Device device);
  ~IterationMemoryScope();
  IterationMemoryScope(const IterationMemoryScope&) = delete;
  IterationMemoryScope& operator=(const IterationMemoryScope&) = delete;

  IterationMemory finish();

 private:
  void close();
  // The device's peak tensor bytes since the last reset, and the reset itself.
  int64_t device_peak_bytes() const;
  void reset_device_peak() const;

  torch::Device device_;
  IterationMemory memory_;
  IterationMemoryScope* enclosing_ = nullptr;  // the scope open when this one opened
  int64_t carried_peak_bytes_ = 0;        // peaks seen before nested scopes reset the counters
  int64_t carried_peak_rss_bytes_ = -1;
  bool installed_tracker_ = false;        // this scope installed the CPU tracker
  bool open_ = true;
};

// Bytes of the workload's own tensors — parameters of model and head, inputs, targets,
// lengths and h0 — each storage counted once: the baseline a step starts from.
int64_t workload_bytes(const Workload& workload);

}  // namespace vlrnn::measure
