#pragma once
// The planner: given a memory budget in bytes and a cost model, the schedule with the least
// predicted time whose predicted peak fits — recomputation nested at several levels.
//
// NOTE [ Planner DP ]
// Gruslys et al. (2016) in Rotor's form: C(i, j, m) = least time to reverse super-steps
// [i, j) from their entry, with δh at their end and m memory units held by ancestors. The
// choices: tape the whole range where it fits; advance to a split k, store its state (one
// unit), reverse [k, j) with m + 1 units, free it, reverse [i, k) with m; or keep the tape of
// [i, k) (NOTE [ Kept tapes ] in schedule.h) while [k, j) is reversed. So the time falls
// smoothly with the budget down to a whole tape, full BPTT. A unit is the largest state, or
// budget / kMaxMemoryUnits when larger; the DP then overcharges states, so it also runs with
// states only and keeps the faster. To stay tractable it coarsens the chain into super-steps
// and caps units and states (the approximations: docs/methods.md, "In depth"). Its schedules
// are simulated beside uniform blocks and revolve, and the fastest that fits wins.

#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/schedule.h"
#include "vlrnn/schedule/simulator.h"

namespace vlrnn::schedule {

constexpr int64_t kMaxSuperSteps = 128;
constexpr int64_t kMaxStates = 127;
constexpr int64_t kMaxInnerStates = 48;
// With kept tapes the table has a memory axis of its own: fewer, longer super-steps keep
// it as fast as the DP with states only.
constexpr int64_t kMaxKeptSuperSteps = 64;
constexpr int64_t kMaxMemoryUnits = 128;

struct Plan {
  Schedule schedule;
  Prediction prediction;
  std::string chosen_by;  // "dp", "dp (states)", "uniform" or "revolve"
  int64_t parameter = 0;  // uniform: its block length K; revolve: its slots s
};

// The smallest budget any schedule can run in under `model`: the fixed bytes, one stored
// state and the largest one-step tape being reversed (or the largest advance chunk).
int64_t minimum_budget(const CostModel& model);

// The least-time uniform schedule (K over all of 1..T when T <= 4096, a dense candidate set
// beyond) whose predicted peak fits `budget_bytes`; throws when none fits.
Plan best_uniform(const CostModel& model, int64_t budget_bytes);

// The planner (NOTE [ Planner DP ]). Throws, stating minimum_budget(), when the budget is
// below it.
Plan plan(const CostModel& model, int64_t budget_bytes);

// The DP's own schedule (no comparison with uniform / revolve): for tests and reports.
// keep_tapes = false: stored states only, charged exactly (the DP before kept tapes).
Schedule dp_schedule(const CostModel& model, int64_t budget_bytes, bool keep_tapes = true);

}  // namespace vlrnn::schedule
