#include "test_util.h"

#include "vlrnn/core/rng.h"

namespace vlrnn {
namespace {

TEST(RngState, RestoreReplaysTheSameDraws) {
  torch::manual_seed(11);
  auto snapshot = RngState::capture(torch::kCPU);
  auto first = torch::rand({5});
  auto second = torch::rand({5});
  EXPECT_FALSE(torch::equal(first, second));
  snapshot.restore();
  EXPECT_TRUE(torch::equal(torch::rand({5}), first));
}

TEST(RngState, RestoringNothingIsAnError) {
  RngState empty;
  testing::expect_error_mentions([&] { empty.restore(); }, {"nothing was captured"});
}

}  // namespace
}  // namespace vlrnn
