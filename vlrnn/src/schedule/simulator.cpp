#include "vlrnn/schedule/simulator.h"

#include "vlrnn/schedule/schedule_method.h"

#include <torch/torch.h>

#include <algorithm>

namespace vlrnn::schedule {

Prediction simulate(const Schedule& schedule, const CostModel& model) {
  model.check();
  TORCH_CHECK(schedule.time_steps == model.time_steps(), "simulate: schedule ", schedule.name,
              " has T = ", schedule.time_steps, " steps but the cost model has T = ",
              model.time_steps());
  Prediction p;
  p.counts = schedule.validate();
  const CostPrefix sums(model);
  // A kept tape's exit counts as a stored state (NOTE [ Kept tapes ]), and its own bytes
  // as kept_tape_bytes until it is reversed (then they are reversal_bytes').
  const auto kept = kept_tape_exits(schedule);
  const auto kept_state = [&](int64_t b) {
    return kept[size_t(b)] ? model.step.state_bytes[size_t(b)] : int64_t(0);
  };
  const auto kept_own = [&](int64_t b) {
    return kept[size_t(b)] ? model.call.kept_tape_bytes : int64_t(0);
  };
  int64_t live = model.iteration.fixed_bytes;
  int64_t tape_steps = 0;  // steps of tape alive
  bool later = false;  // true once a backward has run: every call from then on is a later one
  p.peak_bytes = live;
  const auto candidate = [&](int64_t bytes, size_t op) {
    if (bytes > p.peak_bytes) {
      p.peak_bytes = bytes;
      p.peak_op = int64_t(op);
    }
  };
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    const Op& op = schedule.ops[i];
    const int64_t a = op.begin, b = op.end;
    switch (op.kind) {
      case OpKind::kForwardNoGrad: {
        const int64_t chunk_peak = model.advance_transient(a, b, kAdvanceChunk);
        p.seconds += sums.forward_s(a, b) + model.calls_seconds(a, b, kAdvanceChunk);
        // No tape is being reversed.
        candidate(live - model.iteration.reversal_bytes + chunk_peak +
                      model.step.state_bytes[size_t(b)], i);
        live += model.step.state_bytes[size_t(b)];
        break;
      }
      case OpKind::kForwardGrad:
        // Each step taped pays for the tape alive before it: n·k + n(n - 1)/2.
        p.seconds += model.calls_seconds(a, b, b - a) + sums.forward_grad_s(a, b) +
                     model.call.tape_growth_seconds * double(b - a) *
                         (double(tape_steps) + double(b - a - 1) / 2);
        tape_steps += b - a;
        live += sums.tape_b(a, b) + kept_state(b) + kept_own(b);
        candidate(live, i);
        break;
      case OpKind::kBackward:
        // Each step back-propagated pays for the tape alive at it, its own included:
        // n·k + n(n + 1)/2 with k steps of other tapes (n² in all for a lone tape).
        tape_steps -= b - a;
        p.seconds += model.calls_seconds(a, b, b - a) + sums.backward_s(a, b) +
                     model.call.tape_growth_seconds * double(b - a) *
                         (double(tape_steps) + double(b - a + 1) / 2);
        if (!later) live += model.iteration.gradient_bytes;
        live -= kept_own(b);
        candidate(live + model.backward.call_bytes(b - a, later) +
                      sums.tape_transient_b(a, b), i);
        // NOTE [ A later backward's floor ] in cost_measurement.cpp.
        if (later && b - a >= 2) {
          candidate(live + model.backward.floor_bytes +
                        sums.tape_transient_b(a, std::min(b, a + kFloorTapeSteps)), i);
        }
        later = true;
        live -= sums.tape_b(a, b) + kept_state(b);
        break;
      case OpKind::kFree:
        live -= model.step.state_bytes[size_t(a)];
        break;
    }
  }
  return p;
}

}  // namespace vlrnn::schedule
