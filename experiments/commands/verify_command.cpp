#include "commands/command.h"

#include "lib/environment.h"
#include "lib/method_checks.h"
#include "lib/method_specs.h"
#include "lib/problem.h"
#include "lib/results_store.h"
#include "lib/units.h"
#include "lib/user_models.h"
#include "lib/verify_eta.h"

#include "vlrnn/measure/environment.h"
#include "vlrnn/verify/matrix.h"
#include "vlrnn/verify/random_cases.h"
#include "vlrnn/verify/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

namespace vlrnn::cli {
namespace {

struct VerifyArgs {
  std::string json_path;
  std::string out_dir;
  std::string filter;
  bool failures_only = false;
  int64_t random = 0;         // configurations to draw (0: the default matrix)
  uint64_t seed = 1;
  int64_t random_case = -1;  // >= 0: rerun this one random configuration
  std::string model;         // one model kind instead of the matrix's models
  std::string model_file;    // a TorchScript model (lib/user_models.h), as one kind
  std::string head_file;     // a TorchScript head (lib/user_models.h), as the cases' head
  // The user's shapes for --model / --model-file (-1 / empty: the reduced grid's own).
  int64_t time_steps = -1;
  int64_t batch = -1;
  std::string dtype;          // float32 or float64; empty: both
  double min_length = -1.0;
  std::string methods;        // comma-separated specs; empty: every method's variants
  std::string device = "cpu";  // where every case runs (experiments::parse_device)
};

bool user_shapes(const VerifyArgs& args) {
  return args.time_steps != -1 || args.batch != -1 || !args.dtype.empty() ||
         args.min_length != -1.0 || !args.methods.empty();
}

// The grid of --model / --model-file: the reduced grid, at the user's shapes where given.
// Bad values fail naming their flag.
verify::ModelGrid model_grid(const VerifyArgs& args) {
  verify::ModelGrid grid;
  TORCH_CHECK(args.time_steps == -1 || args.time_steps >= 1,
              "--T: expected >= 1 time steps, got ", args.time_steps);
  TORCH_CHECK(args.batch == -1 || args.batch >= 1, "--batch: expected >= 1 sequences, got ",
              args.batch);
  TORCH_CHECK(args.min_length == -1.0 || (args.min_length > 0.0 && args.min_length <= 1.0),
              "--min-length: expected a fraction of T in (0, 1] (lengths uniform in [f*T, T]), "
              "got ", args.min_length);
  if (args.time_steps != -1) grid.time_steps = args.time_steps;
  if (args.batch != -1) grid.batch = args.batch;
  if (args.min_length != -1.0) grid.min_length = args.min_length;
  if (!args.dtype.empty()) {
    TORCH_CHECK(args.dtype == "float32" || args.dtype == "float64",
                "--dtype: expected float32 or float64 (default: both), got \"", args.dtype, "\"");
    grid.dtypes = {experiments::parse_dtype(args.dtype)};
  }
  if (!args.methods.empty()) {
    grid.methods = experiments::split_method_list(args.methods);
    try {
      experiments::check_method_specs(grid.methods);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "--methods: ", e.what_without_backtrace());
    }
    const bool only_full = std::all_of(grid.methods.begin(), grid.methods.end(),
                                       [](const std::string& m) { return m == "full"; });
    TORCH_CHECK(!only_full, "--methods: expected at least one method besides full (the "
                "reference every case compares with), got \"", args.methods, "\"");
  }
  if (!args.model_file.empty()) {
    grid.label = std::filesystem::path(args.model_file).filename().string();
  }
  return grid;
}

// "vlrnn verify: cell.pt (models/cell.pt) F=8 H=16 | T=28 B=3, 4 in the variable-length
// sets | lengths all T; 17,28,1,4; 17,9,1,4 | float64 float32 | 96 cases": what a --model
// run verifies.
std::string model_header(const std::string& kind, const std::vector<verify::VerifyCase>& cases) {
  const auto model = make_model({kind, cases.front().input_size, cases.front().hidden_size, 1, 0.0});
  std::vector<int64_t> batches;
  std::vector<std::string> dtypes;
  for (const auto& c : cases) {
    if (std::find(batches.begin(), batches.end(), c.batch) == batches.end()) batches.push_back(c.batch);
    const std::string d = experiments::dtype_name(c.dtype);
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
  }
  std::string b = fmt::format("B={}", batches.front());
  if (batches.size() > 1) {
    b += fmt::format(", {} in the variable-length sets",
                     fmt::join(batches.begin() + 1, batches.end(), "/"));
  }
  std::vector<std::vector<int64_t>> length_sets;
  for (const auto& c : cases) {
    if (std::find(length_sets.begin(), length_sets.end(), c.lengths) == length_sets.end()) {
      length_sets.push_back(c.lengths);
    }
  }
  std::vector<std::string> sets;
  for (const auto& set : length_sets) {
    sets.push_back(set.empty() ? "all T" : fmt::format("{}", fmt::join(set, ",")));
  }
  const std::string lengths = " | lengths " + fmt::format("{}", fmt::join(sets, "; "));
  const std::string name = cases.front().model_label.empty() ? kind
                           : cases.front().model_label + " (" + kind + ")";
  return fmt::format("vlrnn verify: {} F={} H={} | T={} {}{} | {} | {} cases", name,
                     model->input_size(), model->output_size(), cases.front().time_steps, b,
                     lengths, fmt::join(dtypes, " "), cases.size());
}

// The cases to run: the matrix, N random configurations, or one random configuration.
std::vector<verify::VerifyCase> cases_for(const VerifyArgs& args) {
  // A head file alone is verified on an LSTM (its H the head's Z).
  const std::string head =
      args.head_file.empty() ? "ce" : experiments::add_head_file(args.head_file);
  if (!args.model_file.empty()) {
    auto grid = model_grid(args);  // bad values fail before the file loads
    grid.head = head;
    return verify::model_matrix(experiments::add_model_file(args.model_file), grid);
  }
  if (!args.model.empty() || !args.head_file.empty()) {
    auto grid = model_grid(args);
    grid.head = head;
    return verify::model_matrix(args.model.empty() ? "lstm" : args.model, grid);
  }
  if (args.random_case >= 0) return verify::random_configuration(uint64_t(args.random_case));
  if (args.random == 0) return verify::default_matrix();
  std::vector<verify::VerifyCase> cases;
  for (int64_t i = 0; i < args.random; ++i) {
    for (auto& c : verify::random_configuration(verify::random_case_seed(args.seed, i))) {
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// A results.jsonl record: the outcome's fields (report.h), a key and a kind.
nlohmann::json case_record(const verify::VerifyOutcome& o) {
  auto record = nlohmann::json::parse(verify::outcome_json(o));
  record["key"] = fmt::format("{}/{}/{}", o.spec.seed, o.spec.name(), o.spec.method);
  record["kind"] = "verify";
  return record;
}

int run_verify(const VerifyArgs& args) {
  TORCH_CHECK(args.random >= 0, "--random: expected a number of configurations >= 0, got ",
              args.random);
  const bool one_model = !args.model.empty() || !args.model_file.empty() ||
                         !args.head_file.empty();
  TORCH_CHECK(!user_shapes(args) || one_model,
              "--T, --batch, --dtype, --min-length and --methods: expected with --model, "
              "--model-file or --head-file (the matrix and --random choose their own shapes), "
              "got them without any");
  const auto device = experiments::parse_device(args.device, "--device");
  auto all = cases_for(args);
  for (auto& spec : all) spec.device = device;
  std::vector<verify::VerifyCase> selected;
  for (const auto& spec : all) {
    const std::string label = spec.name() + " " + spec.method;
    if (args.filter.empty() || label.find(args.filter) != std::string::npos) selected.push_back(spec);
  }
  TORCH_CHECK(!selected.empty(), "--filter: no case matches \"", args.filter, "\"");
  if (!args.json_path.empty()) experiments::check_writable_file(args.json_path, "--json");

  std::unique_ptr<experiments::ResultsStore> store;
  // meta.json of --out and the meta of --json: the machine as the run began.
  nlohmann::json meta = experiments::environment_json();
  meta["command"] = command_line();
  meta["started"] = experiments::utc_now();
  meta["verify"] = {{"random_configurations", args.random}, {"seed", args.seed},
                    {"cases", selected.size()}, {"summary", "running"}};
  meta["devices"] = {{device.str(), measure::describe_device(device)}};
  if (args.random_case >= 0) meta["verify"]["random_case"] = args.random_case;
  if (!args.out_dir.empty()) {
    store = std::make_unique<experiments::ResultsStore>(args.out_dir);
    if (store->has_records()) store->move_to_previous();
    store->write_meta(meta);
  }
  const bool random = args.random > 0 || args.random_case >= 0;
  std::string warning;
  if (one_model) {
    std::cout << model_header(selected.front().model, selected) << "\n";
    // Once per model, not per case: does the model draw per call (NOTE [ Cut dependence,
    // whatever the generator's layout ])? A model that throws shows in its cases' rows.
    try {
      const auto& first = selected.front();
      warning = verify::per_call_draws_warning(verify::case_cut_dependence(first),
                                               verify::tolerance_for(first.dtype));
    } catch (const std::exception&) {
    }
    if (!warning.empty()) std::cout << "WARNING: " << warning << "\n";
  }
  // Progress on stderr for a long run: many cases, or a model at the user's shapes.
  const bool show_progress = selected.size() > 200 || (one_model && user_shapes(args));
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  experiments::VerifyEta eta;  // NOTE [ Verify's ETA ]
  std::vector<verify::VerifyOutcome> outcomes;
  int64_t failed = 0;
  for (const auto& spec : selected) {
    const auto case_start = std::chrono::steady_clock::now();
    auto outcome = verify::run_case(spec);
    const auto now = std::chrono::steady_clock::now();
    eta.finished(spec, std::chrono::duration<double>(now - case_start).count());
    if (random) outcome.rerun = verify::random_case_command(spec);
    if (!outcome.passed && (outcome.exact || !outcome.error.empty())) ++failed;
    if (store) store->append(case_record(outcome));
    outcomes.push_back(std::move(outcome));
    const bool due = outcomes.size() % 50 == 0 || outcomes.size() == selected.size() ||
                     now - last_progress > std::chrono::seconds(20);
    if (show_progress && due) {
      last_progress = now;
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const double left = eta.remaining(selected, outcomes.size());
      const bool done = outcomes.size() == selected.size();
      std::cerr << fmt::format("verify: {}/{} cases, {} failed, {} elapsed{}\n",
                               outcomes.size(), selected.size(), failed,
                               experiments::format_seconds(elapsed),
                               done ? "" : ", ETA " + (left >= 0 ? experiments::format_seconds(left)
                                                                 : std::string("?")));
    }
  }
  verify::print_table(std::cout, outcomes, args.failures_only || (random && outcomes.size() > 200));
  const std::string summary = verify::summary_line(outcomes);
  std::cout << "verify: " << summary << "\n";
  if (!warning.empty()) {
    std::cout << "verify: WARNING: the model draws its random numbers once per forward() call "
              << (device.is_cpu() ? "(above): a pass on this CPU does not carry over to a GPU\n"
                                  : "(above): a pass on this GPU does not carry over to the CPU "
                                    "or another GPU\n");
  }
  meta["verify"]["failed"] = failed;
  meta["verify"]["summary"] = summary;
  if (!warning.empty()) meta["verify"]["warning"] = warning;
  meta["verify"]["time_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  meta["finished"] = experiments::utc_now();
  if (!args.json_path.empty()) {
    std::vector<nlohmann::json> records;
    for (const auto& outcome : outcomes) records.push_back(case_record(outcome));
    experiments::write_results_file(args.json_path, meta, records, "--json");
    std::cout << "verify: wrote " << args.json_path << "\n";
  }
  if (store) {
    store->write_csv();
    store->write_meta(meta);
    std::cout << "verify: wrote " << store->jsonl_path() << ", results.csv, meta.json\n";
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace

void add_verify_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<VerifyArgs>();
  auto* sub = app.add_subcommand(
      "verify", "Prove every exact method's gradients equal to full BPTT (exit 1 on any failure)");
  sub->footer(
      "Without --random, runs the matrix models x method options (e.g. block lengths) x\n"
      "reductions x dtypes x h0 modes x lengths; with --random N, N random configurations\n"
      "(model, layers, sizes up to H=128 B=16 T=600, lengths, dtype, ...) x every exact method\n"
      "with random options. Each case is compared with full BPTT: loss, per-step losses, every\n"
      "parameter gradient, dL/dh0, dL/dx and the final state. Max rel diff is per tensor,\n"
      "relative to its largest entry; tolerance 1e-10 in float64, 1e-5 in float32. A failing\n"
      "random case prints a command that reruns just it. Approximate methods (truncated BPTT)\n"
      "are reported with their gradient error and cosine, never failed.\n"
      "--model / --model-file verify one model on a reduced grid, at T=28 unless --T, --batch,\n"
      "--dtype, --min-length and --methods set your shapes; the header names them. A model\n"
      "that draws random numbers once per forward() call instead of per step gets a WARNING:\n"
      "it may pass on this CPU and still fail on a GPU or an MKL build.");
  sub->add_option("--json", args->json_path, "also write every case to this JSON file");
  sub->add_option("--out", args->out_dir,
                  "also record every case in DIR/results.jsonl (as it finishes), results.csv "
                  "and meta.json");
  sub->add_option("--filter", args->filter,
                  "run only cases whose name or method contains this text (e.g. lstmx3, f32, "
                  "block_length=7)");
  sub->add_flag("--failures-only", args->failures_only, "print only the rows that fail");
  sub->add_option("--random", args->random,
                  "verify N random configurations instead of the matrix")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", args->seed, "seed of the random configurations (default 1)");
  sub->add_option("--random-case", args->random_case,
                  "rerun the one random configuration with this case seed (printed by a "
                  "failing --random run)")
      ->check(CLI::NonNegativeNumber)
      ->excludes("--random");
  sub->add_option("--model", args->model,
                  "verify one model kind (built-in, or a plugin's) on a reduced grid instead "
                  "of the matrix: every method x reductions x dtypes x h0 modes x lengths")
      ->excludes("--random")
      ->excludes("--random-case");
  sub->add_option("--model-file", args->model_file,
                  "as --model, for a TorchScript model file (vlrnn/core/script_model.h; "
                  "scripts/export_cell.py saves an example)")
      ->excludes("--model")
      ->excludes("--random")
      ->excludes("--random-case");
  sub->add_option("--head-file", args->head_file,
                  "verify with this TorchScript head (its own loss; vlrnn/core/script_head.h; "
                  "scripts/export_head.py saves an example) instead of ce: with --model or "
                  "--model-file, or alone on an LSTM whose H is the head's Z")
      ->excludes("--random")
      ->excludes("--random-case");
  sub->add_option("--T,-T", args->time_steps,
                  "with --model / --model-file: T, time steps per sequence (default 28; the "
                  "method variants follow it, e.g. K = T)");
  sub->add_option("--batch,-B", args->batch,
                  "with --model / --model-file: B, sequences per batch (default 3, and 4 in "
                  "the variable-length sets); every length set gets B sequences");
  sub->add_option("--dtype", args->dtype,
                  "with --model / --model-file: float32 or float64 (default: both)");
  sub->add_option("--min-length", args->min_length,
                  "with --model / --model-file: one variable-length batch, lengths uniform in "
                  "[f*T, T] (one of them T), instead of the three length sets");
  add_device_option(sub, args->device,
                    "where every case runs, full BPTT and the method alike (the weights and "
                    "data are drawn on the CPU from the case's seed, then moved)")
      ->capture_default_str();
  sub->add_option("--methods", args->methods,
                  "with --model / --model-file: comma-separated method specs to verify, e.g. "
                  "vlrnn:block_length=64,checkpoint (default: every method with the reduced grid's "
                  "options; full is the reference)");
  sub->callback([args, &exit_code] { exit_code = run_verify(*args); });
}

}  // namespace vlrnn::cli
