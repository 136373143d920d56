#include "test_util.h"

#include "vlrnn/verify/compare.h"
#include "vlrnn/verify/matrix.h"
#include "vlrnn/verify/report.h"
#include "vlrnn/registry/bidirectional.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

namespace vlrnn::verify {
namespace {

GradientSnapshot snapshot_of(std::vector<std::pair<std::string, torch::Tensor>> tensors) {
  GradientSnapshot s;
  s.tensors = std::move(tensors);
  return s;
}

// Exact in float64 and float32; to 4 ε below, where one rounding moves a result further.
TEST(Compare, ToleranceAndNameFollowTheDtype) {
  EXPECT_EQ(tolerance_for(torch::kFloat64), 1e-10);
  EXPECT_EQ(tolerance_for(torch::kFloat32), 1e-5);
  EXPECT_EQ(tolerance_for(torch::kBFloat16), 0.03125);
  EXPECT_EQ(tolerance_for(torch::kFloat16), 0.00390625);
  EXPECT_EQ(dtype_name(torch::kFloat64), "float64");
  EXPECT_EQ(dtype_name(torch::kBFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(torch::kFloat16), "float16");
}

TEST(Compare, IdenticalSnapshotsDifferByZero) {
  auto a = torch::randn({4, 4}, torch::kFloat64);
  auto d = compare(snapshot_of({{"grad model.w", a}}), snapshot_of({{"grad model.w", a.clone()}}));
  EXPECT_EQ(d.max_abs, 0.0);
  EXPECT_EQ(d.max_rel, 0.0);
  EXPECT_NEAR(d.grad_cosine, 1.0, 1e-15);
}

TEST(Compare, NamesTheWorstTensorAndScalesByItsLargestEntry) {
  auto a = torch::ones({3}, torch::kFloat64);
  auto b = torch::full({3}, 100.0, torch::kFloat64);
  auto got = snapshot_of({{"x", a + 1e-3}, {"y", b + 1e-3}});
  auto d = compare(got, snapshot_of({{"x", a}, {"y", b}}));
  EXPECT_EQ(d.worst, "x");
  EXPECT_NEAR(d.max_rel, 1e-3, 1e-12);
}

TEST(Compare, NanNeverPasses) {
  auto a = torch::ones({3}, torch::kFloat64);
  auto bad = a.clone();
  bad[1] = NAN;
  auto d = compare(snapshot_of({{"x", bad}}), snapshot_of({{"x", a}}));
  EXPECT_GT(d.max_rel, 1.0);
}

TEST(Compare, MismatchedSnapshotsAreAnError) {
  auto a = torch::ones({3});
  testing::expect_error_mentions(
      [&] { compare(snapshot_of({{"x", a}}), snapshot_of({{"y", a}})); }, {"x", "y"});
}

TEST(Matrix, CoversTheIssueAxes) {
  auto cases = default_matrix();
  // 7 models (5 plus 2 with dropout) × 2 reductions × 2 dtypes × 2 h0 modes × 3 length
  // sets (all T; mixed reaching T; a padded tail), for each of 6 block lengths (vlrnn), 5 checkpoint variants and 4 tbptt variants.
  // The hand-written cells (gru_v1 .. gru_v4, lstm_block) run on a reduced grid, counted apart.
  // The linear recurrences and the bidirectional models run on grids of their own, counted
  // apart too.
  // Resets run on a grid of their own, counted apart.
  std::map<std::string, int> per_method, variant_cases, linear_cases, bidirectional_cases,
      reset_cases;
  for (const auto& c : cases) {
    if (!c.segment_starts.empty()) {
      reset_cases[c.method.substr(0, c.method.find(':'))]++;
      continue;
    }
    const bool hand_written = c.model.rfind("gru_v", 0) == 0 || c.model == "lstm_block";
    const bool linear = c.model == "mingru" || c.model == "minlstm" || c.model == "lru" ||
                        c.model == "ssm";
    auto& counts = hand_written             ? variant_cases
                   : linear                 ? linear_cases
                   : is_bidirectional_kind(c.model) ? bidirectional_cases
                                            : per_method;
    counts[c.method.substr(0, c.method.find(':'))]++;
  }
  EXPECT_EQ(per_method["vlrnn"], 7 * 2 * 2 * 2 * 3 * 6);
  EXPECT_EQ(per_method["checkpoint"], 7 * 2 * 2 * 2 * 3 * 5);
  EXPECT_EQ(per_method["tbptt"], 7 * 2 * 2 * 2 * 3 * 4);
  EXPECT_EQ(per_method.count("full"), 0u);
  // 7 shapes (4 GRU variants, a 2-layer GRU v4 with dropout, lstm_block with 1 layer and
  // with 3 and dropout) × 2 × 2 × 2 × 3 for vlrnn K ∈ {1, 7, T}.
  EXPECT_EQ(variant_cases["vlrnn"], 7 * 2 * 2 * 2 * 3 * 3);
  // 4 linear recurrences (mingru, minlstm with 2 layers and dropout, lru, ssm) on the same
  // reduced grid; 4 bidirectional shapes for checkpoint's 5 variants, none for vlrnn.
  EXPECT_EQ(linear_cases["vlrnn"], 4 * 2 * 2 * 2 * 3 * 3);
  EXPECT_EQ(bidirectional_cases["checkpoint"], 4 * 2 * 2 * 2 * 3 * 5);
  EXPECT_EQ(bidirectional_cases.count("vlrnn"), 0u);
  // bivlrnn: K = 1, 7, 5, T, T + 12 and a budget (percent=30); the planner's two budgets,
  // which it runs as bivlrnn on a bidirectional model.
  EXPECT_EQ(bidirectional_cases["bivlrnn"], 4 * 2 * 2 * 2 * 3 * 6);
  EXPECT_EQ(bidirectional_cases["planner"], 4 * 2 * 2 * 2 * 3 * 2);
  EXPECT_EQ(per_method.count("bivlrnn"), 0u);
  // Resets: 4 shapes × 2 reductions × float64 × 2 h0 modes × one set of mixed lengths, on
  // the reduced grid (vlrnn K ∈ {1, 7, T}); 2 bidirectional shapes for bivlrnn's K ∈ {1, 7, T}.
  EXPECT_EQ(reset_cases["vlrnn"], 4 * 2 * 1 * 2 * 1 * 3);
  EXPECT_EQ(reset_cases["bivlrnn"], 2 * 2 * 1 * 2 * 1 * 3);
  EXPECT_GT(reset_cases["checkpoint"], 0);
  EXPECT_GT(reset_cases["planner"], 0);
}

// The reset set holds a reset at step 0, two in adjacent steps, one at a sequence's last
// step and one inside a padded tail (NOTE [ Resets ] in vlrnn/core/sequence.h).
TEST(Matrix, ResetCasesHoldTheEdgeCases) {
  for (const auto& c : default_matrix()) {
    if (c.segment_starts.empty()) continue;
    bool at_zero = false, adjacent = false, at_last = false, in_tail = false;
    for (size_t b = 0; b < c.segment_starts.size(); ++b) {
      const auto& starts = c.segment_starts[b];
      const int64_t length = c.lengths.empty() ? c.time_steps : c.lengths[b];
      for (size_t i = 0; i < starts.size(); ++i) {
        at_zero |= starts[i] == 0;
        adjacent |= i > 0 && starts[i] == starts[i - 1] + 1 && starts[i] < length;
        at_last |= starts[i] == length - 1;
        in_tail |= starts[i] >= length && starts[i] < c.time_steps;
      }
    }
    EXPECT_TRUE(at_zero && adjacent && at_last && in_tail) << c.name();
    return;
  }
  ADD_FAILURE() << "the matrix has no case with resets";
}

// A case naming an unknown method is an error row, not a crash (wrong gradients are caught
// by the mutation tests, tests/verify/test_mutations.cpp).
TEST(Matrix, AnUnknownMethodIsAnErrorRow) {
  VerifyCase spec;
  spec.method = "no_such_method";
  auto bad = run_case(spec);
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.error.find("no_such_method"), std::string::npos);
  EXPECT_EQ(bad.error.find("frame #"), std::string::npos) << "no backtrace in a row";
}

TEST(Report, TableAndJsonHoldEveryCase) {
  VerifyCase spec;
  std::vector<VerifyOutcome> outcomes{run_case(spec)};
  std::ostringstream table;
  print_table(table, outcomes);
  EXPECT_NE(table.str().find(spec.name()), std::string::npos);
  EXPECT_EQ(summary_line(outcomes), "1 passed, 0 failed");
  auto json = nlohmann::json::parse(outcome_json(outcomes.front()));
  EXPECT_EQ(json["case"], spec.name());
  EXPECT_EQ(json["passed"], true);
}

}  // namespace
}  // namespace vlrnn::verify
