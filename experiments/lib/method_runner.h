#pragma once
// Measuring gradient methods on one problem: time (warm-up, repeats, median and spread),
// iteration peak memory, peak RSS, useful and recomputed FLOPs, utilization, and the gradient
// error against full BPTT. Methods are interleaved round-robin: each repeat runs every
// method once, so a drift in the machine (another process, clocks) hits all of them alike.

#include "lib/problem.h"

#include "vlrnn/measure/confidence.h"
#include "vlrnn/measure/iteration_memory.h"
#include "vlrnn/measure/timer.h"
#include "vlrnn/verify/compare.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace vlrnn::experiments {

struct MethodRun {
  std::string spec;         // the method spec as run, e.g. "vlrnn:block_length=128"
  std::string name;         // registry name, e.g. "vlrnn"
  std::string description;  // GradientMethod::describe(), e.g. "vlrnn(K=128)"
  // The model kind it ran when it is not the problem's own (compare's METHOD@KIND; records
  // "run_model"): the same weights by name and the same data (make_problem_of_kind in
  // lib/problem.h).
  std::string model;
  bool exact = true;
  std::string status = "ok";  // "ok", "oom" (ran out of memory) or "error"
  std::string error;          // the message when status is not "ok"

  measure::TimingStats time;    // seconds per iteration
  std::vector<double> time_samples;  // every timed step, in round order (paired across methods)
  measure::IterationMemory memory;   // the repeat with the largest iteration peak
  int64_t workload_bytes = 0;   // parameters + data: the baseline under the step
  StepCounters counters;
  measure::IterationFlops flops;
  double useful_flops_per_second = 0.0;
  double utilization = -1.0;        // useful FLOP/s over the peak GEMM rate; -1 = unknown
  double sequences_per_second = 0.0;
  double steps_per_second = 0.0;    // (step, sequence) pairs per second: T·B / time

  // The plan a planner (or a recorded plan) ran: NOTE [ Recorded plans ]; null otherwise.
  nlohmann::json plan;

  std::optional<verify::Difference> error_vs_full;  // absent when not computed
  std::string error_vs_full_note;                   // why it is absent
};

struct RunOptions {
  int64_t warmup = 1;
  int64_t repeats = 3;
  // Until stable: after `repeats` rounds, more rounds until every method's time ratio to full
  // BPTT (its own median time, without full) has a 95 % interval within ±stable_within of
  // its median, or max_repeats rounds ran. 0: exactly `repeats` rounds.
  double stable_within = 0.0;
  int64_t max_repeats = 50;
  double peak_flops_per_second = 0.0;  // 0: utilization is not computed
  bool gradient_error = true;          // also compare each method's gradients with full BPTT
  // Receives one line per run ("full 2/4 ..."); for progress on stderr.
  std::function<void(const std::string&)> progress;
};

// Runs every method of `specs` (registry specs, e.g. "full", "vlrnn:block_length=64") on
// `problem`. A method that runs out of memory or throws gets that status and the others go
// on. Throws only for specs the registry rejects (before anything runs).
std::vector<MethodRun> run_methods(const Problem& problem, const std::vector<std::string>& specs,
                                   const RunOptions& options);
// The same with specs[i] run on problems[i]: problems of one function and one batch (the
// first's, make_problem_of_kind), interleaved round by round like one problem's methods;
// gradients are compared with full BPTT on the first.
std::vector<MethodRun> run_methods(const std::vector<const Problem*>& problems,
                                   const std::vector<std::string>& specs,
                                   const RunOptions& options);

// The median over rounds of run's time / reference's time in the same round. Rounds run
// the methods back to back, so a slow drift of the machine (another process starting)
// cancels in each ratio: on a shared machine this is the robust time ratio. NaN when
// either has no samples or their counts differ.
double paired_time_ratio(const MethodRun& run, const MethodRun& reference);

// paired_time_ratio with its 95 % bootstrap interval over the rounds, and whether the point
// is noisy (NOTE [ Noisy points ] in vlrnn/measure/confidence.h). Median NaN when the two
// runs have no paired samples.
measure::MedianInterval paired_ratio_interval(const MethodRun& run, const MethodRun& reference);

// The fields a record carries for a run's time ratio to full BPTT: paired_time_ratio_to_full,
// paired_time_ratio_ci [low, high] and time_ratio_noisy. Empty when either run failed.
nlohmann::json ratio_json(const MethodRun& run, const MethodRun* full);

// Full BPTT's run among `runs` when it ran to completion, else nullptr: the reference of
// every ratio.
const MethodRun* find_full(const std::vector<MethodRun>& runs);

// JSON for records and --json output.
nlohmann::json to_json(const ProblemSpec& spec);
nlohmann::json to_json(const MethodRun& run);
nlohmann::json to_json(const measure::TimingStats& stats);

}  // namespace vlrnn::experiments
