#include "vlrnn/schedule/planner_method.h"

#include "vlrnn/core/bidirectional.h"
#include "vlrnn/measure/iteration_measurement.h"
#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/methods/progress.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/cost_model_cache.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <list>
#include <mutex>

namespace vlrnn::schedule {

namespace {

// NOTE [ Cost-model cache ]: measuring a cost model takes a few short runs of the workload,
// so the planner and `vlrnn budget` share one per cost-model signature: in this process, the
// kCostModelCacheSize most recently used models; across processes, the files of NOTE [ Cost
// models on disk ] (cost_model_cache.h), read when this process has none and written when
// it measured one. A batch of other lengths, or of another number of steps, is priced from
// the model of another batch of its shapes (NOTE [ Other batches of the workload ] in
// cost_model.cpp), so a training run over shuffled or padded batches measures once. A kept
// model that cannot price a batch (measured where no sequence ends, or on fewer steps than
// the batch has and fewer than kLongestMeasuredTape) is replaced by one measured on it. One
// mutex guards both caches: two threads asking for the same signature measure it once
// (measurement is not concurrent anyway: the peak counters it reads are process-wide).
constexpr size_t kCostModelCacheSize = 16;

// What a missed plan check adds to the planning margin beyond the miss it measured
// (PlannerMethod::honoured_budget): 0.5 %.
constexpr double kMarginStep = 0.005;

struct CostModelCache {
  std::mutex mutex;
  std::list<std::pair<std::string, CostModel>> entries;  // most recently used first
  size_t misses = 0;  // lookups that found no model here (read from disk or measured)
};

CostModelCache& cost_model_cache() {
  static CostModelCache cache;
  return cache;
}

// A batch's steps as its cost depends on them: how many, and how many sequences run at
// each (active_sequences_of: empty without lengths).
struct BatchSteps {
  int64_t time_steps = 0;
  std::vector<int64_t> active;  // [time_steps] or empty
  explicit BatchSteps(const SequenceBatch& batch)
      : time_steps(batch.time_steps()), active(active_sequences_of(batch)) {}
};

bool prices(const CostModel& model, const BatchSteps& batch) {
  return model.prices_batch(batch.time_steps, batch.active);
}

// The model on disk for `workload` (whose batch has steps `batch`), or one measured now and
// stored there.
CostModel measured_or_stored(const Workload& workload, const BatchSteps& batch) {
  const auto dir = cost_model_cache_dir();
  const auto key = cost_model_key(workload);
  if (dir) {
    auto stored = load_cost_model(*dir, key);
    if (stored && prices(*stored, batch)) return *stored;
  }
  // NOTE [ Nested iteration scopes ]: calibration is not the step. Inside a scope of its own,
  // what it allocates and frees does not count toward a step being measured around it.
  measure::IterationMemoryScope calibration(workload.batch.inputs.device());
  auto model = measure_cost_model(workload);
  if (dir) store_cost_model(*dir, key, model);
  return model;
}

}  // namespace

CostModel measured_cost_model(const Workload& workload) {
  const auto sig = cost_model_signature(workload);
  const BatchSteps batch(workload.batch);
  auto& cache = cost_model_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto it = cache.entries.begin(); it != cache.entries.end(); ++it) {
    if (it->first != sig) continue;
    if (prices(it->second, batch)) {
      cache.entries.splice(cache.entries.begin(), cache.entries, it);
      return it->second.for_batch(batch.time_steps, batch.active);
    }
    cache.entries.erase(it);  // it cannot price this batch: one measured on it replaces it
    break;
  }
  ++cache.misses;
  cache.entries.emplace_front(sig, measured_or_stored(workload, batch));
  if (cache.entries.size() > kCostModelCacheSize) cache.entries.pop_back();
  return cache.entries.front().second.for_batch(batch.time_steps, batch.active);
}

size_t cost_model_cache_misses() {
  auto& cache = cost_model_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.misses;
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
  if (bidirectional_ && !signature_.empty()) return "planner: " + bidirectional_->describe();
  if (options_.budget_bytes > 0) return fmt::format("planner(budget={})", options_.budget_bytes);
  // Once prepared, a percentage raised to the smallest budget the planner can honour says so.
  if (!signature_.empty() && budget_ > asked_budget_) {
    return fmt::format("planner({}% of full, raised to {} bytes: the smallest it can honour)",
                       options_.budget_percent, budget_);
  }
  return fmt::format("planner({}% of full)", options_.budget_percent);
}

int64_t PlannerMethod::budget_for(const CostModel& model, const Workload& workload) const {
  if (options_.budget_bytes > 0) return options_.budget_bytes;
  return int64_t(double(full_bptt_reference(model, workload)) * options_.budget_percent / 100.0);
}

// NOTE [ Percent of full BPTT ]: percent=P promises at most P % of full BPTT's measured peak on
// this very batch, so the reference must never be above that peak. The cost model prices the
// executor, which holds a little more than plain full BPTT whatever the schedule
// (executor_bytes_beyond_full_bptt: the per-step loss buffer, the loss it sums and one generator
// snapshot), so those bytes are taken off. With every sequence T steps long the reference is then
// the simulator's peak of one tape over the batch: within a few percent, and exact to some bytes
// up to kLongestMeasuredTape. On a variable-length batch that prediction errs high as often as
// low (NOTE [ Backward in runs ] in cost_model.h), so the reference there is what full certainly
// holds at once early in its backward: the fixed bytes, its whole tape but one step (NOTE
// [ Variable lengths are measured on the batch ]) and the buffers that sum each weight's
// gradient over the steps. A lower bound of its peak, so the budget stays within P %.
int64_t full_bptt_reference(const CostModel& model, const Workload& workload) {
  const int64_t T = model.time_steps();
  const int64_t beyond_full = executor_bytes_beyond_full_bptt(workload);
  if (model.active_sequences.empty()) {
    return simulate(uniform_schedule(T, T), model).peak_bytes - beyond_full;
  }
  int64_t tape = 0, largest_step = 0;
  for (const int64_t bytes : model.step.tape_bytes) {
    tape += bytes;
    largest_step = std::max(largest_step, bytes);
  }
  return model.iteration.fixed_bytes + model.iteration.gradient_bytes + tape - largest_step -
         beyond_full;
}

namespace {

// The measured iteration peak of `schedule` on `workload` (measured_iteration_peak).
int64_t measured_peak(const Schedule& schedule, const Workload& workload) {
  ScheduleMethod method("planner check", schedule.name,
                        [&schedule](const Workload&) { return schedule; });
  return measured_iteration_peak(method, workload);
}

}  // namespace

// NOTE [ A budget is a promise ]: the budget caps the iteration peak as measured, not as
// predicted, and the simulator's peak is a prediction. So the planner measures its own
// error on this workload: it plans for budget / (1 + margin), runs the chosen schedule once
// (outside any measured step: prepare(); gradients and generators left as they were) and
// keeps it when its measured peak fits the budget. Otherwise the overshoot it saw, over
// the prediction, becomes the margin (never smaller than before) and it plans again, at
// most kPlanChecks times. The smallest budget it can honour is the smallest schedule's
// predicted peak (minimum_budget) plus that margin. A budget below it is raised to it and
// checked the same way. A percentage stays raised (a convenience: verify's matrix asks for
// 1 %); a budget in bytes is refused naming a budget that a run asking for it is shown to
// honour: the raised one, checked again from the start as such a run checks it (at a
// larger budget the planner may choose another schedule, with another miss).
void PlannerMethod::plan_within(const Workload& workload, int64_t budget) {
  int64_t honoured = honoured_budget(workload, budget);
  if (options_.budget_bytes == 0 || honoured == budget) return;
  const int64_t asked = budget;
  for (int64_t check = 0; check < kPlanChecks; ++check) {
    const int64_t again = honoured_budget(workload, honoured);
    if (again == honoured) break;
    honoured = again;
  }
  TORCH_CHECK(false, "planner budget: ", asked, " bytes is below the smallest budget the "
              "planner can honour on this workload, ", honoured, " bytes (the smallest "
              "schedule's predicted peak, ", minimum_budget(model_), " bytes, plus the ",
              fmt::format("{:.1f}", 100.0 * margin_), " % its predictions missed by here, "
              "measured); raise budget to at least ", honoured);
}

int64_t PlannerMethod::honoured_budget(const Workload& workload, int64_t budget) {
  const int64_t minimum = minimum_budget(model_);
  margin_ = 0.0;
  for (int64_t check = 0; check < kPlanChecks; ++check) {
    budget = std::max(budget, int64_t(std::ceil(double(minimum) * (1.0 + margin_))));
    plan_ = plan(model_, std::max(minimum, int64_t(double(budget) / (1.0 + margin_))));
    budget_ = budget;
    checked_peak_ = measured_peak(plan_.schedule, workload);
    if (checked_peak_ <= budget) return budget;
    // The miss over the prediction, and at least the overshoot over the budget on top of
    // the margin used (the planning budget then shrinks by the overshoot at least, even
    // when the plan was predicted well below it); + kMarginStep: a schedule planned for a
    // smaller budget may miss by a little more.
    margin_ = std::max({margin_,
                        double(checked_peak_) / double(plan_.prediction.peak_bytes) - 1.0,
                        (1.0 + margin_) * double(checked_peak_) / double(budget) - 1.0}) +
              kMarginStep;
  }
  TORCH_CHECK(false, "planner budget: ", budget, " bytes: after ", kPlanChecks, " plans the "
              "last one (", plan_.schedule.name, ") still measured ", checked_peak_,
              " bytes; the smallest budget it can honour is about ",
              int64_t(std::ceil(double(minimum) * (1.0 + margin_))), " bytes");
}

void PlannerMethod::prepare_impl(const Workload& workload) {
  const PausedProgress paused;  // calibration and the budget check are its own runs
  const auto sig = workload_signature(workload);
  if (sig == signature_) return;
  signature_.clear();  // a failed plan leaves nothing behind
  if (as_bidirectional(workload.model)) {
    TORCH_CHECK(!options_.cost_model, "planner cost_model: a bidirectional model has no "
                "left-to-right schedules to plan with one; leave cost_model unset (the planner "
                "runs bivlrnn under the budget)");
    if (!bidirectional_) {
      BidirectionalVlrnnOptions options;
      options.budget_bytes = options_.budget_bytes;
      if (options_.budget_bytes == 0) options.budget_percent = options_.budget_percent;
      bidirectional_ = std::make_unique<BidirectionalVlrnn>(options);
    }
    bidirectional_->prepare(workload);
    plan_ = Plan();
    budget_ = bidirectional_->checked_budget_bytes();
    checked_peak_ = bidirectional_->checked_peak_bytes();
    margin_ = 0.0;
    signature_ = sig;
    return;
  }
  model_ = options_.cost_model ? *options_.cost_model : measured_cost_model(workload);
  TORCH_CHECK(model_.time_steps() == workload.batch.time_steps(), "planner cost_model: "
              "expected one for T = ", workload.batch.time_steps(), " steps, got T = ",
              model_.time_steps());
  asked_budget_ = budget_for(model_, workload);
  plan_within(workload, asked_budget_);
  signature_ = sig;
}

GradientResult PlannerMethod::compute_impl(const Workload& workload) {
  prepare_impl(workload);  // a no-op when prepare() saw this workload already
  if (as_bidirectional(workload.model)) return bidirectional_->compute(workload);
  return execute_schedule(plan_.schedule, workload);
}

}  // namespace vlrnn::schedule
