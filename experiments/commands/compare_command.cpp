#include "commands/command.h"
#include "commands/measuring_options.h"

#include "lib/environment.h"
#include "lib/method_checks.h"
#include "lib/method_runner.h"
#include "lib/method_specs.h"
#include "lib/recorded_plan.h"
#include "lib/results_store.h"
#include "lib/units.h"
#include "lib/user_models.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/peak_gemm.h"
#include "vlrnn/verify/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

namespace vlrnn::cli {
namespace {

using experiments::format_bytes;
using experiments::format_rate;
using experiments::format_seconds;

struct CompareArgs {
  experiments::ProblemSpec problem;
  std::string dtype = "float32";
  std::string device = "cpu";
  std::string methods;  // empty = every method in the registry
  int64_t block = 0;    // 0 = each method's default
  int64_t memory_budget = 0;  // > 0: run the planner under this step-peak budget (bytes)
  int64_t repeats = 5;
  int64_t warmup = 1;
  MeasuringArgs measuring;
  bool no_error = false;
  bool check = false;  // the gradient error as pass/fail against verify's tolerances
  bool quiet = false;
  std::string json_path;
  std::string model_file;  // a TorchScript model (lib/user_models.h) instead of --model
  std::string head_file;   // a TorchScript head (lib/user_models.h) instead of --head
  std::string plan_file;   // a recorded plan to run exactly (lib/recorded_plan.h)
};

// "vlrnn:block_length=64@lstm_block" -> {"vlrnn:block_length=64", "lstm_block"}; no '@': an empty kind
// (NOTE [ One function, several models ]).
struct MethodOnKind {
  std::string method, kind;
  bool has_kind = false;
};

MethodOnKind split_kind(const std::string& spec) {
  const auto at = spec.find('@');
  if (at == std::string::npos) return {spec, "", false};
  return {spec.substr(0, at), spec.substr(at + 1), true};
}

std::vector<std::string> resolve_methods(const CompareArgs& args) {
  std::vector<std::string> specs;
  if (args.methods.empty()) {
    // Every method that takes the model: a bidirectional kind only those that handle one.
    for (const auto& name : method_names()) {
      if (method_takes_model(name, args.problem.model)) specs.push_back(name);
    }
  } else {
    specs = experiments::split_method_list(args.methods);
  }
  for (auto& spec : specs) {
    // --block K is the block length of a bare "vlrnn" (or "bivlrnn"); other methods take
    // their options from their spec ("checkpoint:segments=64").
    if (args.block > 0 && (spec == "vlrnn" || spec == "bivlrnn")) {
      spec = fmt::format("{}:block_length={}", spec, args.block);
    }
  }
  if (args.memory_budget > 0) {
    // --memory-budget B configures a bare "planner" in --methods, or adds one.
    const auto planner = fmt::format("planner:budget={}", args.memory_budget);
    bool found = false;
    for (auto& spec : specs) {
      if (spec == "planner") spec = planner;
      found = found || spec.rfind("planner", 0) == 0;
    }
    if (!found) specs.push_back(planner);
  }
  if (!args.plan_file.empty() &&
      std::find(specs.begin(), specs.end(), "plan") == specs.end()) {
    specs.push_back("plan");  // --plan FILE adds the recorded plan when --methods lacks it
  }
  std::vector<std::string> bare;
  for (const auto& spec : specs) bare.push_back(split_kind(spec).method);
  experiments::check_method_specs(bare);  // unknown names fail here, listing the known ones
  return specs;
}

// NOTE [ One function, several models ]: "METHOD@KIND" in --methods runs METHOD on model
// kind KIND with the --model problem's weights (by name) and data, interleaved round by round
// with the others, so that a hand-written cell and LibTorch's module computing the same
// function are timed side by side and their gradients compared (full BPTT on --model is the
// reference). Returns the problem of each spec (the base one without '@') and strips the
// '@KIND' off `specs`; `kinds` keeps the problems made for other kinds alive.
std::vector<const experiments::Problem*> problems_of_specs(
    std::vector<std::string>& specs, const experiments::Problem& base,
    std::map<std::string, experiments::Problem>& kinds) {
  std::vector<const experiments::Problem*> problems;
  for (auto& spec : specs) {
    const auto [method, kind, has_kind] = split_kind(spec);
    spec = method;
    TORCH_CHECK(!has_kind || !kind.empty(),
                "--methods: expected METHOD@KIND with a model kind after '@', got \"", method, "@\"");
    if (!has_kind || kind == base.spec.model) {
      problems.push_back(&base);
      continue;
    }
    check_method_takes_model(spec, kind);
    auto found = kinds.find(kind);
    if (found == kinds.end()) {
      found = kinds.emplace(kind, experiments::make_problem_of_kind(base, kind)).first;
    }
    problems.push_back(&found->second);
  }
  return problems;
}

std::string ratio(double value) { return std::isfinite(value) ? fmt::format("{:.2f}", value) : "-"; }

// NOTE [ The RSS column ]: VmHWM is the process's high-water mark. Where it can be reset
// (/proc/self/clear_refs), each iteration starts from the RSS of the moment, so the column is
// the process's peak during that method's iterations: it still counts whatever the process
// holds (libraries, the data, memory the allocator kept from earlier methods), so it is not
// the method's own memory (the iteration peak is). Where it cannot, it is the process's
// lifetime maximum so far, the same for every method once the largest has run; the column
// is named for what it is.
bool rss_reset_everywhere(const std::vector<experiments::MethodRun>& runs) {
  for (const auto& run : runs) {
    if (run.status == "ok" && !run.memory.rss_peak_reset) return false;
  }
  return true;
}

std::string rss_column(const std::vector<experiments::MethodRun>& runs) {
  return rss_reset_everywhere(runs) ? "proc RSS/iter" : "proc RSS life";
}

void print_table(std::ostream& out, const std::vector<experiments::MethodRun>& runs) {
  const auto* full = experiments::find_full(runs);
  size_t width = 6;
  for (const auto& run : runs) width = std::max(width, run.description.size());
  const std::string header = fmt::format(
      "{:<{}}  {:>10}  {:>19}  {:>10}  {:>13}  {:>14}  {:>6}  {:>9}  {:>11}  {:>9}  {:>22}  {:>10}",
      "method", width, "time", "spread (min-max)", "iter. peak", rss_column(runs), "useful rate",
      "util.", "recompute", "max rel err", "time/full", "paired [95% CI]", "mem full/x");
  out << header << "\n" << std::string(header.size(), '-') << "\n";
  for (const auto& run : runs) {
    if (run.status != "ok") {
      out << fmt::format("{:<{}}  {}: {}\n", run.description, width, run.status, run.error);
      continue;
    }
    const std::string spread = fmt::format("{}-{}", format_seconds(run.time.min),
                                           format_seconds(run.time.max));
    const std::string util =
        run.utilization >= 0 ? fmt::format("{:.1f}%", 100.0 * run.utilization) : "-";
    const std::string err =
        run.error_vs_full ? fmt::format("{:.2e}", run.error_vs_full->max_rel) : "-";
    const double time_ratio = full ? run.time.median / full->time.median : NAN;
    const auto paired = full ? experiments::paired_ratio_interval(run, *full)
                             : measure::MedianInterval{NAN, NAN, NAN, 0};
    const std::string paired_text =
        std::isfinite(paired.median)
            ? fmt::format("{:.2f} [{:.2f}-{:.2f}]{}", paired.median, paired.low, paired.high,
                          paired.noisy() ? " *" : "  ")
            : "-";
    const double mem_ratio = full && run.memory.iteration_peak_bytes > 0
                                 ? double(full->memory.iteration_peak_bytes) /
                                       double(run.memory.iteration_peak_bytes)
                                 : NAN;
    out << fmt::format(
        "{:<{}}  {:>10}  {:>19}  {:>10}  {:>13}  {:>14}  {:>6}  {:>8.1f}%  {:>11}  {:>9}  {:>22}  {:>10}\n",
        run.description, width, format_seconds(run.time.median), spread,
        format_bytes(double(run.memory.iteration_peak_bytes)),
        format_bytes(double(run.memory.peak_rss_bytes)), format_rate(run.useful_flops_per_second),
        util, 100.0 * run.flops.overhead(), err, ratio(time_ratio), paired_text, ratio(mem_ratio));
  }
}

// --check: each exact method's gradient error against verify's tolerance for the dtype
// (1e-10 relative in float64, 1e-5 in float32); approximate methods are reported, never
// failed, as in `vlrnn verify`. Prints one line per method and returns the failures.
int64_t check_gradients(std::ostream& out, const CompareArgs& args,
                        const std::vector<experiments::MethodRun>& runs) {
  const double tolerance = verify::tolerance_for(args.problem.dtype);
  int64_t failed = 0, passed = 0;
  out << fmt::format("\ncheck: max rel diff vs full BPTT, tolerance {:.0e} ({})\n", tolerance,
                     args.dtype);
  for (const auto& run : runs) {
    std::string verdict;
    if (run.status != "ok") {
      verdict = fmt::format("FAIL ({})", run.status);
    } else if (!run.error_vs_full) {
      verdict = fmt::format("FAIL (no gradient comparison: {})", run.error_vs_full_note);
    } else if (!run.exact) {
      verdict = fmt::format("approx (not checked; grad rel err {:.3e})",
                            run.error_vs_full->grad_rel_error);
    } else if (run.error_vs_full->max_rel <= tolerance) {
      verdict = fmt::format("pass ({:.2e})", run.error_vs_full->max_rel);
    } else {
      verdict = fmt::format("FAIL ({:.2e} > {:.0e}, worst {})", run.error_vs_full->max_rel,
                            tolerance, run.error_vs_full->worst);
    }
    if (verdict.rfind("FAIL", 0) == 0) {
      ++failed;
    } else if (verdict.rfind("pass", 0) == 0) {
      ++passed;
    }
    out << fmt::format("  {}: {}\n", run.description, verdict);
  }
  out << fmt::format("check: {} passed, {} failed\n", passed, failed);
  return failed;
}

// Rounds actually timed: --repeats, or more under --until-stable.
int64_t timed_rounds(const std::vector<experiments::MethodRun>& runs) {
  int64_t rounds = 0;
  for (const auto& run : runs) rounds = std::max(rounds, run.time.samples);
  return rounds;
}

// The peak GEMM rate utilization is measured against, warning first when the BLAS makes
// times meaningless or slow (the reference BLAS, OpenBLAS on its generic kernel).
measure::PeakGemm measure_peak(const CompareArgs& args, const measure::BlasInfo& blas) {
  const auto warning = measure::blas_warning(blas);
  if (!warning.empty()) std::cerr << "vlrnn compare: WARNING: " << warning << "\n";
  std::cerr << "vlrnn compare: measuring the peak GEMM rate (1024^2 " << args.dtype << ")...\n";
  return measure::measure_peak_gemm(args.problem.device, args.problem.dtype, 1024, 10, 2);
}

void print_report(const CompareArgs& args, const experiments::Problem& problem,
                  const std::vector<experiments::MethodRun>& runs, const std::string& blas_vendor,
                  double peak_flops, const std::string& load_start) {
  const auto& s = args.problem;
  std::cout << fmt::format("vlrnn compare: {} | {} | BLAS {} | load average {} -> {}\n",
                           s.describe(), measure::describe_device(s.device), blas_vendor,
                           load_start, measure::load_average());
  std::cout << fmt::format(
      "peak GEMM (1024^2 {}): {} | useful work per iteration: {:.2f} GFLOP (forward + backward, "
      "{:.3g} MFLOP per time step and sequence)\n",
      args.dtype, format_rate(peak_flops),
      problem.flops.forward() * 3.0 * double(s.time_steps * s.batch) * 1e-9,
      problem.flops.forward() * 3.0 * 1e-6);
  std::cout << fmt::format("time: median of {} (after {} warm-up); time/full: ratio of medians; "
                           "paired: median over rounds of the ratio within a round (robust to a "
                           "shared machine's drifts), 95% bootstrap interval; * noisy: interval "
                           "beyond +-10% or < 3 rounds, not a finding\niter. peak: tensor bytes above parameters + "
                           "data ({}), the method's own; {}\n\n",
                           timed_rounds(runs), args.warmup,
                           format_bytes(double(runs.front().workload_bytes)),
                           rss_reset_everywhere(runs)
                               ? "proc RSS/iter: the whole process's resident peak during the "
                                 "method's iterations (libraries, data and memory kept from "
                                 "earlier methods included), not the method's own"
                               : "proc RSS life: the whole process's resident peak since it "
                                 "started (VmHWM could not be reset here), not per method");
  print_table(std::cout, runs);
}

// --json FILE: the run as a result set in one file (lib/results_store.h), one record per
// method; `meta` is environment_json() as the run started.
void write_json(const CompareArgs& args, const std::vector<experiments::MethodRun>& runs,
                nlohmann::json meta, const measure::PeakGemm& peak) {
  const auto& s = args.problem;
  meta.update({{"command", command_line()},
               {"problem", experiments::to_json(s)},
               {"devices", {{s.device.str(), measure::describe_device(s.device)}}},
               {"peak_gemm", {{s.device.str() + "/" + args.dtype, experiments::peak_gemm_json(peak)}}},
               {"warmup", args.warmup},
               {"repeats", args.repeats},
               {"timed_rounds", timed_rounds(runs)},
               {"until_stable", args.measuring.until_stable},
               {"load_average_end", measure::load_average()},
               {"finished", experiments::utc_now()}});
  std::vector<nlohmann::json> records;
  const auto* full = experiments::find_full(runs);
  for (const auto& run : runs) {
    auto j = experiments::to_json(run);
    j["kind"] = "compare";
    if (full && run.status == "ok") {
      j["time_ratio_to_full"] = run.time.median / full->time.median;
      j.update(experiments::ratio_json(run, full));
      j["memory_ratio_full_to_this"] = double(full->memory.iteration_peak_bytes) /
                                       double(std::max<int64_t>(1, run.memory.iteration_peak_bytes));
    }
    records.push_back(std::move(j));
  }
  experiments::write_results_file(args.json_path, std::move(meta), records, "--json");
  std::cerr << "vlrnn compare: wrote " << args.json_path << "\n";
}

int run_compare(CompareArgs args) {
  apply_threads(args.measuring);
  if (!args.model_file.empty()) args.problem.model = experiments::add_model_file(args.model_file);
  if (!args.head_file.empty()) args.problem.head = experiments::add_head_file(args.head_file);
  if (!args.plan_file.empty()) {
    const auto plan = experiments::add_plan_method(args.plan_file);
    TORCH_CHECK(plan.time_steps == args.problem.time_steps, "--plan ", args.plan_file,
                ": expected a plan for --T ", args.problem.time_steps, ", got one recorded for T = ",
                plan.time_steps);
  }
  args.problem.dtype = experiments::parse_dtype(args.dtype);
  args.problem.device = experiments::parse_device(args.device, "--device");
  const auto specs = resolve_methods(args);
  // Bad values fail here, before the seconds spent measuring the peak GEMM rate.
  TORCH_CHECK(args.repeats >= 1, "--repeats: expected >= 1 timed runs, got ", args.repeats);
  TORCH_CHECK(args.warmup >= 0, "--warmup: expected >= 0 untimed runs, got ", args.warmup);
  TORCH_CHECK(!(args.check && args.no_error), "--check: expected the gradient comparison "
              "with full BPTT it judges, got --no-error as well");
  experiments::RunOptions options;
  options.warmup = args.warmup;
  options.repeats = args.repeats;
  apply_stability(args.measuring, args.repeats, options);
  options.gradient_error = !args.no_error;
  if (!args.quiet) {
    options.progress = [](const std::string& line) { std::cerr << "  " << line << "\n"; };
  }
  if (!args.json_path.empty()) {
    experiments::check_writable_file(args.json_path, "--json");
    check_clean_tree(args.measuring, "vlrnn compare --json");
  }
  // Installed before the problem exists, so parameters and data are tracked too.
  measure::CpuMemoryTracker::instance().install();
  const auto problem = experiments::make_problem(args.problem);
  args.problem = problem.spec;  // a model file's own F and H (make_problem), as reported
  std::map<std::string, experiments::Problem> other_kinds;
  auto bare_specs = specs;
  const auto problems = problems_of_specs(bare_specs, problem, other_kinds);

  // The machine and the code as the run starts (meta of --json; its load_average is the
  // load before the measurements).
  auto meta = experiments::environment_json();
  meta["started"] = experiments::utc_now();
  const std::string load_start = meta["load_average"].get<std::string>();
  const auto blas = measure::detect_blas();
  const auto peak = measure_peak(args, blas);
  options.peak_flops_per_second = peak.flops_per_second;
  std::cerr << fmt::format("vlrnn compare: {} methods x ({} warm-up + {} repeats{}), interleaved{}\n",
                           specs.size(), args.warmup, args.repeats,
                           options.stable_within > 0
                               ? fmt::format(", more until stable within +-{:.0f}% (at most {})",
                                             100 * options.stable_within, options.max_repeats)
                               : "",
                           args.no_error ? "" : "; then gradients vs full BPTT");
  auto runs = experiments::run_methods(problems, bare_specs, options);
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].spec = specs[i];  // as given, "METHOD@KIND" included
    if (!runs[i].model.empty()) runs[i].description += "@" + runs[i].model;
  }
  print_report(args, problem, runs, blas.vendor, peak.flops_per_second, load_start);
  if (!args.json_path.empty()) write_json(args, runs, std::move(meta), peak);
  if (args.check && check_gradients(std::cout, args, runs) > 0) return 1;
  for (const auto& run : runs) {
    if (run.status == "error") return 1;
  }
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CompareArgs>();
  auto* sub = add_subcommand(
      app, "compare", "Several methods on one workload, side by side: time, memory, GFLOP/s, ratios to full",
      "Run several gradient methods on one workload, interleaved round-robin on the same "
      "weights and data, and print them side by side: median time and spread, iteration peak "
      "memory (exact tensor bytes above parameters + data), the process's peak RSS, useful "
      "GFLOP/s and "
      "utilization of the measured peak GEMM rate, recompute overhead, gradient error vs "
      "full BPTT, and ratios to full (time method/full, memory full/method).");
  auto& p = args->problem;
  sub->add_option("--model", p.model, model_option_help() + " or a plugin's kind (--plugin)")
      ->capture_default_str();
  sub->add_option("--model-file", args->model_file,
                  "a TorchScript model file instead of --model (its own F and H; "
                  "vlrnn/core/script_model.h)")
      ->excludes("--model");
  sub->add_option("--input", p.input_size, "F: input features per step")->capture_default_str();
  sub->add_option("--hidden", p.hidden_size, "H: hidden size")->capture_default_str();
  sub->add_option("--layers", p.num_layers, "L: stacked layers (gru_lstm: always GRU + 3 LSTM)")
      ->capture_default_str();
  sub->add_option("--batch,-B", p.batch, "B: sequences per batch")->capture_default_str();
  sub->add_option("--T,-T", p.time_steps, "T: time steps per sequence")->capture_default_str();
  sub->add_option("--min-length", p.min_length_fraction,
                  "variable-length batch: lengths uniform in [f*T, T] for a fraction f < 1 "
                  "(default 1: all sequences T steps)")
      ->capture_default_str();
  sub->add_option("--segments", p.mean_segment,
                  "resets: each sequence a stream of segments (episodes, documents) of lengths "
                  "uniform in [1, 2N-1], restarting from the initial state at each (default 0: "
                  "none)")
      ->capture_default_str();
  sub->add_option("--head", p.head, "per-step head: ce (Linear + cross-entropy), mse or a plugin's head kind")
      ->capture_default_str();
  sub->add_option("--classes", p.head_outputs, "C: head outputs (classes for ce)")
      ->capture_default_str();
  sub->add_option("--head-file", args->head_file,
                  "a TorchScript head file instead of --head: its own loss, Z and targets "
                  "(vlrnn/core/script_head.h; Z must be the model's H)")
      ->excludes("--head")
      ->excludes("--classes");
  sub->add_option("--block,-K", args->block,
                  "K: the block length of a bare 'vlrnn' or 'bivlrnn' in --methods (0: its default, "
                  "K=auto: ceil(sqrt(T)), shorter on the CPU to fit the L2 cache)")
      ->capture_default_str();
  sub->add_option("--memory-budget", args->memory_budget,
                  "BYTES: run the planner (the fastest exact schedule predicted to fit this step "
                  "peak) with this budget: configures a bare 'planner' in --methods, or adds one")
      ->check(CLI::PositiveNumber);
  sub->add_option("--plan", args->plan_file,
                  "FILE: run the plan a planner run recorded in FILE (compare --json, a budget or "
                  "sweep record, train's meta.json) exactly, as method 'plan': the same ops, so "
                  "the same gradients bit for bit; adds 'plan' to --methods");
  sub->add_option("--methods", args->methods,
                  "comma-separated method specs, e.g. full,vlrnn,vlrnn:block_length=64,"
                  "checkpoint:segments=64 (default: every method in the registry; "
                  "'vlrnn methods' lists them); METHOD@KIND runs METHOD on model kind KIND with "
                  "--model's weights (by name) and data, side by side: e.g. --model lstm "
                  "--methods full,full@lstm_block,vlrnn:block_length=128@lstm_block");
  sub->add_option("--dtype", args->dtype, "float32 or float64")->capture_default_str();
  add_device_option(sub, args->device, "where the model, data and methods run")
      ->capture_default_str();
  sub->add_option("--repeats", args->repeats, "timed iterations per method (the median is reported)")
      ->capture_default_str();
  sub->add_option("--warmup", args->warmup, "untimed iterations per method first")
      ->capture_default_str();
  sub->add_option("--seed", p.seed, "seed of the weights and data")->capture_default_str();
  add_measuring_options(sub, args->measuring);
  add_stability_options(sub, args->measuring);
  sub->add_flag("--no-error", args->no_error,
                "skip the gradient comparison with full BPTT (saves full's memory and time)");
  sub->add_flag("--check", args->check,
                "judge each exact method's gradient error like `vlrnn verify` (max rel diff "
                "<= 1e-10 in float64, 1e-5 in float32; truncated BPTT reported, never failed) "
                "and exit 1 on a failure");
  sub->add_flag("--quiet,-q", args->quiet, "no per-iteration progress on stderr");
  sub->add_option("--json", args->json_path, "also write every measurement to this JSON file");
  sub->callback([args, &exit_code] { exit_code = run_compare(*args); });
}

}  // namespace vlrnn::cli
