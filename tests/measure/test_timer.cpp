#include "test_util.h"

#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/peak_gemm.h"
#include "vlrnn/measure/timer.h"

namespace vlrnn::measure {
namespace {

// No timed assertions: only the arithmetic on timings and the plumbing are checked.
TEST(Timer, SummarizeGivesMedianAndQuartiles) {
  const auto stats = summarize({5.0, 1.0, 3.0, 2.0, 4.0});
  EXPECT_EQ(stats.samples, 5);
  EXPECT_DOUBLE_EQ(stats.median, 3.0);
  EXPECT_DOUBLE_EQ(stats.min, 1.0);
  EXPECT_DOUBLE_EQ(stats.max, 5.0);
  EXPECT_DOUBLE_EQ(stats.q1, 2.0);
  EXPECT_DOUBLE_EQ(stats.q3, 4.0);
  EXPECT_DOUBLE_EQ(stats.mean, 3.0);
  const auto even = summarize({1.0, 2.0, 3.0, 4.0});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_DOUBLE_EQ(even.q1, 1.75);
  EXPECT_DOUBLE_EQ(summarize({7.0}).median, 7.0);
  testing::expect_error_mentions([] { summarize({}); }, {"seconds", "at least one"});
}

TEST(Timer, TimeRepeatsRunsWarmupPlusRepeats) {
  int calls = 0;
  const auto stats = time_repeats([&] { ++calls; }, 2, 3, torch::kCPU);
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(stats.samples, 3);
  EXPECT_GE(stats.min, 0.0);
  testing::expect_error_mentions([] { time_repeats([] {}, 0, 0, torch::kCPU); },
                                 {"repeats", ">= 1", "0"});
}

TEST(PeakGemm, ReportsAPositiveRate) {
  const auto peak = measure_peak_gemm(torch::kCPU, torch::kFloat32, 64, 2, 1);
  EXPECT_EQ(peak.n, 64);
  EXPECT_EQ(peak.time.samples, 2);
  EXPECT_GT(peak.flops_per_second, 0.0);
}

}  // namespace
}  // namespace vlrnn::measure
