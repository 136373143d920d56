#include "commands/command.h"

#include "vlrnn/verify/report.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace vlrnn::cli {
namespace {

struct VerifyArgs {
  std::string json_path;
  std::string filter;
  bool failures_only = false;
};

int run_verify(const VerifyArgs& args) {
  std::vector<verify::VerifyOutcome> outcomes;
  for (const auto& spec : verify::default_matrix()) {
    const std::string label = spec.name() + " " + spec.method;
    if (!args.filter.empty() && label.find(args.filter) == std::string::npos) continue;
    outcomes.push_back(verify::run_case(spec));
  }
  TORCH_CHECK(!outcomes.empty(), "--filter: no case matches \"", args.filter, "\"");
  verify::print_table(std::cout, outcomes, args.failures_only);
  const std::string summary = verify::summary_line(outcomes);
  std::cout << "verify: " << summary << "\n";
  if (!args.json_path.empty()) {
    verify::write_json(args.json_path, outcomes);
    std::cout << "verify: wrote " << args.json_path << "\n";
  }
  for (const auto& o : outcomes) {
    if (!o.passed && (o.exact || !o.error.empty())) return 1;
  }
  return 0;
}

}  // namespace

void add_verify_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<VerifyArgs>();
  auto* sub = app.add_subcommand(
      "verify", "Prove every exact method's gradients equal to full BPTT (exit 1 on any failure)");
  sub->footer(
      "Runs the matrix models x method options (e.g. block lengths) x reductions x dtypes x\n"
      "h0 modes and compares with full BPTT: loss, per-step losses, every parameter gradient,\n"
      "dL/dh0, dL/dx and the final state. Max rel diff is per tensor, relative to its largest\n"
      "entry; tolerance 1e-10 in float64, 1e-5 in float32. Approximate methods (truncated\n"
      "BPTT) are reported with their gradient error and cosine, never failed.");
  sub->add_option("--json", args->json_path, "also write every case to this JSON file");
  sub->add_option("--filter", args->filter,
                  "run only cases whose name contains this text (e.g. lstmx3, f32, block=7)");
  sub->add_flag("--failures-only", args->failures_only, "print only the rows that fail");
  sub->callback([args, &exit_code] { exit_code = run_verify(*args); });
}

}  // namespace vlrnn::cli
