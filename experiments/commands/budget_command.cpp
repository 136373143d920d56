// `vlrnn budget`: time overhead over full BPTT against a memory budget, for the planner,
// uniform VLRNN blocks at their best K under the budget, sqrt(T) checkpointing and revolve
// (the most slots that fit), each measured side by side with full in one interleaved run;
// plus revolve's predicted curve from the cost model. Plot with scripts/plot.py DIR.
#include "commands/command.h"
#include "commands/measuring_options.h"

#include "lib/budget_choice.h"
#include "lib/environment.h"
#include "lib/method_runner.h"
#include "lib/results_store.h"
#include "lib/units.h"

#include "vlrnn/measure/cpu_memory_tracker.h"
#include "vlrnn/measure/environment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

namespace vlrnn::cli {
namespace {

using experiments::BudgetLength;
using experiments::BudgetPoint;
using experiments::Choices;
using experiments::format_bytes;
using experiments::prediction_json;
using nlohmann::json;

struct BudgetArgs {
  experiments::ProblemSpec problem;
  std::string steps = "1000,10000";            // T values
  std::string fractions = "0.03,0.05,0.1,0.2,0.4";  // budgets as fractions of full's peak
  std::string budgets;                          // or absolute budgets in bytes
  std::string methods = "planner,uniform,revolve,sqrt";
  bool no_full = false;
  bool gradient_error = false;
  int64_t repeats = 2, warmup = 1;
  MeasuringArgs measuring;
  std::string device = "cpu";  // parsed into problem.device (experiments::parse_device)
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

// The three lists of the command line, parsed once: bad lists fail before the first cost
// model is measured.
struct BudgetLists {
  std::vector<int64_t> lengths;  // --T
  std::vector<double> fractions;
  std::vector<double> budgets;   // bytes; when given, they replace the fractions
  std::vector<std::string> methods;
};

BudgetLists parse_lists(const BudgetArgs& args) {
  BudgetLists lists;
  for (double steps : parse_list(args.steps, "--T")) {
    TORCH_CHECK(steps >= 1 && steps == std::floor(steps), "--T: expected >= 1 time steps, got ",
                steps);
    lists.lengths.push_back(int64_t(steps));
  }
  lists.fractions = parse_list(args.fractions, "--fractions");
  lists.budgets = parse_list(args.budgets, "--budgets");
  std::stringstream in(args.methods);
  std::string item;
  while (std::getline(in, item, ',')) lists.methods.push_back(item);
  experiments::check_budget_methods(lists.methods, "--methods");
  return lists;
}

json budget_meta(const BudgetArgs& args, const BudgetLists& lists) {
  json meta = experiments::environment_json();
  meta["command"] = command_line();
  meta["name"] = args.name;
  meta["devices"] = {{args.problem.device.str(), measure::describe_device(args.problem.device)}};
  meta["problem"] = experiments::to_json(args.problem);
  meta["problem"]["T"] = lists.lengths;  // every T of the run, not the default
  meta["methods"] = lists.methods;
  meta["fractions"] = lists.budgets.empty() ? json(lists.fractions) : json();
  meta["budgets"] = lists.budgets;
  meta["repeats"] = args.repeats;
  meta["warmup"] = args.warmup;
  meta["no_full"] = args.no_full;
  return meta;
}

// Revolve's predicted curve (Griewank's minimal recomputation per slot count, priced by the
// cost model), as "theory" records.
void append_revolve_theory(experiments::ResultsStore& store, const BudgetLength& at) {
  for (const auto& [slots, recompute_steps, p] : experiments::revolve_curve(at.model)) {
    store.append({{"key", fmt::format("T={}/theory/revolve/s={}", at.T, slots)},
                  {"kind", "theory"},
                  {"T", at.T},
                  {"method", "revolve"},
                  {"slots", slots},
                  {"recompute_steps", recompute_steps},
                  {"predicted", prediction_json(p)},
                  {"predicted_time_ratio", p.seconds / at.full_predicted.seconds},
                  {"full_peak_bytes", at.full_peak}});
  }
}

json point_record(const BudgetLength& at, const BudgetPoint& point, const std::string& key) {
  return {{"key", fmt::format("T={}/budget={}/{}", at.T, point.bytes, key)},
          {"T", at.T},
          {"problem", experiments::to_json(at.spec)},
          {"budget_bytes", point.bytes},
          {"budget_fraction", point.fraction},
          {"full_peak_bytes", at.full_peak},
          {"minimum_budget_bytes", at.minimum}};
}

// A method that fits no schedule under this budget: a record and a line saying so.
void record_unfit(experiments::ResultsStore& store, const BudgetLength& at,
                  const BudgetPoint& point, const Choices& choices) {
  for (const auto& [method, info] : choices.chosen.items()) {
    if (!info.contains("error")) continue;
    auto record = point_record(at, point, method);
    record["kind"] = "does_not_fit";
    record["method"] = method;
    record["run"] = {{"status", "does_not_fit"}};
    record["error"] = info["error"];
    store.append(record);
    std::cout << fmt::format("T={} budget={} ({:.1f}%) {:<28} does not fit: {}\n", at.T,
                             format_bytes(double(point.bytes)), 100 * point.fraction, method,
                             info["error"].get<std::string>());
  }
}

json measured_record(const BudgetLength& at, const BudgetPoint& point, const Choices& choices,
                     const experiments::MethodRun& run, const experiments::MethodRun* full) {
  auto record = point_record(at, point, run.spec);
  record["kind"] = "measured";
  record["run"] = experiments::to_json(run);
  // The budget figure's series: VLRNN at the best K ("uniform") and at K = T / sqrt(T)
  // ("sqrt") are both the method "vlrnn".
  const auto label = choices.label_of_spec.count(run.spec) ? choices.label_of_spec.at(run.spec)
                                                           : run.name;
  record["method"] = label;
  if (choices.chosen.contains(label)) record["chosen"] = choices.chosen[label];
  if (run.status != "ok") return record;
  const double peak = double(run.memory.iteration_peak_bytes);
  record["fits_budget"] = run.memory.iteration_peak_bytes <= point.bytes;
  if (full) {
    record["time_ratio"] = run.time.median / full->time.median;
    record.update(experiments::ratio_json(run, full));
  }
  if (choices.chosen.contains(label) && choices.chosen[label].contains("predicted")) {
    const auto predicted_peak = choices.chosen[label]["predicted"]["peak_bytes"].get<double>();
    record["peak_prediction_error"] = (predicted_peak - peak) / peak;
  }
  return record;
}

void print_measured(const BudgetLength& at, const BudgetPoint& point,
                    const experiments::MethodRun& run, const json& record) {
  const auto time = run.status == "ok" ? experiments::format_seconds(run.time.median) : run.status;
  const auto ratio = record.contains("time_ratio")
                         ? fmt::format("x{:.2f}", record["time_ratio"].get<double>())
                         : std::string();
  std::cout << fmt::format("T={} budget={} ({:.1f}%) {:<28} time {:>9} {:>6} iteration peak {:>10} {}\n",
                           at.T, format_bytes(double(point.bytes)), 100 * point.fraction,
                           run.description, time, ratio,
                           format_bytes(double(run.memory.iteration_peak_bytes)),
                           record.value("fits_budget", true) ? "" : "(over budget)");
}

// Every chosen method under one budget, measured interleaved with full in one run.
void measure_point(experiments::ResultsStore& store, const BudgetArgs& args,
                   const experiments::Problem& problem, const BudgetLength& at,
                   const BudgetPoint& point, const Choices& choices) {
  experiments::RunOptions options;
  options.warmup = args.warmup;
  options.repeats = args.repeats;
  apply_stability(args.measuring, args.repeats, options);
  options.gradient_error = args.gradient_error;
  options.progress = [](const std::string& line) { std::cerr << "  " << line << "\n"; };
  const auto runs = experiments::run_methods(problem, choices.specs, options);
  const auto* full = experiments::find_full(runs);
  for (const auto& run : runs) {
    const auto record = measured_record(at, point, choices, run, full);
    store.append(record);
    print_measured(at, point, run, record);
  }
}

void run_length(experiments::ResultsStore& store, const BudgetArgs& args,
                const BudgetLists& lists, int64_t T) {
  auto spec = args.problem;
  spec.time_steps = T;
  const auto problem = experiments::make_problem(spec);
  std::cerr << fmt::format("vlrnn budget: {}: measuring the cost model...\n", spec.describe());
  const BudgetLength at = experiments::measure_length(problem, !args.no_full);
  if (!at.bidirectional) append_revolve_theory(store, at);
  const auto points = experiments::budget_points(lists.budgets, lists.fractions, at.full_peak);
  for (const auto& point : points) {
    const auto choices = experiments::choose(lists.methods, !args.no_full, at, point.bytes);
    std::cerr << fmt::format("vlrnn budget: T = {}, budget {} ({:.1f}% of full's {}): {}\n", T,
                             format_bytes(double(point.bytes)), 100 * point.fraction,
                             format_bytes(double(at.full_peak)), fmt::join(choices.specs, " "));
    record_unfit(store, at, point, choices);
    if (!choices.specs.empty()) measure_point(store, args, problem, at, point, choices);
  }
}

int run_budget(BudgetArgs args) {
  const auto lists = parse_lists(args);
  args.problem.device = experiments::parse_device(args.device, "--device");
  apply_threads(args.measuring);
  check_clean_tree(args.measuring, "vlrnn budget");
  measure::CpuMemoryTracker::instance().install();  // before any problem exists
  const std::string out_dir =
      args.out_dir.empty() ? (std::filesystem::path("results") / args.name).string() : args.out_dir;
  experiments::ResultsStore store(out_dir);
  if (store.has_records()) store.move_to_previous();
  store.write_meta(budget_meta(args, lists));
  for (int64_t T : lists.lengths) run_length(store, args, lists, T);
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
      "fraction of full BPTT's measured iteration peak, or bytes), the planner (planner:budget=B), "
      "uniform VLRNN blocks at the best K predicted to fit, revolve at the best slot count "
      "predicted to fit, and sqrt(T) checkpointing, measured interleaved with full in one run; "
      "plus revolve's predicted curve from the measured cost model. On a bidirectional "
      "model (bilstm, bigru, bi:<kind>) the planner runs bivlrnn under the budget, sqrt is "
      "bivlrnn at K = sqrt(T), and uniform and revolve do not apply. Writes DIR/results.jsonl "
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
                  "budgets as fractions of full BPTT's measured iteration peak")->capture_default_str();
  sub->add_option("--budgets", args->budgets, "budgets in bytes (instead of --fractions)");
  sub->add_option("--methods", args->methods, "any of planner,uniform,revolve,sqrt")
      ->capture_default_str();
  sub->add_flag("--no-full", args->no_full,
                "do not run full BPTT (fractions then refer to its predicted peak)");
  sub->add_flag("--gradient-error", args->gradient_error,
                "also compare each method's gradients with full BPTT");
  sub->add_option("--model", p.model, model_option_help())->capture_default_str();
  sub->add_option("--input", p.input_size, "F")->capture_default_str();
  sub->add_option("--hidden", p.hidden_size, "H")->capture_default_str();
  sub->add_option("--layers", p.num_layers, "L")->capture_default_str();
  sub->add_option("--batch,-B", p.batch, "B")->capture_default_str();
  sub->add_option("--classes", p.head_outputs, "C: head outputs")->capture_default_str();
  sub->add_option("--repeats", args->repeats, "timed iterations per method")->capture_default_str();
  sub->add_option("--warmup", args->warmup, "untimed iterations per method")->capture_default_str();
  add_device_option(sub, args->device,
                    "where the model runs; budgets are then in that device's memory")
      ->capture_default_str();
  add_measuring_options(sub, args->measuring);
  add_stability_options(sub, args->measuring);
  sub->callback([args, &exit_code] { exit_code = run_budget(*args); });
}

}  // namespace vlrnn::cli
