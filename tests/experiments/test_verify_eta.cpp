// NOTE [ Verify's ETA ]: the planner's cases come last in the matrix and take tens of times
// a block method's; an ETA from the mean case so far must not ignore that.
#include "test_util.h"

#include "lib/verify_eta.h"

namespace vlrnn::experiments {
namespace {

std::vector<verify::VerifyCase> cases(const std::string& method, int n) {
  verify::VerifyCase c;
  c.method = method;
  return std::vector<verify::VerifyCase>(size_t(n), c);
}

TEST(VerifyEta, PlannerCasesNotYetRunAreEstimatedAsSlow) {
  auto all = cases("vlrnn:block_length=7", 10);
  const auto planner = cases("planner:percent=1", 10);
  all.insert(all.end(), planner.begin(), planner.end());
  VerifyEta eta;
  EXPECT_LT(eta.remaining(all, 0), 0);  // nothing to go on yet
  for (int i = 0; i < 5; ++i) eta.finished(all[size_t(i)], 1.0);
  // The mean case so far says 15 s for the 15 left; the planner's prior says far more.
  const double left = eta.remaining(all, 5);
  EXPECT_NEAR(left, 5.0 + 10.0 * VerifyEta::prior("planner"), 1e-9);
  EXPECT_GT(left, 5 * 15.0);
}

TEST(VerifyEta, AMethodsOwnCasesReplaceThePrior) {
  auto all = cases("vlrnn:block_length=7", 4);
  const auto planner = cases("planner:percent=1", 4);
  all.insert(all.end(), planner.begin(), planner.end());
  VerifyEta eta;
  for (int i = 0; i < 4; ++i) eta.finished(all[size_t(i)], 1.0);
  eta.finished(all[4], 3.0);  // this machine's planner: 3 times a vlrnn case
  EXPECT_NEAR(eta.remaining(all, 5), 3 * 3.0, 1e-9);
}

TEST(VerifyEta, CasesScaleWithTTimesB) {
  auto all = cases("vlrnn:block_length=7", 2);
  all[1].time_steps = 2 * all[0].time_steps;
  all[1].batch = 3 * all[0].batch;
  VerifyEta eta;
  eta.finished(all[0], 2.0);
  EXPECT_NEAR(eta.remaining(all, 1), 2.0 * 6, 1e-9);
}

}  // namespace
}  // namespace vlrnn::experiments
