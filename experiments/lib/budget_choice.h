#pragma once
// What `vlrnn budget` runs under a memory budget, chosen from the cost model before anything
// runs: the planner (prepared on the workload, so it checks its own plan), uniform VLRNN
// blocks at the fastest K predicted to fit, revolve at the fastest slot count predicted to
// fit, and sqrt(T) checkpointing (no budget: the reference point). The command parses its
// lists, calls these, measures the chosen specs and prints; the choices live here so that
// tests reach them. Shapes: T steps.

#include "lib/problem.h"
#include "lib/recorded_plan.h"  // prediction_json

#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/simulator.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace vlrnn::experiments {

// Uniform blocks and revolve are chosen from predictions alone, so they are chosen for this
// fraction of the budget: the simulator's peak is within a few percent of the measured one
// (tests/schedule), not exact. The planner does not use it: it measures its own margin on
// the workload (NOTE [ A budget is a promise ], vlrnn/src/schedule/planner_method.cpp).
constexpr double kPlanningMargin = 0.97;

// The methods `vlrnn budget --methods` knows, in the order their specs run.
const std::vector<std::string>& budget_methods();
// Throws, naming `what` (the option) and the known methods, on a name not among them.
void check_budget_methods(const std::vector<std::string>& methods, const std::string& what);

// One sequence length of a budget run: its problem, cost model and full BPTT's peak, which
// budget fractions refer to.
struct BudgetLength {
  const Problem* problem = nullptr;  // the planner prepares on its workload
  ProblemSpec spec;
  int64_t T = 0;
  schedule::CostModel model;
  schedule::Prediction full_predicted;  // full BPTT (one block of T steps) under `model`
  int64_t full_peak = 0;  // measured (one iteration), or predicted when full is not run
  int64_t minimum = 0;    // the smallest peak the cost model predicts for any schedule
  // A bidirectional model (vlrnn/core/bidirectional.h): no left-to-right schedules, so no
  // cost model (model, full_predicted and minimum stay empty); the planner runs bivlrnn
  // under the budget, "sqrt" is bivlrnn at K = ceil(sqrt(T)), uniform and revolve do not
  // apply (recorded as not fitting, saying why).
  bool bidirectional = false;
};

// Measures the cost model the planner method will plan with (the same, cached) and, unless
// `run_full` is false or full BPTT fails, full's iteration peak on `problem`. On a
// bidirectional model: full's measured peak only (`run_full` must be true: there is no
// cost model to predict it).
BudgetLength measure_length(const Problem& problem, bool run_full);

struct BudgetPoint {
  double fraction = 0;  // of full's peak
  int64_t bytes = 0;
};

// One point per budget in bytes when `budgets` is not empty, else one per fraction of
// `full_peak`.
std::vector<BudgetPoint> budget_points(const std::vector<double>& budgets,
                                       const std::vector<double>& fractions, int64_t full_peak);

// Revolve at one slot count, priced by the cost model.
struct RevolvePoint {
  int64_t slots = 0;
  int64_t recompute_steps = 0;  // Griewank's minimum (binomial_forward_steps)
  schedule::Prediction predicted;
};

// Revolve at every slot count worth trying (schedule::revolve_slot_counts), ascending.
std::vector<RevolvePoint> revolve_curve(const schedule::CostModel& model);

// What each method runs under one budget: the specs to measure (full first when it runs),
// the figure's series name of each spec that differs from its method's registry name
// (VLRNN at the best K is "uniform", at K = sqrt(T) "sqrt"), and per method what was chosen
// ("schedule", "predicted", ...) or, when nothing fits, {"error": why}: the records' "chosen".
struct Choices {
  std::vector<std::string> specs;
  std::map<std::string, std::string> label_of_spec;
  nlohmann::json chosen = nlohmann::json::object();
};

// `methods`: any of budget_methods(); the planner needs `at.problem`.
Choices choose(const std::vector<std::string>& methods, bool run_full, const BudgetLength& at,
               int64_t budget);

}  // namespace vlrnn::experiments
