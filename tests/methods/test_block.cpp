// The default block length's rule (NOTE [ A block that fits the cache ] in
// vlrnn/methods/block.h), as a pure function of T, one step's state bytes and the cache size.
#include "test_util.h"

#include "vlrnn/methods/block.h"

namespace vlrnn::block_test {
namespace {

constexpr int64_t kStepBytes = 1000;  // one step's state for the whole batch

TEST(CacheFittingBlockLength, AnUnknownCacheKeepsTheSquareRoot) {
  EXPECT_EQ(cache_fitting_block_length(400, kStepBytes, 0), 20);
  EXPECT_EQ(cache_fitting_block_length(401, kStepBytes, 0), 21);  // ceil
  EXPECT_EQ(cache_fitting_block_length(400, 0, 1 << 20), 20);
}

TEST(CacheFittingBlockLength, ABlockThatFitsIsNeverLengthened) {
  EXPECT_EQ(cache_fitting_block_length(400, kStepBytes, 20 * kStepBytes), 20);
  EXPECT_EQ(cache_fitting_block_length(400, kStepBytes, int64_t(1) << 40), 20);
}

TEST(CacheFittingBlockLength, ABlockThatOverflowsIsCutToFit) {
  EXPECT_EQ(cache_fitting_block_length(400, kStepBytes, 19 * kStepBytes), 19);
  EXPECT_EQ(cache_fitting_block_length(400, kStepBytes, 10 * kStepBytes + 999), 10);
}

// Never below ceil(sqrt(T) / 4): memory stays O(sqrt(T)) however small the cache.
TEST(CacheFittingBlockLength, NeverBelowAQuarterOfTheSquareRoot) {
  EXPECT_EQ(cache_fitting_block_length(400, kStepBytes, kStepBytes), 5);
  EXPECT_EQ(cache_fitting_block_length(401, kStepBytes, 1), 6);  // ceil(21 / 4)
  EXPECT_EQ(cache_fitting_block_length(1, kStepBytes, 1), 1);
}

}  // namespace
}  // namespace vlrnn::block_test
