#pragma once
// The planner: given a memory budget in bytes and a cost model, the schedule with the least
// predicted time whose predicted peak fits — recomputation nested at several levels.
//
// NOTE [ Planner DP ]
// Gruslys et al. (2016) in Rotor's form: C(i, j, m) = least time to reverse super-steps
// [i, j) given their entry available, δh at their end and m memory units held (by this
// range's ancestors: stored states and kept tapes). Choices: tape the whole range (fits when
// m·u + tape + backward transient <= available bytes); advance to a split k, store it,
// reverse [k, j) with m + 1 units, free it, reverse [i, k) with m; or keep the tape of
// [i, k) (NOTE [ Kept tapes ] in schedule.h): forward_grad(i, k), reverse [k, j) from its
// exit with m + (its bytes and one state, in units) held, backward(i, k) (Rotor's
// "store x̄"). Keeping saves the advance over [i, k) for its bytes; storing a state costs
// one unit. So as the budget grows the time falls smoothly down to a whole tape, full
// BPTT, where it fits (or to whatever is predicted faster than it).
// Units: u = the largest state, or budget / kMaxMemoryUnits when that is larger, so a
// state costs one unit and the table stays (N + 1)(N + 2)/2 · (kMaxMemoryUnits + 1), with
// N <= kMaxKeptSuperSteps.
// Where u exceeds a state, the DP charges states more than they hold; the planner then
// also runs the DP with states only (u = a state, no kept tapes) and keeps the faster.
// Tractability (T up to 1e5 and beyond):
//   - the chain is coarsened to at most kMaxSuperSteps super-steps (kMaxKeptSuperSteps
//     with kept tapes; equal step counts);
//     per-step costs inside them are summed exactly (heterogeneous chains: variable lengths,
//     a head costing differently from the cell);
//   - a super-step too long to tape whole is reversed by a homogeneous sub-DP over its
//     steps, H(l, c) = fewest recomputed steps, using the chain's largest per-step bytes
//     (conservative) and a few dozen split candidates per entry (an approximation: exact
//     for l <= 16, geometric candidates beyond);
//   - every stored state is charged the largest state size (states are homogeneous in
//     practice: the same tensors at every step);
//   - units are capped (kMaxMemoryUnits with kept tapes; kMaxStates states only), and so
//     are the states inside a super-step (kMaxInnerStates).
// The DP's schedules are then simulated (simulator.h), together with uniform blocks at
// their best K and revolve at each slot count worth trying (revolve_slot_counts in
// schedulers.h); the fastest predicted that fits wins, so
// the planner is never predicted slower than those.

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
