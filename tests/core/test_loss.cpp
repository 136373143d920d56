#include "test_util.h"

namespace vlrnn {
namespace {

TEST(StepWeights, SumIsOneOnEveryStep) {
  auto w = step_weights(Reduction::kSum, 0, 4, 4, 3, {}, torch::dtype(torch::kFloat64));
  EXPECT_TRUE(torch::equal(w, torch::ones({4, 3}, torch::kFloat64)));
}

TEST(StepWeights, MeanWithoutLengthsIsOneOverTB) {
  auto w = step_weights(Reduction::kMean, 2, 3, 10, 4, {}, torch::dtype(torch::kFloat64));
  EXPECT_EQ(w.sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_DOUBLE_EQ(w.sum().item<double>(), 12.0 / 40.0);
}

TEST(StepWeights, MeanWithLengthsAveragesEachSequenceOverItsOwnLength) {
  auto lengths = torch::tensor({4, 1, 2}, torch::kLong);
  auto w = step_weights(Reduction::kMean, 0, 4, 4, 3, lengths, torch::dtype(torch::kFloat64));
  // Each sequence's weights sum to 1/B over its own valid steps, zero beyond.
  auto per_sequence = w.sum(0);
  EXPECT_TRUE(torch::allclose(per_sequence, torch::full({3}, 1.0 / 3, torch::kFloat64)));
  EXPECT_EQ(w[1][1].item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(w[1][2].item<double>(), 1.0 / 6);
}

TEST(Reduction, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(reduction_from_string("sum"), Reduction::kSum);
  EXPECT_EQ(reduction_from_string("mean"), Reduction::kMean);
  testing::expect_error_mentions([] { reduction_from_string("avg"); },
                                 {"reduction", "\"sum\" or \"mean\"", "avg"});
}

}  // namespace
}  // namespace vlrnn
