#include "lib/method_runner.h"

#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/measure/step_measurement.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

namespace vlrnn::experiments {
namespace {

// Fills the derived figures of a successful run from its timings and counters.
void derive(MethodRun& run, const Problem& problem, const RunOptions& options) {
  const auto& s = problem.spec;
  run.flops = measure::step_flops(problem.flops, s.time_steps, s.batch, problem.valid_steps(),
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

}  // namespace

std::vector<MethodRun> run_methods(const Problem& problem, const std::vector<std::string>& specs,
                                   const RunOptions& options) {
  TORCH_CHECK(options.repeats >= 1, "repeats: expected >= 1 timed runs, got ", options.repeats);
  TORCH_CHECK(options.warmup >= 0, "warmup: expected >= 0 untimed runs, got ", options.warmup);
  TORCH_CHECK(!specs.empty(), "methods: expected at least one method, got none");
  const auto workload = problem.workload();
  const auto device = problem.spec.device;

  std::vector<std::unique_ptr<GradientMethod>> methods;
  std::vector<MethodRun> runs(specs.size());
  std::vector<std::vector<double>> seconds(specs.size());
  for (size_t m = 0; m < specs.size(); ++m) {
    methods.push_back(make_method_from_spec(specs[m]));  // throws on an unknown spec
    runs[m].spec = specs[m];
    runs[m].name = methods[m]->name();
    runs[m].description = methods[m]->describe();
    runs[m].exact = methods[m]->is_exact();
    runs[m].workload_bytes = measure::workload_bytes(workload);
  }

  const int64_t rounds = options.warmup + options.repeats;
  for (int64_t r = 0; r < rounds; ++r) {
    for (size_t m = 0; m < specs.size(); ++m) {
      auto& run = runs[m];
      if (run.status != "ok") continue;  // a method that failed once is not retried
      try {
        const auto step = measure::measure_step(*methods[m], workload, device);
        if (r >= options.warmup) {
          seconds[m].push_back(step.seconds);
          if (seconds[m].size() == 1 || step.memory.step_peak_bytes > run.memory.step_peak_bytes) {
            run.memory = step.memory;
          }
        }
        run.counters = step.counters;
        if (options.progress) {
          options.progress(fmt::format("{} {} {}/{}: {:.3f} s", run.description,
                                       r < options.warmup ? "warm-up" : "repeat",
                                       r < options.warmup ? r + 1 : r - options.warmup + 1,
                                       r < options.warmup ? options.warmup : options.repeats,
                                       step.seconds));
        }
      } catch (const std::exception& e) {
        fail(run, e);
        measure::clear_gradients(workload);
        if (options.progress) options.progress(fmt::format("{}: {}", run.description, run.status));
      }
    }
  }
  for (size_t m = 0; m < specs.size(); ++m) {
    if (runs[m].status != "ok") continue;
    runs[m].time_samples = seconds[m];
    runs[m].time = measure::summarize(seconds[m]);
    derive(runs[m], problem, options);
  }

  if (options.gradient_error) {
    // One reference snapshot, then each method's; seeded alike so that any random draws
    // (dropout) match, as the verifier does.
    std::optional<verify::GradientSnapshot> reference;
    std::string reference_note;
    try {
      auto full = make_method("full");
      torch::manual_seed(problem.spec.seed + 1);
      reference = verify::run_and_snapshot(*full, workload);
    } catch (const std::exception& e) {
      reference_note = "full BPTT failed: " + measure::short_message(e);
    }
    for (auto& run : runs) {
      if (run.status != "ok") continue;
      if (!reference) {
        run.error_vs_full_note = reference_note;
        continue;
      }
      try {
        auto method = make_method_from_spec(run.spec);
        torch::manual_seed(problem.spec.seed + 1);
        const auto got = verify::run_and_snapshot(*method, workload);
        run.error_vs_full = verify::compare(got, *reference);
      } catch (const std::exception& e) {
        run.error_vs_full_note = measure::short_message(e);
      }
    }
    measure::clear_gradients(workload);
  }
  return runs;
}

double paired_time_ratio(const MethodRun& run, const MethodRun& reference) {
  const auto& a = run.time_samples;
  const auto& b = reference.time_samples;
  if (a.empty() || a.size() != b.size()) return NAN;
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) ratios.push_back(a[i] / b[i]);
  return measure::summarize(ratios).median;
}

nlohmann::json to_json(const ProblemSpec& spec) {
  return {{"model", spec.model},
          {"input", spec.input_size},
          {"hidden", spec.hidden_size},
          {"layers", spec.num_layers},
          {"head", spec.head},
          {"classes", spec.head_outputs},
          {"T", spec.time_steps},
          {"B", spec.batch},
          {"dtype", dtype_name(spec.dtype)},
          {"device", spec.device.str()},
          {"seed", spec.seed}};
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
  if (run.status != "ok") {
    j["error"] = run.error;
    return j;
  }
  j["time_s"] = to_json(run.time);
  j["time_s"]["samples_s"] = run.time_samples;
  j["memory"] = {{"step_peak_bytes", run.memory.step_peak_bytes},
                 {"start_bytes", run.memory.start_bytes},
                 {"peak_bytes", run.memory.peak_bytes},
                 {"workload_bytes", run.workload_bytes},
                 {"peak_rss_bytes", run.memory.peak_rss_bytes},
                 {"rss_peak_reset", run.memory.rss_peak_reset}};
  j["counters"] = {{"forward_with_grad", run.counters.forward_with_grad},
                   {"forward_without_grad", run.counters.forward_without_grad},
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
