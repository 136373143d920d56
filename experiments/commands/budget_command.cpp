// `vlrnn budget`: time overhead over full BPTT against a memory budget, for the planner,
// uniform VLRNN blocks at their best K under the budget, sqrt(T) checkpointing and revolve
// (the most slots that fit), each measured side by side with full in one interleaved run;
// plus revolve's predicted curve from the cost model. Plot with scripts/plot_budget.py.
#include "commands/command.h"

#include "lib/method_runner.h"
#include "lib/results_store.h"
#include "lib/sweep_runner.h"
#include "lib/units.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/methods/block.h"
#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/planner.h"
#include "vlrnn/schedule/planner_method.h"
#include "vlrnn/schedule/schedulers.h"
#include "vlrnn/schedule/simulator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

namespace vlrnn::cli {
namespace {

using experiments::format_bytes;
using nlohmann::json;

struct BudgetArgs {
  experiments::ProblemSpec problem;
  std::string steps = "1000,10000";            // T values
  std::string fractions = "0.03,0.05,0.1,0.2,0.4";  // budgets as fractions of full's peak
  std::string budgets;                          // or absolute budgets in bytes
  std::string methods = "planner,uniform,revolve,sqrt";
  bool no_full = false;
  bool gradient_error = false;
  int64_t repeats = 2, warmup = 1, threads = 0;
  std::string name = "cpu-budget";
  std::string out_dir;
};

std::vector<double> parse_list(const std::string& text, const char* what) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    try {
      out.push_back(std::stod(item));
    } catch (const std::exception&) {
      TORCH_CHECK(false, what, ": expected comma-separated numbers, got \"", item, "\"");
    }
    TORCH_CHECK(out.back() > 0 && std::isfinite(out.back()), what,
                ": expected positive numbers, got ", item);
  }
  return out;
}

json prediction_json(const schedule::Prediction& p) {
  return {{"peak_bytes", p.peak_bytes},
          {"seconds", p.seconds},
          {"forward_no_grad_steps", p.counts.forward_no_grad_steps},
          {"max_stored_states", p.counts.max_stored_states},
          {"max_tape_steps", p.counts.max_tape_steps}};
}

int run_budget(BudgetArgs args) {
  // Bad lists fail here, not after the first cost model was measured.
  const auto step_counts = parse_list(args.steps, "--T");
  for (double steps : step_counts) {
    TORCH_CHECK(steps >= 1 && steps == std::floor(steps), "T: expected >= 1 time steps, got ", steps);
  }
  const auto fractions = parse_list(args.fractions, "--fractions");
  const auto budgets = parse_list(args.budgets, "--budgets");
  if (args.threads > 0) at::set_num_threads(int(args.threads));
  measure::CpuMemoryTracker::instance().install();  // before any problem exists
  const std::string out_dir =
      args.out_dir.empty() ? (std::filesystem::path("results") / args.name).string() : args.out_dir;
  experiments::ResultsStore store(out_dir);
  if (store.has_records()) store.move_to_previous();
  json meta = experiments::environment_json();
  meta["command"] = command_line();
  meta["name"] = args.name;
  meta["problem"] = experiments::to_json(args.problem);
  meta["methods"] = args.methods;
  meta["fractions"] = args.fractions;
  meta["budgets"] = args.budgets;
  meta["repeats"] = args.repeats;
  meta["warmup"] = args.warmup;
  store.write_meta(meta);
  const auto methods = [&] {
    std::vector<std::string> names;
    std::stringstream in(args.methods);
    std::string item;
    while (std::getline(in, item, ',')) names.push_back(item);
    return names;
  }();
  const auto wants = [&](const char* m) {
    return std::find(methods.begin(), methods.end(), m) != methods.end();
  };

  for (double steps : step_counts) {
    auto spec = args.problem;
    spec.time_steps = int64_t(steps);
    const auto problem = experiments::make_problem(spec);
    const auto checked = validated(problem.workload());
    std::cerr << fmt::format("vlrnn budget: {}: measuring the cost model...\n", spec.describe());
    // The same (cached) cost model the planner method will plan with.
    const auto model = schedule::measured_cost_model(checked);
    const int64_t T = spec.time_steps;
    const auto full_predicted = schedule::simulate(schedule::uniform_schedule(T, T), model);
    const auto minimum = schedule::minimum_budget(model);

    // Full's measured peak is what fractions refer to (one measured step).
    int64_t full_peak = full_predicted.peak_bytes;
    if (!args.no_full) {
      experiments::RunOptions once;
      once.warmup = 0;
      once.repeats = 1;
      once.gradient_error = false;
      const auto runs = experiments::run_methods(problem, {"full"}, once);
      if (runs[0].status == "ok") full_peak = runs[0].memory.step_peak_bytes;
    }
    // Revolve's predicted curve (theory: Griewank's minimal recomputation per slot count,
    // priced by the cost model).
    for (int64_t slots = 2; slots <= 64; ++slots) {
      if (schedule::binomial_forward_steps(T, slots) > 64 * T) continue;
      const auto p = schedule::simulate(schedule::revolve_schedule(T, slots), model);
      store.append({{"key", fmt::format("T={}/theory/revolve/s={}", T, slots)},
                    {"kind", "theory"},
                    {"T", T},
                    {"method", "revolve"},
                    {"slots", slots},
                    {"recompute_steps", schedule::binomial_forward_steps(T, slots)},
                    {"predicted", prediction_json(p)},
                    {"predicted_time_ratio", p.seconds / full_predicted.seconds},
                    {"full_peak_bytes", full_peak}});
      if (schedule::binomial_repetitions(T, slots) <= 1) break;
    }

    std::vector<std::pair<double, int64_t>> points;  // (fraction, budget bytes)
    if (!args.budgets.empty()) {
      for (double b : budgets) {
        points.emplace_back(b / double(full_peak), int64_t(b));
      }
    } else {
      for (double f : fractions) {
        points.emplace_back(f, int64_t(f * double(full_peak)));
      }
    }
    for (const auto& [fraction, budget] : points) {
      std::vector<std::string> specs;
      std::map<std::string, std::string> label_of_spec;  // spec -> the figure's series name
      json chosen = json::object();
      if (!args.no_full) specs.push_back("full");
      if (wants("planner")) {
        if (budget < minimum) {
          chosen["planner"] = {{"error", fmt::format("budget below the minimum {}", minimum)}};
        } else {
          const auto p = schedule::plan(
              model, std::max(minimum, int64_t(schedule::kPlanningMargin * double(budget))));
          specs.push_back(fmt::format("planner:budget={}", budget));
          chosen["planner"] = {{"schedule", p.schedule.name}, {"chosen_by", p.chosen_by},
                               {"predicted", prediction_json(p.prediction)}};
        }
      }
      if (wants("uniform")) {
        try {
          const auto u = schedule::best_uniform(
              model, int64_t(schedule::kPlanningMargin * double(budget)));
          specs.push_back(fmt::format("vlrnn:block={}", u.parameter));
          label_of_spec[specs.back()] = "uniform";
          chosen["uniform"] = {{"schedule", u.schedule.name},
                               {"predicted", prediction_json(u.prediction)}};
        } catch (const c10::Error& e) {
          chosen["uniform"] = {{"error", e.what_without_backtrace()}};
        }
      }
      if (wants("revolve")) {
        std::optional<int64_t> best_slots;
        schedule::Prediction best;
        for (int64_t slots = 2; slots <= 64; ++slots) {
          if (schedule::binomial_forward_steps(T, slots) > 64 * T) continue;
          const auto p = schedule::simulate(schedule::revolve_schedule(T, slots), model);
          if (p.peak_bytes <= schedule::kPlanningMargin * double(budget) &&
              (!best_slots || p.seconds < best.seconds)) {
            best_slots = slots;
            best = p;
          }
          if (schedule::binomial_repetitions(T, slots) <= 1) break;
        }
        if (best_slots) {
          specs.push_back(fmt::format("revolve:slots={}", *best_slots));
          chosen["revolve"] = {{"slots", *best_slots}, {"predicted", prediction_json(best)}};
        } else {
          chosen["revolve"] = {{"error", "no slot count fits"}};
        }
      }
      if (wants("sqrt")) {
        const auto p = schedule::simulate(schedule::sqrt_checkpoint_schedule(T), model);
        specs.push_back(fmt::format("vlrnn:blocks={}", sqrt_steps(T)));
        label_of_spec[specs.back()] = "sqrt";
        chosen["sqrt"] = {{"predicted", prediction_json(p)}};
      }
      std::cerr << fmt::format("vlrnn budget: T = {}, budget {} ({:.1f}% of full's {}): {}\n", T,
                               format_bytes(double(budget)), 100 * fraction,
                               format_bytes(double(full_peak)), fmt::join(specs, " "));
      for (const auto& [method, info] : chosen.items()) {
        if (!info.contains("error")) continue;  // a method that fits no schedule: say so
        store.append({{"key", fmt::format("T={}/budget={}/{}", T, budget, method)},
                      {"kind", "does_not_fit"},
                      {"T", T},
                      {"problem", experiments::to_json(spec)},
                      {"budget_bytes", budget},
                      {"budget_fraction", fraction},
                      {"full_peak_bytes", full_peak},
                      {"minimum_budget_bytes", minimum},
                      {"method", method},
                      {"run", {{"status", "does_not_fit"}}},
                      {"error", info["error"]}});
        std::cout << fmt::format("T={} budget={} ({:.1f}%) {:<28} does not fit: {}\n", T,
                                 format_bytes(double(budget)), 100 * fraction, method,
                                 info["error"].get<std::string>());
      }
      if (specs.empty()) continue;
      experiments::RunOptions options;
      options.warmup = args.warmup;
      options.repeats = args.repeats;
      options.gradient_error = args.gradient_error;
      options.progress = [](const std::string& line) { std::cerr << "  " << line << "\n"; };
      const auto runs = experiments::run_methods(problem, specs, options);
      const experiments::MethodRun* full = nullptr;
      for (const auto& run : runs) {
        if (run.name == "full" && run.status == "ok") full = &run;
      }
      for (const auto& run : runs) {
        json record = {{"key", fmt::format("T={}/budget={}/{}", T, budget, run.spec)},
                       {"kind", "measured"},
                       {"T", T},
                       {"problem", experiments::to_json(spec)},
                       {"budget_bytes", budget},
                       {"budget_fraction", fraction},
                       {"full_peak_bytes", full_peak},
                       {"minimum_budget_bytes", minimum},
                       {"run", experiments::to_json(run)}};
        // The budget figure's series: VLRNN at the best K ("uniform") and at K = T / sqrt(T)
        // ("sqrt") are both the method "vlrnn".
        const auto label = label_of_spec.count(run.spec) ? label_of_spec.at(run.spec) : run.name;
        record["method"] = label;
        if (chosen.contains(label)) record["chosen"] = chosen[label];
        if (run.status == "ok") {
          record["fits_budget"] = run.memory.step_peak_bytes <= budget;
          if (full) record["time_ratio"] = run.time.median / full->time.median;
          if (chosen.contains(label) && chosen[label].contains("predicted")) {
            const auto predicted_peak = chosen[label]["predicted"]["peak_bytes"].get<double>();
            record["peak_prediction_error"] =
                (predicted_peak - double(run.memory.step_peak_bytes)) /
                double(run.memory.step_peak_bytes);
          }
        }
        store.append(record);
        std::cout << fmt::format("T={} budget={} ({:.1f}%) {:<28} time {:>9} {:>6} step peak {:>10} {}\n",
                                 T, format_bytes(double(budget)), 100 * fraction, run.description,
                                 run.status == "ok" ? experiments::format_seconds(run.time.median) : run.status,
                                 record.contains("time_ratio") ? fmt::format("x{:.2f}", record["time_ratio"].get<double>()) : "",
                                 format_bytes(double(run.memory.step_peak_bytes)),
                                 record.value("fits_budget", true) ? "" : "(over budget)");
      }
    }
  }
  store.write_csv();
  std::cerr << "vlrnn budget: wrote " << store.jsonl_path() << ", results.csv, meta.json; plot "
            << "with: python3 scripts/plot.py " << out_dir << "\n";
  return 0;
}

}  // namespace

void add_budget_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<BudgetArgs>();
  auto* sub = add_subcommand(
      app, "budget", "Time overhead over full BPTT against a memory budget (planner, VLRNN, revolve, sqrt)",
      "Time overhead over full BPTT against a memory budget: for each T and each budget (a "
      "fraction of full BPTT's measured step peak, or bytes), the planner (planner:budget=B), "
      "uniform VLRNN blocks at the best K predicted to fit, revolve at the best slot count "
      "predicted to fit, and sqrt(T) checkpointing, measured interleaved with full in one run; "
      "plus revolve's predicted curve from the measured cost model. Writes DIR/results.jsonl "
      "(one record per method and budget, plus 'theory' records), results.csv and meta.json "
      "(command, git sha, machine). Plot: python3 scripts/plot.py DIR.");
  auto& p = args->problem;
  p.hidden_size = 64;
  p.input_size = 32;
  p.batch = 8;
  p.head_outputs = 16;
  sub->add_option("--name", args->name, "result set name: results/<name>")->capture_default_str();
  sub->add_option("--out", args->out_dir, "result folder (default results/<name>)");
  sub->add_option("--T", args->steps, "comma-separated sequence lengths")->capture_default_str();
  sub->add_option("--fractions", args->fractions,
                  "budgets as fractions of full BPTT's measured step peak")->capture_default_str();
  sub->add_option("--budgets", args->budgets, "budgets in bytes (instead of --fractions)");
  sub->add_option("--methods", args->methods, "any of planner,uniform,revolve,sqrt")
      ->capture_default_str();
  sub->add_flag("--no-full", args->no_full,
                "do not run full BPTT (fractions then refer to its predicted peak)");
  sub->add_flag("--gradient-error", args->gradient_error,
                "also compare each method's gradients with full BPTT");
  sub->add_option("--model", p.model, "recurrent model")->capture_default_str();
  sub->add_option("--input", p.input_size, "F")->capture_default_str();
  sub->add_option("--hidden", p.hidden_size, "H")->capture_default_str();
  sub->add_option("--layers", p.num_layers, "L")->capture_default_str();
  sub->add_option("--batch,-B", p.batch, "B")->capture_default_str();
  sub->add_option("--classes", p.head_outputs, "C: head outputs")->capture_default_str();
  sub->add_option("--repeats", args->repeats, "timed steps per method")->capture_default_str();
  sub->add_option("--warmup", args->warmup, "untimed steps per method")->capture_default_str();
  sub->add_option("--threads", args->threads, "intra-op threads (0: default)")
      ->capture_default_str();
  sub->callback([args, &exit_code] { exit_code = run_budget(*args); });
}

}  // namespace vlrnn::cli
