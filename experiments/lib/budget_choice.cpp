#include "lib/budget_choice.h"

#include "lib/method_runner.h"

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/planner.h"
#include "vlrnn/schedule/planner_method.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace vlrnn::experiments {
namespace {

using nlohmann::json;

// Full's measured iteration peak (one iteration); its prediction when it fails.
int64_t full_peak_bytes(const Problem& problem, const schedule::Prediction& predicted) {
  RunOptions once;
  once.warmup = 0;
  once.repeats = 1;
  once.gradient_error = false;
  const auto runs = run_methods(problem, {"full"}, once);
  return runs[0].status == "ok" ? runs[0].memory.iteration_peak_bytes : predicted.peak_bytes;
}

// The planner as `planner:budget=B` will run it: prepared on the workload, so the record
// holds the schedule it checked against the budget (NOTE [ A budget is a promise ]), its
// measured peak and margin, or its refusal naming the smallest budget it can honour.
void choose_planner(const BudgetLength& at, int64_t budget, Choices& out) {
  TORCH_CHECK(at.problem != nullptr, "budget choice: the planner needs the problem at T = ",
              at.T);
  schedule::PlannerOptions options;
  options.budget_bytes = budget;
  schedule::PlannerMethod planner(options);
  try {
    planner.prepare(at.problem->workload());
  } catch (const c10::Error& e) {
    out.chosen["planner"] = {{"error", e.what_without_backtrace()}};
    return;
  }
  out.specs.push_back(fmt::format("planner:budget={}", budget));
  if (at.bidirectional) {  // bivlrnn under the budget: its K, chosen by measurement
    out.chosen["planner"] = {{"schedule", planner.describe()},
                             {"checked_peak_bytes", planner.checked_peak_bytes()}};
    return;
  }
  out.chosen["planner"] = plan_json(planner);  // NOTE [ Recorded plans ]
}

void choose_uniform(const BudgetLength& at, int64_t budget, Choices& out) {
  try {
    const auto u = schedule::best_uniform(at.model, int64_t(kPlanningMargin * double(budget)));
    out.specs.push_back(fmt::format("vlrnn:block_length={}", u.parameter));
    out.label_of_spec[out.specs.back()] = "uniform";
    out.chosen["uniform"] = {{"schedule", u.schedule.name},
                             {"predicted", prediction_json(u.prediction)}};
  } catch (const c10::Error& e) {
    out.chosen["uniform"] = {{"error", e.what_without_backtrace()}};
  }
}

// Revolve at the fastest predicted slot count that fits.
void choose_revolve(const BudgetLength& at, int64_t budget, Choices& out) {
  std::optional<RevolvePoint> best;
  for (const auto& point : revolve_curve(at.model)) {
    if (point.predicted.peak_bytes <= kPlanningMargin * double(budget) &&
        (!best || point.predicted.seconds < best->predicted.seconds)) {
      best = point;
    }
  }
  if (!best) {
    out.chosen["revolve"] = {{"error", "no slot count fits"}};
    return;
  }
  out.specs.push_back(fmt::format("revolve:slots={}", best->slots));
  out.chosen["revolve"] = {{"slots", best->slots}, {"predicted", prediction_json(best->predicted)}};
}

void choose_sqrt(const BudgetLength& at, Choices& out) {
  if (at.bidirectional) {
    out.specs.push_back(fmt::format("bivlrnn:block_length={}", sqrt_steps(at.T)));
    out.label_of_spec[out.specs.back()] = "sqrt";
    out.chosen["sqrt"] = json::object();
    return;
  }
  const auto p = schedule::simulate(schedule::sqrt_checkpoint_schedule(at.T), at.model);
  out.specs.push_back(fmt::format("vlrnn:num_blocks={}", sqrt_steps(at.T)));
  out.label_of_spec[out.specs.back()] = "sqrt";
  out.chosen["sqrt"] = {{"predicted", prediction_json(p)}};
}

}  // namespace

const std::vector<std::string>& budget_methods() {
  static const std::vector<std::string> names = {"planner", "uniform", "revolve", "sqrt"};
  return names;
}

void check_budget_methods(const std::vector<std::string>& methods, const std::string& what) {
  const auto& known = budget_methods();
  for (const auto& m : methods) {
    TORCH_CHECK(std::find(known.begin(), known.end(), m) != known.end(), what,
                ": expected any of ", fmt::format("{}", fmt::join(known, ",")), ", got \"", m,
                "\"");
  }
}

BudgetLength measure_length(const Problem& problem, bool run_full) {
  BudgetLength at;
  at.problem = &problem;
  at.spec = problem.spec;
  at.T = problem.batch.time_steps();
  if (as_bidirectional(*problem.model)) {
    TORCH_CHECK(run_full, "budget: the bidirectional model ", problem.spec.model, " has no "
                "cost model to predict full BPTT's peak from; drop --no-full");
    at.bidirectional = true;
    at.full_peak = full_peak_bytes(problem, schedule::Prediction());
    TORCH_CHECK(at.full_peak > 0, "budget: full BPTT failed on ", problem.spec.describe(),
                ", and budget fractions of a bidirectional model refer to its measured peak");
    return at;
  }
  at.model = schedule::measured_cost_model(validated(problem.workload()));
  at.full_predicted = schedule::simulate(schedule::uniform_schedule(at.T, at.T), at.model);
  at.minimum = schedule::minimum_budget(at.model);
  at.full_peak = run_full ? full_peak_bytes(problem, at.full_predicted)
                          : at.full_predicted.peak_bytes;
  return at;
}

std::vector<BudgetPoint> budget_points(const std::vector<double>& budgets,
                                       const std::vector<double>& fractions, int64_t full_peak) {
  std::vector<BudgetPoint> points;
  if (!budgets.empty()) {
    for (double b : budgets) points.push_back({b / double(full_peak), int64_t(b)});
  } else {
    for (double f : fractions) points.push_back({f, int64_t(f * double(full_peak))});
  }
  return points;
}

std::vector<RevolvePoint> revolve_curve(const schedule::CostModel& model) {
  const int64_t T = model.time_steps();
  std::vector<RevolvePoint> curve;
  for (const int64_t slots : schedule::revolve_slot_counts(T)) {
    curve.push_back({slots, schedule::binomial_forward_steps(T, slots),
                     schedule::simulate(schedule::revolve_schedule(T, slots), model)});
  }
  return curve;
}

Choices choose(const std::vector<std::string>& methods, bool run_full, const BudgetLength& at,
               int64_t budget) {
  check_budget_methods(methods, "budget methods");
  const auto wants = [&](const char* m) {
    return std::find(methods.begin(), methods.end(), m) != methods.end();
  };
  Choices out;
  if (run_full) out.specs.push_back("full");
  if (wants("planner")) choose_planner(at, budget, out);
  for (const char* method : {"uniform", "revolve"}) {
    if (wants(method) && at.bidirectional) {
      out.chosen[method] = {{"error", "a bidirectional model has no left-to-right schedules "
                                      "(its output at a step reads the whole sequence); the "
                                      "planner runs bivlrnn under the budget"}};
    }
  }
  if (wants("uniform") && !at.bidirectional) choose_uniform(at, budget, out);
  if (wants("revolve") && !at.bidirectional) choose_revolve(at, budget, out);
  if (wants("sqrt")) choose_sqrt(at, out);
  return out;
}

}  // namespace vlrnn::experiments
