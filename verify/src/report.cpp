#include "vlrnn/verify/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace vlrnn::verify {

namespace {

// A diagnosis's headline: the text before its first ": " (the whole text when it has none).
std::string headline(const std::string& diagnosis) {
  return diagnosis.substr(0, diagnosis.find(": "));
}

}  // namespace

void print_table(std::ostream& out, const std::vector<VerifyOutcome>& outcomes,
                 bool failures_only) {
  // Columns as wide as their longest entry (a plugin's kind or a long method spec must not
  // push the numbers out of line), at least the widths of the matrix's own names.
  size_t case_width = 38, method_width = 22, worst_width = 28;
  for (const auto& o : outcomes) {
    if (failures_only && o.passed) continue;
    case_width = std::max(case_width, o.spec.name().size());
    method_width = std::max(method_width, o.spec.method.size());
    if (o.error.empty()) worst_width = std::max(worst_width, o.diff.worst.size());
  }
  out << fmt::format("{:<{}} {:<{}} {:>10} {:>10} {:>8}  {:<{}} {}\n", "case", case_width,
                     "method", method_width, "max abs", "max rel", "tol", "worst tensor",
                     worst_width, "result");
  // NOTE [ One explanation per cause ]: a model that breaks block methods usually fails
  // every case the same way (120 rows of a per-call dropout mask); its explanation is
  // printed once, after the table, with the number of rows it explains, and each such row
  // only points to it.
  struct Cause {
    std::string text;     // the first row's full diagnosis
    std::string example;  // that row's case and method
    int64_t rows = 0;
  };
  std::vector<Cause> causes;
  for (const auto& o : outcomes) {
    if (failures_only && o.passed) continue;
    const std::string result = !o.error.empty() ? "ERROR"
                               : !o.exact       ? "approx"
                               : o.passed       ? "pass"
                                                : "FAIL";
    if (!o.error.empty()) {
      out << fmt::format("{:<{}} {:<{}} {}: {}\n", o.spec.name(), case_width, o.spec.method,
                         method_width, result, o.error);
      if (!o.rerun.empty()) out << "    rerun: " << o.rerun << "\n";
      continue;
    }
    std::string tail;
    if (!o.exact) {
      tail = fmt::format(" (grad rel err {:.3e}, cosine {:.6f})", o.diff.grad_rel_error,
                         o.diff.grad_cosine);
    }
    size_t cause = causes.size();
    if (!o.passed && !o.diagnosis.empty()) {
      const std::string head = headline(o.diagnosis);
      cause = 0;
      while (cause < causes.size() && headline(causes[cause].text) != head) ++cause;
      if (cause == causes.size()) causes.push_back({o.diagnosis, o.spec.name() + " " + o.spec.method});
      ++causes[cause].rows;
      tail += fmt::format(" (likely cause [{}], below)", cause + 1);
    }
    out << fmt::format("{:<{}} {:<{}} {:>10.2e} {:>10.2e} {:>8.0e}  {:<{}} {}{}\n",
                       o.spec.name(), case_width, o.spec.method, method_width, o.diff.max_abs,
                       o.diff.max_rel, o.tolerance, o.diff.worst, worst_width, result, tail);
    if (!o.passed && !o.rerun.empty()) out << "    rerun: " << o.rerun << "\n";
  }
  for (size_t i = 0; i < causes.size(); ++i) {
    out << fmt::format("likely cause [{}] of {} failed row{} (e.g. {}): {}\n", i + 1,
                       causes[i].rows, causes[i].rows == 1 ? "" : "s", causes[i].example,
                       causes[i].text);
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

namespace {

nlohmann::json outcome_to_json(const VerifyOutcome& o) {
  const auto& c = o.spec;
  return {{"case", c.name()},
          {"method", c.method},
          {"seed", c.seed},
          {"model", c.model},
          {"num_layers", c.num_layers},
          {"dropout", c.dropout},
          {"head", c.head},
          {"reduction", c.reduction},
          {"dtype", dtype_name(c.dtype)},
          {"h0", c.h0_with_grad ? "grad" : "none"},
          {"inputs_grad", c.inputs_with_grad},
          {"time_steps", c.time_steps},
          {"batch", c.batch},
          {"input_size", c.input_size},
          {"H", c.hidden_size},
          {"lengths", c.lengths},
          {"segment_starts", c.segment_starts},
          {"device", c.device.str()},
          {"exact", o.exact},
          {"max_abs", o.diff.max_abs},
          {"max_rel", o.diff.max_rel},
          {"worst", o.diff.worst},
          {"grad_rel_error", o.diff.grad_rel_error},
          {"grad_cosine", o.diff.grad_cosine},
          {"tolerance", o.tolerance},
          {"passed", o.passed},
          {"error", o.error},
          {"diagnosis", o.diagnosis},
          {"rerun", o.rerun}};
}

}  // namespace

std::string outcome_json(const VerifyOutcome& outcome) { return outcome_to_json(outcome).dump(); }

}  // namespace vlrnn::verify
