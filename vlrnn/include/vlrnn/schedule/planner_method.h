#pragma once
// "planner": the fastest exact BPTT that fits a memory budget. prepare() measures the
// workload's cost model (cost_measurement.h), plans (planner.h) and checks the plan's
// measured peak against the budget, planning again with the error it measured until it
// fits (NOTE [ A budget is a promise ] in the .cpp); compute() runs the plan with the
// schedule executor (schedule_method.h), preparing first only when prepare() has not seen a
// workload of this signature. A bidirectional model (vlrnn/core/bidirectional.h) has no
// left-to-right schedules to plan: on one the planner runs bivlrnn under the same budget,
// which chooses its block length by measurement (NOTE [ Choosing K under a budget ] in
// bidirectional_vlrnn.h).

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/bidirectional_vlrnn.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/planner.h"

#include <memory>
#include <optional>
#include <string>

namespace vlrnn::schedule {

struct PlannerOptions {
  // Budget for the measured iteration peak (bytes above parameters + data): a hard cap. 0 = use
  // budget_percent. Below the smallest budget the planner can honour, prepare() throws
  // naming that budget.
  int64_t budget_bytes = 0;
  // Budget as a percentage of full BPTT's iteration peak on this batch, variable lengths included
  // (used when budget_bytes is 0), raised to the smallest budget the planner can honour
  // when below it.
  double budget_percent = 10.0;
  // Plan with this cost model instead of measuring the workload's (a synthetic one, or one
  // measured elsewhere); its T must be the workload's. The plan's measured peak is checked
  // all the same (NOTE [ A budget is a promise ]), so a wrong model costs speed, never the
  // budget.
  std::optional<CostModel> cost_model;
};

// The cost model of `workload` (validated), measured on first use on this machine (or read
// from the disk cache a previous process left: NOTE [ Cost models on disk ] in
// cost_model_cache.h) and then reused for every workload with the same cost-model signature
// (shapes, dtype, device, whether it has lengths, which tensors want gradients, the model's
// structure and the head), priced for the batch's own lengths (NOTE [ Other batches of the
// workload ] in cost_model.cpp): drivers that predict a plan (vlrnn budget) and the planner
// method that runs it then see the same model and so the same plan. Bounded and thread-safe
// (NOTE [ Cost-model cache ] in the .cpp).
CostModel measured_cost_model(const Workload& workload);
// How many cost models the cache holds now (at most a fixed bound).
size_t cached_cost_models();
// How many times measured_cost_model() found no model in this process's cache and read one
// from disk or measured it, since the process started.
size_t cost_model_cache_misses();

// The full-BPTT peak percent=P refers to on `workload`, whose cost model is `model` (NOTE [
// Percent of full BPTT ] in the .cpp).
int64_t full_bptt_reference(const CostModel& model, const Workload& workload);

// Plans and measured checks per prepare() before the planner gives up.
constexpr int64_t kPlanChecks = 6;

class PlannerMethod : public GradientMethod {
 public:
  explicit PlannerMethod(PlannerOptions options = {});
  std::string name() const override { return "planner"; }
  std::string describe() const override;

  // The budget in bytes for `workload`, whose cost model is `model` (budget_bytes, or the
  // percentage of full's peak) as asked, before any raise to the smallest the planner can
  // honour.
  int64_t budget_for(const CostModel& model, const Workload& workload) const;

  // After prepare() on a left-to-right model: the plan, the budget it was checked against (a percentage's, raised
  // when needed), its measured iteration peak and the margin the planner measured (the
  // relative amount by which the simulator under-predicted on this workload, 0 if never).
  // On a bidirectional model the plan is empty, the budget and the peak are bivlrnn's
  // (its chosen K is in describe()) and the margin 0.
  const Plan& current_plan() const { return plan_; }
  int64_t checked_budget_bytes() const { return budget_; }
  int64_t checked_peak_bytes() const { return checked_peak_; }
  double margin() const { return margin_; }
  // The cost model the plan was chosen from (empty before prepare() and on a bidirectional
  // model).
  const CostModel& cost_model() const { return model_; }

 protected:
  // Measures the workload's cost model (or takes it from the cache) and plans.
  void prepare_impl(const Workload& workload) override;
  GradientResult compute_impl(const Workload& workload) override;

 private:
  // Plans within `budget`, checking measured peaks (NOTE [ A budget is a promise ]).
  void plan_within(const Workload& workload, int64_t budget);
  // NOTE [ A budget is a promise ]'s checks at `budget`, raised to the smallest budget they
  // find honoured: returns that budget, the plan and its check kept; throws when none fits.
  int64_t honoured_budget(const Workload& workload, int64_t budget);

  PlannerOptions options_;
  std::unique_ptr<BidirectionalVlrnn> bidirectional_;  // bivlrnn, made on a bidirectional model
  std::string signature_;  // the workload the cached model and plan were made for
  CostModel model_;
  Plan plan_;
  int64_t asked_budget_ = 0;  // budget_for the prepared workload
  int64_t budget_ = 0, checked_peak_ = 0;
  double margin_ = 0.0;
};

}  // namespace vlrnn::schedule
