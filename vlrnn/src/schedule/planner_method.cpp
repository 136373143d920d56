#include "vlrnn/schedule/planner_method.h"

#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <list>
#include <mutex>

namespace vlrnn::schedule {
namespace {

// What the cost model depends on: shapes, dtype, device, which tensors want gradients, the
// lengths (active sequences per step), and the model and head themselves (their structure:
// gru and gru_v1 .. gru_v4 have the same parameter shapes and different costs).
std::string signature(const Workload& w) {
  const auto& x = w.batch.inputs;
  std::string s = fmt::format("{} {} {} x_grad={} h0_grad={} mean={}", fmt::join(x.sizes(), "x"),
                              c10::toString(x.scalar_type()), x.device().str(),
                              x.requires_grad(), w.h0.requires_grad(),
                              w.reduction == Reduction::kMean);
  int64_t head_params = 0;
  for (const auto& p : w.head.parameters()) head_params += p.numel();
  s += fmt::format(" model={} head={}:{}:{}", w.model.describe(), w.head.name(), head_params,
                   w.head.input_size());
  if (w.batch.has_lengths()) {
    s += fmt::format(" lengths={}", fmt::join(std::vector<int64_t>(
        w.batch.lengths.data_ptr<int64_t>(),
        w.batch.lengths.data_ptr<int64_t>() + w.batch.lengths.numel()), ","));
  }
  return s;
}

// NOTE [ Cost-model cache ]: measuring a cost model takes a few short runs of the workload,
// so the planner and `vlrnn budget` share one per workload signature. The cache holds the
// kCostModelCacheSize most recently used models, and one mutex guards it: two threads
// asking for the same signature measure it once (measurement is not concurrent anyway: the
// peak counters it reads are process-wide).
constexpr size_t kCostModelCacheSize = 16;

struct CostModelCache {
  std::mutex mutex;
  std::list<std::pair<std::string, CostModel>> entries;  // most recently used first
};

CostModelCache& cost_model_cache() {
  static CostModelCache cache;
  return cache;
}

}  // namespace

CostModel measured_cost_model(const Workload& workload) {
  const auto sig = signature(workload);
  auto& cache = cost_model_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto it = cache.entries.begin(); it != cache.entries.end(); ++it) {
    if (it->first == sig) {
      cache.entries.splice(cache.entries.begin(), cache.entries, it);
      return it->second;
    }
  }
  // NOTE [ Nested iteration scopes ]: calibration is not the step. Inside a scope of its own,
  // what it allocates and frees does not count toward a step being measured around it.
  measure::IterationMemoryScope calibration(workload.batch.inputs.device());
  cache.entries.emplace_front(sig, measure_cost_model(workload));
  if (cache.entries.size() > kCostModelCacheSize) cache.entries.pop_back();
  return cache.entries.front().second;
}

size_t cached_cost_models() {
  auto& cache = cost_model_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.entries.size();
}

PlannerMethod::PlannerMethod(PlannerOptions options) : options_(options) {
  TORCH_CHECK(options.budget_bytes >= 0, "planner budget: expected a number of bytes >= 1, got ",
              options.budget_bytes);
  TORCH_CHECK(options.budget_bytes > 0 ||
                  (std::isfinite(options.budget_percent) && options.budget_percent > 0),
              "planner percent: expected a percentage of full BPTT's peak > 0, got ",
              options.budget_percent);
}

std::string PlannerMethod::describe() const {
  if (options_.budget_bytes > 0) return fmt::format("planner(budget={})", options_.budget_bytes);
  return fmt::format("planner({}% of full)", options_.budget_percent);
}

int64_t PlannerMethod::budget_for(const CostModel& model) const {
  if (options_.budget_bytes > 0) return options_.budget_bytes;
  const auto full = simulate(uniform_schedule(model.time_steps(), model.time_steps()), model);
  // A percentage is a convenience (verify, quick comparisons): it never goes below the
  // smallest feasible budget. A budget in bytes is taken as given and may be refused.
  return std::max(minimum_budget(model),
                  int64_t(double(full.peak_bytes) * options_.budget_percent / 100.0));
}

void PlannerMethod::prepare_impl(const Workload& workload) {
  const auto sig = signature(workload);
  if (sig != signature_) {
    model_ = measured_cost_model(workload);
    const int64_t budget = budget_for(model_);
    // NOTE: a budget in bytes is checked against the minimum as given, then planned with
    // kPlanningMargin (the simulator's error); never below the minimum.
    TORCH_CHECK(budget >= minimum_budget(model_), "planner budget: ", budget,
                " bytes is below the smallest feasible schedule, which needs ",
                minimum_budget(model_), " bytes; raise budget to at least ",
                minimum_budget(model_));
    plan_ = plan(model_, std::max(minimum_budget(model_),
                                  int64_t(kPlanningMargin * double(budget))));
    signature_ = sig;
  }
}

GradientResult PlannerMethod::compute_impl(const Workload& workload) {
  prepare_impl(workload);  // a no-op when prepare() saw this workload already
  return execute_schedule(plan_.schedule, workload);
}

}  // namespace vlrnn::schedule
