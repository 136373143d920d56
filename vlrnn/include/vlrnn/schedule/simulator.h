#pragma once
// Predicts a schedule's peak memory and time from a cost model, without running anything.
//
//   live = fixed + stored states (h0 excluded) + tapes (their steps; a kept tape's exit
//          and own bytes) + parameter gradients from the first backward on
//   forward_no_grad(a, b): peak candidate live - iteration.reversal_bytes + the largest advance
//                          chunk's transient (and call.advance_op_bytes) + state b; then state
//                          b is stored
//   forward_grad(a, b):    live grows by the tape of [a, b), and by state b and
//                          call.kept_tape_bytes when a later op starts from it (NOTE [ Kept
//                          tapes ]; its own bytes leave again when it is reversed)
//   backward(a, b):        peak candidate live + CostModel::PerBackward::call_bytes (the
//                          sums of a tape of >= 2 steps; after the first backward, the
//                          larger of those and backward.later_bytes)
//                          + the head's gradient over [a, b) + Σ transient over [a, b)
//                            (+ a buffer of at most W steps: NOTE [ Backward windows ];
//                            or, where sequences end inside it, the most any run between
//                            ends needs: NOTE [ Backward in runs ] in cost_model.h);
//                          and, for a tape of >= 2 steps after the first backward, at
//                          least live + backward.floor_bytes + the transient of its first
//                          kFloorTapeSteps steps (NOTE [ A later backward's floor ]); then
//                          the tape is freed
//   time = Σ per-step seconds of every op + per-call seconds (CostModel::calls_seconds:
//          one call per tape or backward, one per advance chunk)
//          + call.tape_growth_seconds · n² per tape of n steps
//          + call.tape_growth_seconds · 2·n·k per tape of n steps run while k steps of other
//            tapes are alive (kept tapes: NOTE [ Kept tapes ])

#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/schedule.h"

namespace vlrnn::schedule {

struct Prediction {
  int64_t peak_bytes = 0;  // the iteration peak (bytes above parameters + data)
  int64_t peak_op = -1;    // the op at which it happens (-1: fixed bytes alone)
  double seconds = 0.0;
  ScheduleCounts counts;
};

// Validates the schedule, checks the model and that both have the same T.
Prediction simulate(const Schedule& schedule, const CostModel& model);

}  // namespace vlrnn::schedule
