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

namespace vlrnn {
namespace {

// A model without randomness leaves the generator alone: snapshots share one tensor.
TEST(RngState, UnchangedGeneratorSharesTheSnapshot) {
  auto first = RngState::capture(torch::kCPU);
  auto second = RngState::capture(torch::kCPU);
  EXPECT_TRUE(first.shares_storage_with(second));
  torch::rand({3});
  auto third = RngState::capture(torch::kCPU);
  EXPECT_FALSE(third.shares_storage_with(second));
  second.restore();
  auto replay = torch::rand({3});
  first.restore();
  EXPECT_TRUE(torch::equal(torch::rand({3}), replay));
}

}  // namespace
}  // namespace vlrnn
