#pragma once
// One executor for every schedule: a GradientMethod that asks a scheduler for the op list of
// the workload at hand, validates it and runs it exactly (gradients equal full BPTT's, for
// the parameters, h0 and x, dropout and variable lengths included), from the primitives of
// vlrnn/methods/block.h.

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/schedule.h"

#include <functional>
#include <string>

namespace vlrnn::schedule {

// Makes the schedule for a (validated) workload; may measure it (the planner does).
using Scheduler = std::function<Schedule(const Workload&)>;

// NOTE [ Chunked advance ]: a forward_no_grad op over n steps runs the model in chunks of at
// most this many steps, so its transient (the outputs z [n, B, Z] the model returns) stays
// bounded whatever n is; the simulator assumes the same.
constexpr int64_t kAdvanceChunk = 32;

// Runs `schedule` (validated first) on `workload` (validated, h0 filled in).
GradientResult execute_schedule(const Schedule& schedule, const Workload& workload);

// What the executor holds on `workload` that plain full BPTT (baselines/full_bptt.h) does
// not, whatever the schedule: the per-step loss buffer [T, B] and the loss it sums tape by
// tape, where full BPTT returns its one tape's, and the generator snapshot of state 0.
int64_t executor_bytes_beyond_full_bptt(const Workload& workload);

class ScheduleMethod : public GradientMethod {
 public:
  // `name`: the registry name ("vlrnn", "revolve", ...); `description`: with options.
  ScheduleMethod(std::string name, std::string description, Scheduler scheduler);
  std::string name() const override { return name_; }
  std::string describe() const override { return description_; }

 protected:
  GradientResult compute_impl(const Workload& workload) override;

 private:
  std::string name_, description_;
  Scheduler scheduler_;
};

}  // namespace vlrnn::schedule
