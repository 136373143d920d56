#include "commands/command.h"

#include "lib/results_store.h"
#include "lib/sweep_runner.h"
#include "lib/units.h"
#include "lib/user_models.h"

#include "vlrnn/verify/matrix.h"
#include "vlrnn/verify/random_cases.h"
#include "vlrnn/verify/report.h"

#include <fmt/format.h>

#include <chrono>
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
};

// The cases to run: the matrix, N random configurations, or one random configuration.
std::vector<verify::VerifyCase> cases_for(const VerifyArgs& args) {
  // A head file alone is verified on an LSTM (its H the head's Z).
  const std::string head =
      args.head_file.empty() ? "ce" : experiments::add_head_file(args.head_file);
  if (!args.model_file.empty()) {
    return verify::model_matrix(experiments::add_model_file(args.model_file), head);
  }
  if (!args.model.empty() || !args.head_file.empty()) {
    return verify::model_matrix(args.model.empty() ? "lstm" : args.model, head);
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
  const auto all = cases_for(args);
  std::vector<verify::VerifyCase> selected;
  for (const auto& spec : all) {
    const std::string label = spec.name() + " " + spec.method;
    if (args.filter.empty() || label.find(args.filter) != std::string::npos) selected.push_back(spec);
  }
  TORCH_CHECK(!selected.empty(), "--filter: no case matches \"", args.filter, "\"");
  if (!args.json_path.empty()) experiments::check_writable_file(args.json_path, "--json");

  std::unique_ptr<experiments::ResultsStore> store;
  nlohmann::json meta;
  if (!args.out_dir.empty()) {
    store = std::make_unique<experiments::ResultsStore>(args.out_dir);
    if (store->has_records()) store->move_to_previous();
    // The tree as it was when the run began (a later edit does not make it dirty).
    meta = experiments::environment_json();
    meta["command"] = command_line();
    meta["verify"] = {{"random_configurations", args.random}, {"seed", args.seed},
                      {"cases", selected.size()}, {"summary", "running"}};
    if (args.random_case >= 0) meta["verify"]["random_case"] = args.random_case;
    store->write_meta(meta);
  }
  const bool random = args.random > 0 || args.random_case >= 0;
  const bool show_progress = selected.size() > 200;
  const auto start = std::chrono::steady_clock::now();
  std::vector<verify::VerifyOutcome> outcomes;
  int64_t failed = 0;
  for (const auto& spec : selected) {
    auto outcome = verify::run_case(spec);
    if (random) outcome.rerun = verify::random_case_command(spec);
    if (!outcome.passed && (outcome.exact || !outcome.error.empty())) ++failed;
    if (store) store->append(case_record(outcome));
    outcomes.push_back(std::move(outcome));
    if (show_progress && (outcomes.size() % 50 == 0 || outcomes.size() == selected.size())) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double eta = elapsed / double(outcomes.size()) * double(selected.size() - outcomes.size());
      std::cerr << fmt::format("verify: {}/{} cases, {} failed, {} elapsed, ETA {}\n",
                               outcomes.size(), selected.size(), failed,
                               experiments::format_seconds(elapsed),
                               experiments::format_seconds(eta));
    }
  }
  verify::print_table(std::cout, outcomes, args.failures_only || (random && outcomes.size() > 200));
  const std::string summary = verify::summary_line(outcomes);
  std::cout << "verify: " << summary << "\n";
  if (!args.json_path.empty()) {
    verify::write_json(args.json_path, outcomes);
    std::cout << "verify: wrote " << args.json_path << "\n";
  }
  if (store) {
    store->write_csv();
    meta["verify"]["failed"] = failed;
    meta["verify"]["summary"] = summary;
    meta["verify"]["seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
      "are reported with their gradient error and cosine, never failed.");
  sub->add_option("--json", args->json_path, "also write every case to this JSON file");
  sub->add_option("--out", args->out_dir,
                  "also record every case in DIR/results.jsonl (as it finishes), results.csv "
                  "and meta.json");
  sub->add_option("--filter", args->filter,
                  "run only cases whose name or method contains this text (e.g. lstmx3, f32, "
                  "block=7)");
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
  sub->callback([args, &exit_code] { exit_code = run_verify(*args); });
}

}  // namespace vlrnn::cli
