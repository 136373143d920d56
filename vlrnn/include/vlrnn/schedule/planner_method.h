#pragma once
// "planner": the fastest exact BPTT predicted to fit a memory budget. prepare() measures the
// workload's cost model (cost_measurement.h) and plans (planner.h); compute() runs the plan
// with the schedule executor (schedule_method.h), preparing first only when prepare() has
// not seen a workload of this signature.

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/planner.h"

#include <string>

namespace vlrnn::schedule {

struct PlannerOptions {
  // Budget for the iteration peak (bytes above parameters + data). 0 = use budget_percent.
  int64_t budget_bytes = 0;
  // Budget as a percentage of full BPTT's predicted iteration peak (used when budget_bytes is 0),
  // raised to minimum_budget() when below it.
  double budget_percent = 10.0;
};

// The cost model of `workload` (validated), measured on first use in this process and then
// reused for every workload with the same signature (shapes, dtype, device, lengths, which
// tensors want gradients, the model's structure and the head): drivers that predict a plan
// (vlrnn budget) and the planner method that runs it then see the same model and so the
// same plan. Bounded and thread-safe (NOTE [ Cost-model cache ] in the .cpp).
CostModel measured_cost_model(const Workload& workload);
// How many cost models the cache holds now (at most a fixed bound).
size_t cached_cost_models();

class PlannerMethod : public GradientMethod {
 public:
  explicit PlannerMethod(PlannerOptions options = {});
  std::string name() const override { return "planner"; }
  std::string describe() const override;

  // The budget in bytes for `model` (budget_bytes, or the percentage of full's peak).
  int64_t budget_for(const CostModel& model) const;

 protected:
  // Measures the workload's cost model (or takes it from the cache) and plans.
  void prepare_impl(const Workload& workload) override;
  GradientResult compute_impl(const Workload& workload) override;

 private:
  PlannerOptions options_;
  std::string signature_;  // the workload the cached model and plan were made for
  CostModel model_;
  Plan plan_;
};

}  // namespace vlrnn::schedule
