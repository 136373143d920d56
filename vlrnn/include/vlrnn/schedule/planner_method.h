#pragma once
// "planner": the fastest exact BPTT predicted to fit a memory budget. On first use with a
// workload of a new shape it measures the cost model on it (cost_measurement.h), plans
// (planner.h), and runs the plan with the schedule executor (schedule_method.h).

#include "vlrnn/methods/gradient_method.h"
#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/planner.h"

#include <string>

namespace vlrnn::schedule {

struct PlannerOptions {
  // Budget for the step peak (bytes above parameters + data). 0 = use budget_percent.
  int64_t budget_bytes = 0;
  // Budget as a percentage of full BPTT's predicted step peak (used when budget_bytes is 0),
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
  GradientResult compute_impl(const Workload& workload) override;

 private:
  PlannerOptions options_;
  std::string signature_;  // the workload the cached model and plan were made for
  CostModel model_;
  Plan plan_;
};

}  // namespace vlrnn::schedule
