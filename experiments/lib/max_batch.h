#pragma once
// The "max batch under a memory budget" experiment, VLRNN's central claim in one number:
// in the same memory a method that needs less per sequence fits a larger batch, and a
// larger batch uses the device better. For each method: the largest batch B whose
// workload (parameters + data) plus iteration peak stays within the budget, then the
// throughput (useful FLOP/s, sequences/s) measured at that B.

#include "lib/method_runner.h"
#include "lib/sweep_config.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace vlrnn::experiments {

// The largest multiple of `multiple` in [start, limit] for which `fits` holds, given that
// `fits` is monotone (true up to some batch, false beyond): doubling from `start` (rounded
// up to a multiple), then bisection between the last batch that fit and the first that did
// not. 0 when `start` does not fit. Each batch is probed at most once.
int64_t search_max_batch(int64_t start, int64_t limit, int64_t multiple,
                         const std::function<bool(int64_t)>& fits);

struct BatchProbe {
  int64_t batch = 0;
  int64_t total_bytes = -1;  // workload + iteration peak; -1 when the step ran out of memory
  bool fits = false;
};

// One iteration of `method` on `workload`, judged against `budget_bytes` (the workload's
// own bytes plus the iteration peak). On CPU the tracking allocator's limit stops the
// iteration as soon as it passes the budget; running out of memory means it does not fit.
BatchProbe probe_budget(GradientMethod& method, const Workload& workload, int64_t budget_bytes,
                        torch::Device device);

// "B=59 31.6 MiB fits", "B=64 out of memory over budget": one probe, for progress lines.
std::string describe(const BatchProbe& probe);

struct MaxBatchOutcome {
  int64_t batch = 0;  // 0: not even batch_start fits
  std::vector<BatchProbe> probes;
  ProblemSpec problem;  // at `batch`
  std::optional<MethodRun> run;  // timed at `batch`
};

// Probes one iteration per batch (on CPU the tracking allocator's limit stops a probe as soon as
// it passes the budget, so failed probes are cheap), then times `method` at the best batch
// with `experiment`'s warm-up and repeats.
MaxBatchOutcome find_max_batch(const ProblemSpec& base, const std::string& method,
                               const ExperimentSpec& experiment, double peak_flops_per_second,
                               const std::function<void(const std::string&)>& progress);

}  // namespace vlrnn::experiments
