#include "lib/max_batch.h"

#include "lib/units.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/measure/iteration_measurement.h"

#include <fmt/format.h>

#include <map>

namespace vlrnn::experiments {

int64_t search_max_batch(int64_t start, int64_t limit, int64_t multiple,
                         const std::function<bool(int64_t)>& fits) {
  TORCH_CHECK(multiple >= 1, "batch_multiple: expected >= 1, got ", multiple);
  TORCH_CHECK(start >= 1 && limit >= start, "batch_start, batch_max: expected 1 <= start <= max, "
              "got ", start, " and ", limit);
  std::map<int64_t, bool> seen;
  auto probe = [&](int64_t b) {
    auto it = seen.find(b);
    if (it == seen.end()) it = seen.emplace(b, fits(b)).first;
    return it->second;
  };
  const int64_t first = (start + multiple - 1) / multiple * multiple;
  const int64_t last = limit / multiple * multiple;
  if (first > last || !probe(first)) return 0;
  int64_t lo = first, hi = 0;  // lo fits; hi (when set) does not
  while (hi == 0) {
    if (lo >= last) return lo;
    const int64_t next = std::min(lo * 2, last);
    if (probe(next)) lo = next; else hi = next;
  }
  while (hi - lo > multiple) {
    int64_t mid = (lo + hi) / 2 / multiple * multiple;
    if (mid <= lo) mid = lo + multiple;
    if (probe(mid)) lo = mid; else hi = mid;
  }
  return lo;
}

std::string describe(const BatchProbe& probe) {
  return fmt::format("B={} {} {}", probe.batch,
                     probe.total_bytes >= 0 ? format_bytes(double(probe.total_bytes))
                                            : std::string("out of memory"),
                     probe.fits ? "fits" : "over budget");
}

BatchProbe probe_budget(GradientMethod& method, const Workload& workload, int64_t budget_bytes,
                        torch::Device device) {
  auto& tracker = measure::CpuMemoryTracker::instance();
  BatchProbe probe;
  probe.batch = workload.batch.batch_size();
  const int64_t saved_limit = tracker.limit();
  try {
    const int64_t data = measure::workload_bytes(workload);
    if (data > budget_bytes) {
      probe.total_bytes = data;  // the data alone is over budget
      return probe;
    }
    // What the method measures about the workload (the planner's cost model and its check
    // of the budget) is not the iteration: it runs before the cap, which it would trip.
    method.prepare(workload);
    if (device.is_cpu()) {
      // The step may add at most budget - data on top of what is live now.
      int64_t cap = tracker.current_bytes() + (budget_bytes - data) + 1;
      if (saved_limit > 0) cap = std::min(cap, saved_limit);
      tracker.set_limit(cap);
    }
    const auto measured = measure::measure_iteration(method, workload, device);
    tracker.set_limit(saved_limit);
    probe.total_bytes = data + measured.memory.iteration_peak_bytes;
    probe.fits = probe.total_bytes <= budget_bytes;
  } catch (const std::exception& e) {
    tracker.set_limit(saved_limit);
    if (!measure::is_out_of_memory(e)) throw;
    probe.fits = false;  // total_bytes stays -1: it ran out before finishing
  }
  return probe;
}

MaxBatchOutcome find_max_batch(const ProblemSpec& base, const std::string& method,
                               const ExperimentSpec& experiment, double peak_flops_per_second,
                               const std::function<void(const std::string&)>& progress) {
  MaxBatchOutcome out;
  const int64_t budget = experiment.budget_bytes;
  auto fits = [&](int64_t batch) {
    ProblemSpec spec = base;
    spec.batch = batch;
    const auto problem = make_problem(spec);
    auto m = make_method_from_spec(method);
    auto probe = probe_budget(*m, problem.workload(), budget, spec.device);
    probe.batch = batch;
    if (progress) {
      progress("  probe " + describe(probe));
    }
    out.probes.push_back(probe);
    return probe.fits;
  };
  out.batch = search_max_batch(experiment.batch_start, experiment.batch_max,
                               experiment.batch_multiple, fits);
  out.problem = base;
  out.problem.batch = out.batch;
  if (out.batch > 0) {
    RunOptions options;
    options.warmup = experiment.warmup;
    options.repeats = experiment.repeats;
    options.peak_flops_per_second = peak_flops_per_second;
    options.gradient_error = false;
    const auto problem = make_problem(out.problem);
    out.run = run_methods(problem, {method}, options).front();
  }
  return out;
}

}  // namespace vlrnn::experiments
