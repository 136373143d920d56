#include "test_util.h"

#include "lib/sweep_plan.h"

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

// Grid "a": 2 T x 2 batches, full + vlrnn at K = 4 and 8 -> 4 groups of 3 points; "b": one
// max_batch point per method -> 2 groups of 1.
SweepConfig plan_config() {
  return parse_sweep_config(json::parse(R"({"hidden": 4, "input": 2, "classes": 2, "block_length": [4, 8],
    "experiments": [
      {"name": "a", "methods": ["full", "vlrnn"], "T": [16, 64], "batch": [1, 2]},
      {"name": "b", "kind": "max_batch", "methods": ["full", "vlrnn:block_length=4"], "T": 16, "budget_mib": 1}]})"),
                            "plan");
}

std::vector<const SweepPoint*> pointers(const std::vector<SweepPoint>& points) {
  std::vector<const SweepPoint*> out;
  for (const auto& p : points) out.push_back(&p);
  return out;
}

TEST(SweepPlan, GroupsArePointsOfOneGridProblemAndMaxBatchPointsAlone) {
  const auto c = plan_config();
  const auto points = expand_points(c);
  ASSERT_EQ(points.size(), 14u);
  const auto groups = group_points(pointers(points), c);
  ASSERT_EQ(groups.size(), 6u);
  size_t next = 0;  // the groups partition the points and keep their order
  for (size_t g = 0; g < groups.size(); ++g) {
    EXPECT_EQ(groups[g].size(), g < 4 ? 3u : 1u);
    for (const auto* p : groups[g]) EXPECT_EQ(p, &points[next++]);
  }
}

TEST(SweepPlan, CostGrowsWithTheStepsRun) {
  const auto c = plan_config();
  const auto points = expand_points(c);
  const auto& e = c.experiments[0];
  // points[0]: T = 16, B = 1; points[3]: T = 16, B = 2; points[6]: T = 64, B = 1.
  EXPECT_DOUBLE_EQ(point_cost(points[3], e), 2.0 * point_cost(points[0], e));
  EXPECT_DOUBLE_EQ(point_cost(points[6], e), 4.0 * point_cost(points[0], e));
}

}  // namespace
}  // namespace vlrnn::experiments
