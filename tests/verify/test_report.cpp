// The verification table: columns as wide as their longest entry (a model file's or a
// plugin's name must not break them), and one explanation per cause, not one per failed row
// (NOTE [ One explanation per cause ] in verify/src/report.cpp).
#include "test_util.h"

#include "vlrnn/verify/report.h"

#include <fmt/format.h>

#include <sstream>

namespace vlrnn::verify {
namespace {

VerifyOutcome failed_row(const std::string& label, const std::string& method, double by) {
  VerifyOutcome o;
  o.spec.model = "cell";
  o.spec.model_label = label;
  o.spec.method = method;
  o.exact = true;
  o.passed = false;
  o.tolerance = 1e-10;
  o.diff.max_rel = by;
  o.diff.worst = "grad inputs";
  o.diagnosis = fmt::format(
      "the model's outputs depend on where the sequence is cut into blocks: differ by {:.2e}", by);
  return o;
}

TEST(Report, OneExplanationPerCauseNotOnePerRow) {
  const std::vector<VerifyOutcome> rows = {failed_row("cell.pt", "vlrnn:block_length=1", 0.5),
                                           failed_row("cell.pt", "vlrnn:block_length=7", 0.25),
                                           failed_row("cell.pt", "checkpoint", 0.125)};
  std::ostringstream out;
  print_table(out, rows);
  const std::string text = out.str();
  size_t count = 0;
  for (size_t at = text.find("depend on where the sequence is cut"); at != std::string::npos;
       at = text.find("depend on where the sequence is cut", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << text;
  EXPECT_NE(text.find("likely cause [1] of 3 failed rows"), std::string::npos) << text;
}

TEST(Report, ColumnsHoldLongCaseNames) {
  auto short_row = failed_row("cell.pt", "vlrnn:block_length=7", 0.5);
  auto long_row = failed_row(std::string(70, 'm'), "vlrnn:block_length=7", 0.5);
  short_row.diagnosis = long_row.diagnosis = "";
  std::ostringstream out;
  print_table(out, {short_row, long_row});
  std::istringstream lines(out.str());
  std::string line;
  std::vector<size_t> method_at;
  while (std::getline(lines, line)) {
    if (line.find("vlrnn:block_length=7") != std::string::npos) method_at.push_back(line.find("vlrnn:block_length=7"));
  }
  ASSERT_EQ(method_at.size(), 2u) << out.str();
  EXPECT_EQ(method_at[0], method_at[1]) << out.str();
}

}  // namespace
}  // namespace vlrnn::verify
