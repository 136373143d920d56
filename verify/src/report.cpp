#include "vlrnn/verify/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace vlrnn::verify {

void print_table(std::ostream& out, const std::vector<VerifyOutcome>& outcomes,
                 bool failures_only) {
  out << fmt::format("{:<38} {:<22} {:>10} {:>10} {:>8}  {:<28} {}\n", "case", "method",
                     "max abs", "max rel", "tol", "worst tensor", "result");
  for (const auto& o : outcomes) {
    if (failures_only && o.passed) continue;
    const std::string result = !o.error.empty() ? "ERROR"
                               : !o.exact       ? "approx"
                               : o.passed       ? "pass"
                                                : "FAIL";
    if (!o.error.empty()) {
      out << fmt::format("{:<38} {:<22} {}: {}\n", o.spec.name(), o.spec.method, result, o.error);
      if (!o.rerun.empty()) out << "    rerun: " << o.rerun << "\n";
      continue;
    }
    std::string tail;
    if (!o.exact) {
      tail = fmt::format(" (grad rel err {:.3e}, cosine {:.6f})", o.diff.grad_rel_error,
                         o.diff.grad_cosine);
    }
    out << fmt::format("{:<38} {:<22} {:>10.2e} {:>10.2e} {:>8.0e}  {:<28} {}{}\n", o.spec.name(),
                       o.spec.method, o.diff.max_abs, o.diff.max_rel, o.tolerance, o.diff.worst,
                       result, tail);
    if (!o.passed && !o.diagnosis.empty()) out << "    likely cause: " << o.diagnosis << "\n";
    if (!o.passed && !o.rerun.empty()) out << "    rerun: " << o.rerun << "\n";
  }
}

std::string summary_line(const std::vector<VerifyOutcome>& outcomes) {
  int passed = 0, failed = 0, approximate = 0;
  for (const auto& o : outcomes) {
    if (o.error.empty() && !o.exact) {
      ++approximate;
    } else if (o.passed) {
      ++passed;
    } else {
      ++failed;
    }
  }
  std::string line = fmt::format("{} passed, {} failed", passed, failed);
  if (approximate > 0) line += fmt::format(" ({} approximate-method cases reported)", approximate);
  return line;
}

void write_json(const std::string& path, const std::vector<VerifyOutcome>& outcomes) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& o : outcomes) {
    cases.push_back({{"case", o.spec.name()},
                     {"method", o.spec.method},
                     {"model", o.spec.model},
                     {"num_layers", o.spec.num_layers},
                     {"head", o.spec.head},
                     {"reduction", o.spec.reduction},
                     {"dtype", o.spec.dtype == torch::kFloat64 ? "float64" : "float32"},
                     {"h0", o.spec.h0_with_grad ? "grad" : "none"},
                     {"time_steps", o.spec.time_steps},
                     {"batch", o.spec.batch},
                     {"lengths", o.spec.lengths},
                     {"seed", o.spec.seed},
                     {"exact", o.exact},
                     {"max_abs_diff", o.diff.max_abs},
                     {"max_rel_diff", o.diff.max_rel},
                     {"worst_tensor", o.diff.worst},
                     {"grad_rel_error", o.diff.grad_rel_error},
                     {"grad_cosine", o.diff.grad_cosine},
                     {"tolerance", o.tolerance},
                     {"passed", o.passed},
                     {"error", o.error},
                     {"diagnosis", o.diagnosis},
                     {"rerun", o.rerun}});
  }
  std::ofstream file(path);
  TORCH_CHECK(file, "--json: cannot open \"", path, "\" for writing");
  file << nlohmann::json{{"summary", summary_line(outcomes)}, {"cases", cases}}.dump(2) << "\n";
}

}  // namespace vlrnn::verify
