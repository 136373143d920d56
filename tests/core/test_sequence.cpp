#include "test_util.h"

namespace vlrnn {
namespace {

namespace rnn_utils = torch::nn::utils::rnn;

TEST(SequenceBatch, SliceClampsLengthsToTheBlock) {
  SequenceBatch batch;
  batch.inputs = torch::randn({10, 3, 2});
  batch.targets = torch::zeros({10, 3}, torch::kLong);
  batch.lengths = torch::tensor({10, 2, 6});
  auto block = batch.slice(4, 4);
  EXPECT_EQ(block.inputs.size(0), 4);
  EXPECT_TRUE(torch::equal(block.lengths, torch::tensor({4, 0, 2})));
}

TEST(SequenceBatch, FromPackedSequencesKeepsTheOriginalOrder) {
  auto lengths = torch::tensor({3, 5, 1}, torch::kLong);
  auto x = torch::randn({5, 3, 2});
  auto y = torch::randint(0, 4, {5, 3});
  auto batch = SequenceBatch::from_packed_sequences(
      rnn_utils::pack_padded_sequence(x, lengths, false, /*enforce_sorted=*/false),
      rnn_utils::pack_padded_sequence(y, lengths, false, false));
  EXPECT_TRUE(batch.from_packed);
  EXPECT_TRUE(torch::equal(batch.lengths, lengths));
  EXPECT_TRUE(torch::equal(batch.inputs.select(1, 1), x.select(1, 1)));
  EXPECT_TRUE(torch::equal(batch.targets.narrow(0, 0, 3).select(1, 0), y.narrow(0, 0, 3).select(1, 0)));
}

TEST(SequenceBatch, PackedTargetsOfOtherLengthsAreRejected) {
  auto x = rnn_utils::pack_padded_sequence(torch::randn({5, 3, 2}), torch::tensor({3, 5, 1}),
                                           false, false);
  auto y = rnn_utils::pack_padded_sequence(torch::randint(0, 4, {5, 3}), torch::tensor({3, 4, 1}),
                                           false, false);
  testing::expect_error_mentions([&] { SequenceBatch::from_packed_sequences(x, y); },
                                 {"targets (PackedSequence)", "same sequence lengths",
                                  "[3, 2, 2, 1, 1]", "[3, 2, 2, 1]"});
}

}  // namespace
}  // namespace vlrnn
