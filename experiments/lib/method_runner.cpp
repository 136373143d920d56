#include "lib/method_runner.h"

#include "lib/recorded_plan.h"

#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/measure/iteration_measurement.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

namespace vlrnn::experiments {
namespace {

// Fills the derived figures of a successful run from its timings and counters.
void derive(MethodRun& run, const Problem& problem, const RunOptions& options) {
  const auto& s = problem.spec;
  run.flops = measure::iteration_flops(problem.flops, s.time_steps, s.batch, problem.valid_steps(),
                                  run.counters);
  const double seconds = run.time.median;
  run.useful_flops_per_second = run.flops.useful() / seconds;
  run.sequences_per_second = double(s.batch) / seconds;
  run.steps_per_second = double(problem.valid_steps()) / seconds;
  run.utilization = options.peak_flops_per_second > 0
                        ? run.useful_flops_per_second / options.peak_flops_per_second
                        : -1.0;
}

void fail(MethodRun& run, const std::exception& e) {
  run.status = measure::is_out_of_memory(e) ? "oom" : "error";
  run.error = measure::short_message(e);
}

// One method of the run: its instance and its record.
struct Contender {
  const Problem* problem = nullptr;  // the model it runs (the same data for every contender)
  std::unique_ptr<GradientMethod> method;
  MethodRun run;
  std::vector<double> seconds;  // timed iterations, in round order
};

std::vector<Contender> make_contenders(const std::vector<std::string>& specs,
                                       const std::vector<const Problem*>& problems) {
  std::vector<Contender> out(specs.size());
  for (size_t m = 0; m < specs.size(); ++m) {
    auto& c = out[m];
    c.problem = problems[m];
    const auto workload = c.problem->workload();
    c.method = make_method_from_spec(specs[m]);  // throws on an unknown spec
    c.run.spec = specs[m];
    if (c.problem != problems.front()) c.run.model = c.problem->spec.model;
    c.run.name = c.method->name();
    c.run.description = c.method->describe();
    c.run.exact = c.method->is_exact();
    c.run.workload_bytes = measure::workload_bytes(workload);
  }
  return out;
}

// Round r of the interleaved measurement: one iteration of each contender still ok.
void run_round(std::vector<Contender>& contenders, int64_t r, const RunOptions& options) {
  const bool warm_up = r < options.warmup;
  for (auto& c : contenders) {
    auto& run = c.run;
    if (run.status != "ok") continue;  // a method that failed once is not retried
    const auto workload = c.problem->workload();
    const auto device = c.problem->spec.device;
    try {
      const auto measured = measure::measure_iteration(*c.method, workload, device);
      if (!warm_up) {
        c.seconds.push_back(measured.seconds);
        if (c.seconds.size() == 1 || measured.memory.iteration_peak_bytes > run.memory.iteration_peak_bytes) {
          run.memory = measured.memory;
        }
      }
      run.counters = measured.counters;
      if (options.progress) {
        options.progress(fmt::format("{} {} {}/{}: {:.3f} s", run.description,
                                     warm_up ? "warm-up" : "repeat",
                                     warm_up ? r + 1 : r - options.warmup + 1,
                                     warm_up ? options.warmup : std::max(options.repeats, r - options.warmup + 1),
                                     measured.seconds));
      }
    } catch (const std::exception& e) {
      fail(run, e);
      measure::clear_gradients(workload);
      if (options.progress) options.progress(fmt::format("{}: {}", run.description, run.status));
    }
  }
}

// Each ok run's gradients (on its own problem's model) against one snapshot of full BPTT's
// on `problem`; seeded alike so that any random draws (dropout) match, as the verifier does.
void measure_gradient_errors(std::vector<MethodRun>& runs,
                             const std::vector<const Problem*>& problems) {
  const Problem& problem = *problems.front();
  const auto workload = problem.workload();
  std::optional<verify::GradientSnapshot> reference;
  std::string reference_note;
  try {
    auto full = make_method("full");
    torch::manual_seed(problem.spec.seed + 1);
    reference = verify::run_and_snapshot(*full, workload);
  } catch (const std::exception& e) {
    reference_note = "full BPTT failed: " + measure::short_message(e);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& run = runs[i];
    if (run.status != "ok") continue;
    if (!reference) {
      run.error_vs_full_note = reference_note;
      continue;
    }
    try {
      auto method = make_method_from_spec(run.spec);
      torch::manual_seed(problem.spec.seed + 1);
      const auto got = verify::run_and_snapshot(*method, problems[i]->workload());
      run.error_vs_full = verify::compare(got, *reference);
    } catch (const std::exception& e) {
      run.error_vs_full_note = measure::short_message(e);
    }
    measure::clear_gradients(problems[i]->workload());
  }
  measure::clear_gradients(workload);
}

// NaN unless both have the same number of samples.
std::vector<double> paired_ratios(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || a.size() != b.size()) return {};
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) ratios.push_back(a[i] / b[i]);
  return ratios;
}

// Whether every ok contender's time (its ratio to full's when full ran) is known within
// ±within: the stopping rule of RunOptions::stable_within.
bool stable(const std::vector<Contender>& contenders, double within) {
  const Contender* full = nullptr;
  for (const auto& c : contenders) {
    if (c.run.name == "full" && c.run.status == "ok") full = &c;
  }
  for (const auto& c : contenders) {
    if (c.run.status != "ok" || c.seconds.empty()) continue;
    const auto samples = full && &c != full ? paired_ratios(c.seconds, full->seconds) : c.seconds;
    if (samples.empty()) return false;
    const auto interval = measure::median_interval(samples);
    if (interval.samples < measure::MedianInterval::kMinSamples ||
        !(interval.relative_half_width() <= within)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<MethodRun> run_methods(const Problem& problem, const std::vector<std::string>& specs,
                                   const RunOptions& options) {
  return run_methods(std::vector<const Problem*>(specs.size(), &problem), specs, options);
}

std::vector<MethodRun> run_methods(const std::vector<const Problem*>& problems,
                                   const std::vector<std::string>& specs,
                                   const RunOptions& options) {
  TORCH_CHECK(options.repeats >= 1, "repeats: expected >= 1 timed runs, got ", options.repeats);
  TORCH_CHECK(options.warmup >= 0, "warmup: expected >= 0 untimed runs, got ", options.warmup);
  TORCH_CHECK(!specs.empty(), "methods: expected at least one method, got none");
  TORCH_CHECK(problems.size() == specs.size(), "run_methods: expected a problem per method, got ",
              problems.size(), " for ", specs.size());
  TORCH_CHECK(options.stable_within >= 0, "stable_within: expected >= 0 (0: off), got ",
              options.stable_within);
  auto contenders = make_contenders(specs, problems);
  int64_t r = 0;
  for (; r < options.warmup + options.repeats; ++r) run_round(contenders, r, options);
  while (options.stable_within > 0 && r < options.warmup + options.max_repeats &&
         !stable(contenders, options.stable_within)) {
    run_round(contenders, r++, options);
  }
  std::vector<MethodRun> runs;
  for (auto& c : contenders) {
    // After prepare(): a method may now say more (a planner's raised percentage, its plan).
    c.run.description = c.method->describe();
    c.run.plan = ran_plan_json(*c.method);
    if (c.run.status == "ok") {
      c.run.time_samples = c.seconds;
      c.run.time = measure::summarize(c.seconds);
      derive(c.run, *c.problem, options);
    }
    runs.push_back(std::move(c.run));
  }
  if (options.gradient_error) measure_gradient_errors(runs, problems);
  return runs;
}

double paired_time_ratio(const MethodRun& run, const MethodRun& reference) {
  const auto ratios = paired_ratios(run.time_samples, reference.time_samples);
  return ratios.empty() ? NAN : measure::summarize(ratios).median;
}

measure::MedianInterval paired_ratio_interval(const MethodRun& run, const MethodRun& reference) {
  const auto ratios = paired_ratios(run.time_samples, reference.time_samples);
  if (ratios.empty()) return {NAN, NAN, NAN, 0};
  return measure::median_interval(ratios);
}

nlohmann::json ratio_json(const MethodRun& run, const MethodRun* full) {
  if (!full || run.status != "ok") return nlohmann::json::object();
  const auto interval = paired_ratio_interval(run, *full);
  return {{"paired_time_ratio_to_full", interval.median},
          {"paired_time_ratio_ci", {interval.low, interval.high}},
          {"time_ratio_noisy", interval.noisy()}};
}

const MethodRun* find_full(const std::vector<MethodRun>& runs) {
  for (const auto& run : runs) {
    if (run.name == "full" && run.status == "ok") return &run;
  }
  return nullptr;
}

nlohmann::json to_json(const ProblemSpec& spec) {
  nlohmann::json j = {{"model", spec.model},
                      {"input", spec.input_size},
                      {"H", spec.hidden_size},
                      {"layers", spec.num_layers},
                      {"head", spec.head},
                      {"classes", spec.head_outputs},
                      {"T", spec.time_steps},
                      {"B", spec.batch},
                      {"dtype", dtype_name(spec.dtype)},
                      {"device", spec.device.str()},
                      {"seed", spec.seed}};
  if (spec.num_layers <= 0) j.erase("layers");  // a model file's, unknown: left out, not 1
  return j;
}

nlohmann::json to_json(const measure::TimingStats& stats) {
  return {{"samples", stats.samples}, {"median", stats.median}, {"min", stats.min},
          {"max", stats.max},         {"q1", stats.q1},         {"q3", stats.q3},
          {"mean", stats.mean}};
}

nlohmann::json to_json(const MethodRun& run) {
  nlohmann::json j = {{"method", run.spec},
                      {"method_name", run.name},
                      {"method_description", run.description},
                      {"exact", run.exact},
                      {"status", run.status}};
  if (!run.plan.is_null()) j["plan"] = run.plan;  // NOTE [ Recorded plans ]
  if (!run.model.empty()) j["run_model"] = run.model;  // METHOD@KIND: not the problem's model
  if (run.status != "ok") {
    j["error"] = run.error;
    return j;
  }
  j["time_s"] = to_json(run.time);
  j["time_s"]["samples_s"] = run.time_samples;
  j["memory"] = {{"iteration_peak_bytes", run.memory.iteration_peak_bytes},
                 {"start_bytes", run.memory.start_bytes},
                 {"peak_bytes", run.memory.peak_bytes},
                 {"workload_bytes", run.workload_bytes},
                 {"peak_rss_bytes", run.memory.peak_rss_bytes},
                 {"rss_peak_reset", run.memory.rss_peak_reset}};
  j["counters"] = {{"forward_with_grad", run.counters.forward_with_grad},
                   {"forward_no_grad", run.counters.forward_no_grad},
                   {"backward", run.counters.backward}};
  j["flops"] = {{"useful", run.flops.useful()},
                {"useful_forward", run.flops.useful_forward},
                {"useful_backward", run.flops.useful_backward},
                {"recomputed", run.flops.recomputed},
                {"overhead", run.flops.overhead()}};
  j["useful_flops_per_s"] = run.useful_flops_per_second;
  j["utilization"] = run.utilization >= 0 ? nlohmann::json(run.utilization) : nlohmann::json();
  j["sequences_per_s"] = run.sequences_per_second;
  j["steps_per_s"] = run.steps_per_second;
  if (run.error_vs_full) {
    j["error_vs_full"] = {{"max_rel", run.error_vs_full->max_rel},
                          {"max_abs", run.error_vs_full->max_abs},
                          {"worst", run.error_vs_full->worst},
                          {"grad_rel_error", run.error_vs_full->grad_rel_error},
                          {"grad_cosine", run.error_vs_full->grad_cosine}};
  } else if (!run.error_vs_full_note.empty()) {
    j["error_vs_full_note"] = run.error_vs_full_note;
  }
  return j;
}

}  // namespace vlrnn::experiments
