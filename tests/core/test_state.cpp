#include "test_util.h"

namespace vlrnn {
namespace {

TEST(State, DetachedLeavesRequireGradAndShareNoGraph) {
  auto a = torch::randn({2, 3}, torch::requires_grad());
  State s{a * 2, a + 1};
  ASSERT_TRUE(s.requires_grad());
  auto leaves = s.detached_leaves();
  for (const auto& t : leaves) {
    EXPECT_TRUE(t.is_leaf());
    EXPECT_TRUE(t.requires_grad());
  }
  EXPECT_FALSE(s.detached().requires_grad());
  EXPECT_TRUE(torch::equal(leaves[0], s[0]));
}

TEST(StateSpec, FillsTheBatchDimension) {
  StateSpec spec{"h", {3, -1, 8}, 1};
  EXPECT_EQ(spec.shape_for_batch(5), (std::vector<int64_t>{3, 5, 8}));
}

}  // namespace
}  // namespace vlrnn
