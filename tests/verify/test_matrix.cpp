// The verification matrix, as tests: every exact method variant equals full BPTT on every
// model × reduction × dtype × h0 case; approximate methods run without error.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/verify/matrix.h"

#include <algorithm>
#include <map>

namespace vlrnn::verify {
namespace {

std::map<std::string, std::vector<VerifyCase>> cases_by_method() {
  std::map<std::string, std::vector<VerifyCase>> groups;
  for (const auto& c : default_matrix()) groups[c.method].push_back(c);
  return groups;
}

std::vector<std::string> method_specs() {
  std::vector<std::string> specs;
  for (const auto& [spec, cases] : cases_by_method()) specs.push_back(spec);
  return specs;
}

class MatrixAgainstFull : public ::testing::TestWithParam<std::string> {};

TEST_P(MatrixAgainstFull, EveryCase) {
  const auto cases = cases_by_method().at(GetParam());
  // The 7 built-in model shapes × reductions × dtypes × h0 × 3 length sets (the hand-written
  // cells, gru_v* and lstm_block, and the linear recurrences come on top for some specs), and
  // the 4 bidirectional shapes for the methods that take them; the cases with resets come on
  // top (counted in Matrix.CoversTheIssueAxes).
  const std::string method = GetParam().substr(0, GetParam().find(':'));
  const auto built_in = std::count_if(cases.begin(), cases.end(), [](const VerifyCase& c) {
    const bool linear = c.model == "mingru" || c.model == "minlstm" || c.model == "lru" ||
                        c.model == "ssm";
    return c.model.rfind("gru_v", 0) != 0 && c.model != "lstm_block" && !linear &&
           !is_bidirectional_kind(c.model) && c.segment_starts.empty();
  });
  ASSERT_EQ(built_in, handles_left_to_right(method) ? 7 * 2 * 2 * 2 * 3 : 0);
  const auto bidirectional = std::count_if(cases.begin(), cases.end(), [](const VerifyCase& c) {
    return is_bidirectional_kind(c.model) && c.segment_starts.empty();
  });
  ASSERT_EQ(bidirectional, handles_bidirectional(method) ? 4 * 2 * 2 * 2 * 3 : 0);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name() + " " + c.method);
    const auto outcome = run_case(c);
    ASSERT_TRUE(outcome.error.empty()) << outcome.error;
    if (outcome.exact) {
      EXPECT_LE(outcome.diff.max_rel, outcome.tolerance) << "worst: " << outcome.diff.worst;
    } else {
      EXPECT_TRUE(std::isfinite(outcome.diff.grad_rel_error));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, MatrixAgainstFull, ::testing::ValuesIn(method_specs()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace vlrnn::verify
